// Kernel-log scanning throughput: the prefiltered scanner against a plain per-line classification
// (what a scanner without the whole-buffer prefilter would cost). Bytes/s is the number to compare.
#include <benchmark/benchmark.h>

#include <string>

#include "collect/kernel_log_parse.hpp"
#include "core/text.hpp"
#include "kernel_log_synth.hpp"

namespace {

const std::string& synthetic_log() {
    static const std::string text = [] {
        std::string s;
        gpudx::bench::KernelLogSynth synth(7);
        synth.append(s, 64u << 20);
        return s;
    }();
    return text;
}

void BM_ScanKernelLog(benchmark::State& state) {
    const std::string& text = synthetic_log();
    const size_t chunk = static_cast<size_t>(state.range(0));
    for (auto _ : state) {
        gpudx::KernelLogScanner scanner;
        for (size_t at = 0; at < text.size(); at += chunk)
            scanner.feed(std::string_view(text).substr(at, chunk));
        auto log = scanner.finish("<synthetic>");
        benchmark::DoNotOptimize(log);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ScanKernelLog)->Arg(1 << 20)->Arg(64 << 10)->Unit(benchmark::kMillisecond);

// Every line parsed and classified: the cost the prefilter avoids.
void BM_ClassifyEveryLine(benchmark::State& state) {
    const std::string& text = synthetic_log();
    for (auto _ : state) {
        size_t kept = 0, pos = 0;
        while (pos < text.size()) {
            size_t nl = text.find('\n', pos);
            std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
            auto p = gpudx::parse_log_line(line, gpudx::KernelLogFormat::dmesg);
            if (gpudx::classify_topic(p.message)) ++kept;
            pos = nl == std::string::npos ? text.size() : nl + 1;
        }
        benchmark::DoNotOptimize(kept);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ClassifyEveryLine)->Unit(benchmark::kMillisecond);

void BM_ParseXid(benchmark::State& state) {
    std::string_view line = "NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.";
    for (auto _ : state) benchmark::DoNotOptimize(gpudx::parse_xid(line));
}
BENCHMARK(BM_ParseXid);

}  // namespace

BENCHMARK_MAIN();
