// device/gpu_health.cpp: what the GPU-health queries of gpudx's NVML probe answer on a real node, and what each
// costs. Prints per GPU every answer (return code and value) and the time of each call, then the count of driver
// calls per GPU before and after the health queries, and the median time of the old and new per-GPU sequences
// over ROUNDS fresh children. Build and run on the node:
//   g++ -O2 -std=c++20 -Isrc device/gpu_health.cpp -ldl -o gpu_health && ./gpu_health 15
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "nvml_dl.hpp"

using namespace gpudx;
using namespace device_nvml;

namespace {

struct Api {
    nvml::DeviceGetFieldValues fields = sym<nvml::DeviceGetFieldValues>("nvmlDeviceGetFieldValues");
    nvml::DeviceGetNvLinkState state = sym<nvml::DeviceGetNvLinkState>("nvmlDeviceGetNvLinkState");
    nvml::DeviceGetNvLinkRemotePciInfo remote_pci = sym<nvml::DeviceGetNvLinkRemotePciInfo>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
    nvml::DeviceGetNvLinkRemoteDeviceType remote_type = sym<nvml::DeviceGetNvLinkRemoteDeviceType>("nvmlDeviceGetNvLinkRemoteDeviceType");
    nvml::DeviceGetClocksEventReasons reasons = sym<nvml::DeviceGetClocksEventReasons>("nvmlDeviceGetCurrentClocksEventReasons");
    nvml::DeviceGetTemperature temp = sym<nvml::DeviceGetTemperature>("nvmlDeviceGetTemperature");
    nvml::DeviceGetTemperatureThreshold threshold = sym<nvml::DeviceGetTemperatureThreshold>("nvmlDeviceGetTemperatureThreshold");
    nvml::DeviceGetRowRemapperHistogram histogram = sym<nvml::DeviceGetRowRemapperHistogram>("nvmlDeviceGetRowRemapperHistogram");
    nvml::DeviceGetUInt replays = sym<nvml::DeviceGetUInt>("nvmlDeviceGetPcieReplayCounter");
    nvml::DeviceGetUInt power = sym<nvml::DeviceGetUInt>("nvmlDeviceGetPowerUsage");
    nvml::DeviceGetUInt limit = sym<nvml::DeviceGetUInt>("nvmlDeviceGetEnforcedPowerLimit");
};

const unsigned kStatic[] = {3, 5, 4, 6, 11, 12, 22, 23, 7, 8, 18, 19, 9, 10, 20, 21, 13, 14, 24, 25, 15, 16, 26, 27, 17, 28,
                            29, 30, 91, 190, 166};
const unsigned kSample[] = {82, 186, 94};
const unsigned kLinkFacts[] = {165, 166, 164};
const unsigned kHopperCounters[] = {52, 59, 38, 45, 160};
const unsigned kBlackwellCounters[] = {214, 215, 208, 211};

// The new sequence for one GPU, as query.cpp makes it; returns the number of driver calls. `print`: every answer.
int health_sequence(const Api& a, nvmlDevice_t h, bool print) {
    int calls = 0;
    auto t = now_ms();
    auto lap = [&](const char* what) {
        double n = now_ms();
        if (print) std::printf("  %-44s %8.3f ms\n", what, n - t);
        t = n;
    };
    std::vector<nvmlFieldValue_t> v(std::size(kStatic));
    for (size_t i = 0; i < v.size(); ++i) v[i] = {}, v[i].fieldId = kStatic[i];
    int rc = a.fields(h, (int)v.size(), v.data()); ++calls;
    lap("static fields (extra part of the memory call)");
    if (print) for (auto& f : v) std::printf("    field %u: rc=%d value=%llu\n", f.fieldId, f.nvmlReturn, f.value.ullVal);
    unsigned version = v.back().nvmlReturn == 0 ? (unsigned)v.back().value.ullVal : 0;
    unsigned links = v[std::size(kStatic) - 3].nvmlReturn == 0 ? (unsigned)v[std::size(kStatic) - 3].value.ullVal : 18;
    unsigned u = 0;
    rc = a.threshold(h, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &u); ++calls; if (print) std::printf("    slowdown rc=%d %u C\n", rc, u);
    rc = a.threshold(h, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &u); ++calls; if (print) std::printf("    shutdown rc=%d %u C\n", rc, u);
    nvmlRowRemapperHistogramValues_t hist{};
    rc = a.histogram(h, &hist); ++calls;
    if (print) std::printf("    histogram rc=%d max %u high %u partial %u low %u none %u\n", rc, hist.max, hist.high, hist.partial, hist.low, hist.none);
    lap("thresholds + histogram");
    unsigned long long r = 0;
    rc = a.reasons(h, &r); ++calls; if (print) std::printf("    clock event reasons rc=%d 0x%llx\n", rc, r);
    rc = a.temp(h, NVML_TEMPERATURE_GPU, &u); ++calls; if (print) std::printf("    temperature rc=%d %u C\n", rc, u);
    lap("clock reasons + temperature");
    const unsigned* counters = version >= 5 ? kBlackwellCounters : kHopperCounters;
    size_t nc = version >= 5 ? std::size(kBlackwellCounters) : std::size(kHopperCounters);
    std::vector<nvmlFieldValue_t> s(std::size(kSample) + links * (3 + nc));
    size_t at = 0;
    for (unsigned id : kSample) s[at] = {}, s[at++].fieldId = id;
    for (unsigned l = 0; l < links; ++l) {
        for (unsigned id : kLinkFacts) s[at] = {}, s[at].fieldId = id, s[at++].scopeId = l;
        for (size_t c = 0; c < nc; ++c) s[at] = {}, s[at].fieldId = counters[c], s[at++].scopeId = l;
    }
    rc = a.fields(h, (int)s.size(), s.data()); ++calls;
    lap("sample fields (links, counters, power, replays)");
    if (print) for (auto& f : s) std::printf("    field %u link %u: rc=%d value=%llu\n", f.fieldId, f.scopeId, f.nvmlReturn, f.value.ullVal);
    for (unsigned l = 0; l < links; ++l) {
        nvmlPciInfo_t pci{};
        int type = -1;
        int r1 = a.remote_pci ? a.remote_pci(h, l, &pci) : -1; ++calls;
        int r2 = a.remote_type ? a.remote_type(h, l, &type) : -1; ++calls;
        if (print) std::printf("    link %u remote rc=%d %s type rc=%d %d\n", l, r1, pci.busId, r2, type);
    }
    lap("remote ends (all links)");
    rc = a.replays(h, &u); if (print) std::printf("    nvmlDeviceGetPcieReplayCounter rc=%d %u (the field is used)\n", rc, u);
    rc = a.power(h, &u); if (print) std::printf("    nvmlDeviceGetPowerUsage rc=%d %u mW\n", rc, u);
    rc = a.limit(h, &u); if (print) std::printf("    nvmlDeviceGetEnforcedPowerLimit rc=%d %u mW\n", rc, u);
    return calls;
}

// The 18 link-state calls the new sequence replaces.
int old_links(const Api& a, nvmlDevice_t h) {
    int calls = 0;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; ++l) {
        nvmlEnableState_t st;
        ++calls;
        if (a.state(h, l, &st) != 0) break;
    }
    return calls;
}

