// Kernel-log scanning throughput: the prefiltered scanner against a plain per-line classification
// (what a scanner without the whole-buffer prefilter would cost). Bytes/s is the number to compare.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
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

// An Xid storm: 1,000,000 Xid 95 / Xid 79 lines in 29 bursts over 8 GPUs, every line a candidate the scanner parses
// and tallies. Reported against two references timed in the same run: the same scanner over a quiet log of the same
// size (vs_quiet_scan: what a storm costs beyond reading bytes) and counting the storm's lines with memchr, what
// `LC_ALL=C grep -c` does (vs_line_count). The result must be one tally per GPU and code (tallies).
template <class F>
double best_seconds(F&& f, int runs = 3) {
    double best = 1e30;
    for (int i = 0; i < runs; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

void BM_ScanXidStorm1M(benchmark::State& state) {
    static const std::string storm = [] {
        std::string s;
        gpudx::bench::append_xid_storm(s, 1'000'000);
        return s;
    }();
    static const std::string quiet = [] {
        std::string s;
        gpudx::bench::append_quiet(s, storm.size());
        return s;
    }();
    auto scan = [](const std::string& text) {
        auto log = gpudx::scan_kernel_log(text);
        benchmark::DoNotOptimize(log);
        return log;
    };
    static const double quiet_s = best_seconds([&] { scan(quiet); });
    static const double count_s = best_seconds([&] {
        size_t n = 0;
        for (const char* p = storm.data(); (p = static_cast<const char*>(std::memchr(p, '\n', storm.data() + storm.size() - p)));
             ++p)
            ++n;
        benchmark::DoNotOptimize(n);
    });
    double total = 0;
    size_t tallies = 0;
    uint64_t counted = 0;
    for (auto _ : state) {
        auto t0 = std::chrono::steady_clock::now();
        auto log = scan(storm);
        total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        tallies = 0, counted = 0;
        if (log)
            for (auto& t : log->tallies)
                if (t.kind == gpudx::TallyKind::xid) ++tallies, counted += t.count;
    }
    double per = total / static_cast<double>(state.iterations());
    state.counters["vs_quiet_scan"] = per / quiet_s;
    state.counters["vs_line_count"] = per / count_s;
    state.counters["tallies"] = static_cast<double>(tallies);
    state.counters["xid_lines"] = static_cast<double>(counted);
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(storm.size()));
}
BENCHMARK(BM_ScanXidStorm1M)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ParseXid(benchmark::State& state) {
    std::string_view line = "NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.";
    for (auto _ : state) benchmark::DoNotOptimize(gpudx::parse_xid(line));
}
BENCHMARK(BM_ParseXid);

}  // namespace

BENCHMARK_MAIN();
