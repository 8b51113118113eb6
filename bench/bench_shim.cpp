// shim_bench: what an intercepted call costs with libgpudx_shim.so, against the driver alone.
// Runs itself twice (without and with LD_PRELOAD of the shim) over the fake libcuda.so.1 of tests/shim
// and prints one table. The fake's own call costs a few ns, so "added" is the shim's overhead.
//   shim_bench SHIM_PATH PROC_ROOT [iterations]
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

extern "C" {
int cuInit(unsigned);
int cuDeviceGetPCIBusId(char*, int, int);
int cuDeviceGetAttribute(int*, int, int);
int cuGetProcAddress_v2(const char*, void**, int, unsigned long long, int*);
void fake_cuda_simulate_restore(void);
}

namespace {

template <class F>
double ns_per_call(long n, F&& f) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) f(i);
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

void child(long n) {
    cuInit(0);
    volatile int sink = 0;
    char bus[32];
    using AttrFn = int (*)(int*, int, int);
    void* p = nullptr;
    int st = 0;
    cuGetProcAddress_v2("cuDeviceGetAttribute", &p, 12000, 0, &st);
    auto via_proc = reinterpret_cast<AttrFn>(p);
    for (const char* phase : {"before restore", "after restore"}) {
        int v = 0;
        std::printf("%s|cuDeviceGetAttribute(PCI_DEVICE_ID)|%.1f\n", phase,
                    ns_per_call(n, [&](long i) { cuDeviceGetAttribute(&v, 34, static_cast<int>(i & 1)); sink = sink + v; }));
        std::printf("%s|cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)|%.1f\n", phase,
                    ns_per_call(n, [&](long i) { cuDeviceGetAttribute(&v, 16, static_cast<int>(i & 1)); sink = sink + v; }));
        std::printf("%s|cuDeviceGetAttribute via cuGetProcAddress|%.1f\n", phase,
                    ns_per_call(n, [&](long i) { via_proc(&v, 34, static_cast<int>(i & 1)); sink = sink + v; }));
        std::printf("%s|cuDeviceGetPCIBusId|%.1f\n", phase,
                    ns_per_call(n, [&](long i) { cuDeviceGetPCIBusId(bus, sizeof bus, static_cast<int>(i & 1)); sink = sink + bus[11]; }));
        fake_cuda_simulate_restore();
    }
}

std::map<std::string, double> run(const char* self, const char* preload, long n) {
    int fds[2];
    if (pipe(fds) != 0) return {};
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        if (preload) setenv("LD_PRELOAD", preload, 1);
        setenv("GPUDX_SHIM_BENCH_CHILD", std::to_string(n).c_str(), 1);
        execl(self, self, static_cast<char*>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t k; (k = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(k));
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    std::map<std::string, double> r;
    size_t pos = 0;
    while (pos < out.size()) {
        size_t end = out.find('\n', pos);
        if (end == std::string::npos) end = out.size();
        std::string line = out.substr(pos, end - pos);
        pos = end + 1;
        auto bar = line.rfind('|');
        if (bar != std::string::npos) r[line.substr(0, bar)] = std::atof(line.c_str() + bar + 1);
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    if (const char* n = getenv("GPUDX_SHIM_BENCH_CHILD")) {
        child(std::atol(n));
        return 0;
    }
    if (argc < 3) {
        std::fprintf(stderr, "usage: shim_bench SHIM_PATH PROC_ROOT [iterations]\n");
        return 2;
    }
    setenv("GPUDX_SHIM_PROC_ROOT", argv[2], 1);
    long n = argc > 3 ? std::atol(argv[3]) : 2000000;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 2;
    self[len] = '\0';
    auto base = run(self, nullptr, n);
    auto shim = run(self, argv[1], n);
    if (base.empty() || shim.empty()) {
        std::fprintf(stderr, "shim_bench: a measurement run failed\n");
        return 1;
    }
    std::printf("%-16s %-44s %12s %12s %10s\n", "phase", "call", "driver ns", "+shim ns", "added ns");
    for (const auto& [key, driver] : base) {
        auto bar = key.find('|');
        double with = shim.count(key) ? shim[key] : -1;
        std::printf("%-16s %-44s %12.1f %12.1f %10.1f\n", key.substr(0, bar).c_str(), key.substr(bar + 1).c_str(),
                    driver, with, with - driver);
    }
    std::printf("(%ld calls each, fake libcuda.so.1; after restore the shim rewrites every PCI answer)\n", n);
    return 0;
}