double child(bool health, unsigned& count) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    double t0 = now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
        sym<nvml::Init>("nvmlInit_v2")();
        Api a;
        unsigned n = 0;
        sym<nvml::DeviceGetCount>("nvmlDeviceGetCount_v2")(&n);
        double t = now_ms();
        for (unsigned i = 0; i < n; ++i) {
            nvmlDevice_t h;
            sym<nvml::DeviceGetHandleByIndex>("nvmlDeviceGetHandleByIndex_v2")(i, &h);
            if (i == 0) t = now_ms();  // the handles' attach cost is the same for both
            health ? health_sequence(a, h, false) : old_links(a, h);
        }
        double ms = now_ms() - t;
        if (write(fd[1], &ms, sizeof ms) < 0) _exit(1);
        _exit(0);
    }
    double ms = -1;
    close(fd[1]);
    if (read(fd[0], &ms, sizeof ms) != sizeof ms) ms = -1;
    close(fd[0]);
    waitpid(pid, nullptr, 0);
    (void)t0;
    (void)count;
    return ms;
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib || sym<nvml::Init>("nvmlInit_v2")() != 0) {
        std::printf("no NVML\n");
        return 1;
    }
    Api a;
    unsigned n = 0;
    sym<nvml::DeviceGetCount>("nvmlDeviceGetCount_v2")(&n);
    for (unsigned i = 0; i < n; ++i) {
        nvmlDevice_t h;
        sym<nvml::DeviceGetHandleByIndex>("nvmlDeviceGetHandleByIndex_v2")(i, &h);
        std::printf("GPU %u\n", i);
        int calls = health_sequence(a, h, true);
        std::printf("  driver calls: health sequence %d; the link-state calls it replaces %d\n", calls, old_links(a, h));
    }
    std::vector<double> before, after;
    unsigned c = 0;
    for (int r = 0; r < rounds; ++r) {
        before.push_back(child(false, c));
        after.push_back(child(true, c));
    }
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    std::printf("all GPUs, one after another, median of %d fresh children: link states only %.3f ms, health sequence "
                "%.3f ms (+%.3f ms)\n",
                rounds, before[rounds / 2], after[rounds / 2], after[rounds / 2] - before[rounds / 2]);
}
