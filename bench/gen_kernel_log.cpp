// gpudx_gen_kernel_log FILE BYTES [SEED]: writes a synthetic kernel log for bench/kernel_log_vs_grep.sh.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernel_log_synth.hpp"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s FILE BYTES [SEED]\n", argv[0]);
        return 64;
    }
    size_t total = std::strtoull(argv[2], nullptr, 10);
    uint32_t seed = argc > 3 ? static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)) : 1;
    std::FILE* f = std::fopen(argv[1], "wb");
    if (!f) {
        std::perror(argv[1]);
        return 1;
    }
    gpudx::bench::KernelLogSynth synth(seed);
    std::string chunk;
    size_t written = 0;
    while (written < total) {
        chunk.clear();
        synth.append(chunk, std::min<size_t>(8u << 20, total - written));
        if (std::fwrite(chunk.data(), 1, chunk.size(), f) != chunk.size()) {
            std::perror(argv[1]);
            return 1;
        }
        written += chunk.size();
    }
    return std::fclose(f) == 0 ? 0 : 1;
}
