// device/nvml_overlap.cpp: two floors of gpudx's NVML work on a real node (issue #34), each over fresh children.
//   1. Time: the health queries of one GPU (the groups gpudx's probe asks after the GPU's identity) one after
//      another in gpudx's order and reversed, each group timed, and the same groups from three threads at once. Whether the driver lets the first-call costs of
//      its subsystems (fields, thermal thresholds, clocks) overlap decides whether splitting a GPU's lane helps.
//   2. Memory: the resident size of a process that only loaded and initialised NVML and opened every GPU, which
//      is where the agent's NVML watcher child (`gpudx nvml-events`) cannot go below.
// Build and run on the node:
//   g++ -O2 -std=c++20 -Isrc device/nvml_overlap.cpp -ldl -pthread -o nvml_overlap && ./nvml_overlap 15
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "nvml_dl.hpp"

using namespace gpudx;
using namespace device_nvml;

namespace {

// The ECC totals, the link count and version, the power limit: what the probe's first field call asks.
const unsigned kFirstFields[] = {3, 5, 4, 6, 91, 190, 166};
const unsigned kSampleFields[] = {82, 186, 94};

void fields_group(nvmlDevice_t h) {
    auto fields = sym<nvml::DeviceGetFieldValues>("nvmlDeviceGetFieldValues");
    std::vector<nvmlFieldValue_t> v(std::size(kFirstFields));
    for (size_t i = 0; i < v.size(); ++i) v[i] = {}, v[i].fieldId = kFirstFields[i];
    fields(h, (int)v.size(), v.data());
}
void thermal_group(nvmlDevice_t h) {
    auto threshold = sym<nvml::DeviceGetTemperatureThreshold>("nvmlDeviceGetTemperatureThreshold");
    auto histogram = sym<nvml::DeviceGetRowRemapperHistogram>("nvmlDeviceGetRowRemapperHistogram");
    unsigned u = 0;
    threshold(h, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &u);
    threshold(h, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &u);
    nvmlRowRemapperHistogramValues_t hist{};
    histogram(h, &hist);
}
void clocks_group(nvmlDevice_t h) {
    auto reasons = sym<nvml::DeviceGetClocksEventReasons>("nvmlDeviceGetCurrentClocksEventReasons");
    auto temp = sym<nvml::DeviceGetTemperature>("nvmlDeviceGetTemperature");
    auto fields = sym<nvml::DeviceGetFieldValues>("nvmlDeviceGetFieldValues");
    unsigned long long r = 0;
    unsigned u = 0;
    reasons(h, &r);
    temp(h, NVML_TEMPERATURE_GPU, &u);
    std::vector<nvmlFieldValue_t> v(std::size(kSampleFields));
    for (size_t i = 0; i < v.size(); ++i) v[i] = {}, v[i].fieldId = kSampleFields[i];
    fields(h, (int)v.size(), v.data());
}

long rss_kb() {
    FILE* f = std::fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::atol(line + 6);
    if (f) std::fclose(f);
    return kb;
}

enum class Mode { sequential, reversed, threads, memory };

// Per group in the last sequential or reversed child: fields, thermal, clocks (ms), to tell a call's own cost from
// the first call's (a cost that moves with the order is the driver's first-call set-up).
struct GroupTimes { double fields = 0, thermal = 0, clocks = 0; };

// One fresh child: NVML loaded, initialised, every GPU opened (not timed), then the mode's work. Returns the time
// of the health groups in ms, or for `memory` the child's resident size in kB.
double child(Mode mode, GroupTimes* times = nullptr) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        double answer = 0;
        GroupTimes groups;
        if (mode == Mode::memory && std::getenv("BARE")) {
            answer = (double)rss_kb();
        } else {
            lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
            sym<nvml::Init>("nvmlInit_v2")();
            unsigned n = 0;
            sym<nvml::DeviceGetCount>("nvmlDeviceGetCount_v2")(&n);
            std::vector<nvmlDevice_t> handles(n);
            char uuid[96];
            for (unsigned i = 0; i < n; ++i) {
                sym<nvml::DeviceGetHandleByIndex>("nvmlDeviceGetHandleByIndex_v2")(i, &handles[i]);
                sym<nvml::DeviceGetString>("nvmlDeviceGetUUID")(handles[i], uuid, sizeof uuid);
            }
            double t = now_ms();
            for (auto h : handles) {
                if (mode == Mode::threads) {
                    std::thread a(fields_group, h), b(thermal_group, h), c(clocks_group, h);
                    a.join(), b.join(), c.join();
                } else {
                    auto timed = [](void (*group)(nvmlDevice_t), nvmlDevice_t d, double& into) {
                        double t0 = now_ms();
                        group(d);
                        into += now_ms() - t0;
                    };
                    if (mode == Mode::reversed) {
                        timed(clocks_group, h, groups.clocks), timed(thermal_group, h, groups.thermal);
                        timed(fields_group, h, groups.fields);
                    } else {
                        timed(fields_group, h, groups.fields), timed(thermal_group, h, groups.thermal);
                        timed(clocks_group, h, groups.clocks);
                    }
                }
            }
            answer = mode == Mode::memory ? (double)rss_kb() : now_ms() - t;
        }
        if (write(fd[1], &answer, sizeof answer) < 0) _exit(1);
        if (write(fd[1], &groups, sizeof groups) < 0) _exit(1);
        _exit(0);
    }
    double answer = -1;
    close(fd[1]);
    if (read(fd[0], &answer, sizeof answer) != sizeof answer) answer = -1;
    GroupTimes groups;
    if (read(fd[0], &groups, sizeof groups) == sizeof groups && times) *times = groups;
    close(fd[0]);
    waitpid(pid, nullptr, 0);
    return answer;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
    std::vector<double> seq, rev, par, mem;
    std::vector<double> fields_first[3], fields_last[3];  // fields, thermal, clocks
    for (int r = 0; r < rounds; ++r) {  // interleaved, so drift on the node touches all alike
        GroupTimes a, b;
        seq.push_back(child(Mode::sequential, &a));
        rev.push_back(child(Mode::reversed, &b));
        par.push_back(child(Mode::threads));
        mem.push_back(child(Mode::memory));
        fields_first[0].push_back(a.fields), fields_first[1].push_back(a.thermal), fields_first[2].push_back(a.clocks);
        fields_last[0].push_back(b.fields), fields_last[1].push_back(b.thermal), fields_last[2].push_back(b.clocks);
    }
    setenv("BARE", "1", 1);
    double bare = child(Mode::memory);
    double s = median(seq), p = median(par);
    std::printf("health groups of every GPU, median of %d fresh children: one after another %.3f ms, three threads "
                "per GPU %.3f ms (%.2fx)\n", rounds, s, p, p / s);
    std::printf("per group, fields first: fields %.3f, thermal %.3f, clocks %.3f ms; clocks first: clocks %.3f, "
                "thermal %.3f, fields %.3f ms (reversed total %.3f ms)\n",
                median(fields_first[0]), median(fields_first[1]), median(fields_first[2]), median(fields_last[2]),
                median(fields_last[1]), median(fields_last[0]), median(rev));
    std::printf("resident memory: NVML loaded, initialised, every GPU opened and asked %.1f MB; "
                "the same process before loading NVML %.1f MB\n", median(mem) / 1024, bare / 1024);
}
