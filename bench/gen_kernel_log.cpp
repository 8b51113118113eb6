// gpudx_gen_kernel_log FILE BYTES [SEED]: writes a synthetic kernel log for bench/kernel_log_vs_grep.sh.
// gpudx_gen_kernel_log --xid-storm FILE LINES: an Xid storm of LINES lines in 29 bursts (bench/xid_storm_vs_grep.sh).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernel_log_synth.hpp"

int main(int argc, char** argv) {
    if (argc == 4 && std::string(argv[1]) == "--xid-storm") {
        std::string text;
        gpudx::bench::append_xid_storm(text, std::strtoull(argv[3], nullptr, 10));
        std::FILE* f = std::fopen(argv[2], "wb");
        if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
            std::perror(argv[2]);
            return 1;
        }
        return std::fclose(f) == 0 ? 0 : 1;
    }
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
