// device/nvml_cost.cpp: where the NVML layer's time goes on a real node, and which call sequence is cheapest.
// Each variant runs in a fresh forked child (as gpudx's probe does), ROUNDS times, the variants interleaved
// so that the machine's drift hits all alike. Prints, per variant, the median wall time of the child
// (fork to exit) and the median time of each step. Built on the device by device/speed.sh:
//   g++ -O2 -std=c++20 -Isrc device/nvml_cost.cpp -ldl -lpthread -o nvml_cost && ./nvml_cost 15 [variant...]
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "abi/nvml.hpp"

using namespace gpudx;

namespace {

struct FieldValue {  // nvmlFieldValue_t
    unsigned fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    unsigned long long value;
};
static_assert(sizeof(FieldValue) == 40);
using GetFieldValues = nvmlReturn_t (*)(nvmlDevice_t, int, FieldValue*);
using InitWithFlags = nvmlReturn_t (*)(unsigned);

void* lib;
template <class F>
F sym(const char* name) { return reinterpret_cast<F>(dlsym(lib, name)); }

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Step timings of one child, written to the parent as "label ms" lines.
struct Steps {
    int fd;
    double t = now_ms();
    void mark(const std::string& label) {
        double n = now_ms();
        dprintf(fd, "%s %.4f\n", label.c_str(), n - t);
        t = n;
    }
};

// Variant flags: "fields" reads ECC mode, ECC counts, retired pages and remapped rows with one
// nvmlDeviceGetFieldValues; "linkfields" adds the NVLink states to that batch (NVML_FI_DEV_NVLINK_GET_STATE
// per link); "threads" queries each GPU from its own thread; "noattach" initialises with NVML_INIT_FLAG_NO_ATTACH.
struct Flags {
    bool fields, linkfields, threads, noattach;
    explicit Flags(const std::string& v)
        : fields(v.find("fields") != std::string::npos), linkfields(v.find("linkfields") != std::string::npos),
          threads(v.find("threads") != std::string::npos), noattach(v.find("noattach") != std::string::npos) {}
};

void device_queries(nvmlDevice_t h, unsigned i, Steps* s, const Flags& f) {
    auto tag = [&](const char* what) { if (s) s->mark(std::string(what) + "(" + std::to_string(i) + ")"); };
    char buf[256];
    nvmlPciInfo_t pci{};
    unsigned u = 0, cur = 0, pend = 0;
    nvmlEnableState_t st = 0, a = 0, b = 0;
    sym<nvml::DeviceGetString>("nvmlDeviceGetUUID")(h, buf, 96); tag("uuid");
    sym<nvml::DeviceGetPciInfo>("nvmlDeviceGetPciInfo_v3")(h, &pci); tag("pci");
    sym<nvml::DeviceGetString>("nvmlDeviceGetName")(h, buf, 96); tag("name");
    sym<nvml::DeviceGetString>("nvmlDeviceGetSerial")(h, buf, 30); tag("serial");
    sym<nvml::DeviceGetUInt>("nvmlDeviceGetMinorNumber")(h, &u); tag("minor");
    sym<nvml::DeviceGetEnableState>("nvmlDeviceGetPersistenceMode")(h, &st); tag("persistence");
    sym<nvml::DeviceGetMigMode>("nvmlDeviceGetMigMode")(h, &cur, &pend); tag("mig_mode");
    if (f.fields) {
        std::vector<FieldValue> v;
        for (unsigned id : {1u, 4u, 6u, 31u, 142u, 143u, 144u, 145u}) v.push_back({id, 0, 0, 0, 0, 0, 0});
        if (f.linkfields)
            for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) v.push_back({165u, link, 0, 0, 0, 0, 0});
        sym<GetFieldValues>("nvmlDeviceGetFieldValues")(h, static_cast<int>(v.size()), v.data()); tag("field_values");
        if (i == 0 && s && f.linkfields)
            for (auto& x : v) dprintf(s->fd, "#field %u/%u rc=%d type=%d value=%llu\n", x.fieldId, x.scopeId, x.nvmlReturn, x.valueType, x.value);
    } else {
        unsigned long long n = 0;
        sym<nvml::DeviceGetEnableStatePair>("nvmlDeviceGetEccMode")(h, &a, &b); tag("ecc_mode");
        sym<nvml::DeviceGetTotalEccErrors>("nvmlDeviceGetTotalEccErrors")(h, 1, 0, &n); tag("ecc_volatile");
        sym<nvml::DeviceGetTotalEccErrors>("nvmlDeviceGetTotalEccErrors")(h, 1, 1, &n); tag("ecc_aggregate");
        sym<nvml::DeviceGetEnableState>("nvmlDeviceGetRetiredPagesPendingStatus")(h, &st); tag("retired_pending");
        unsigned c1, c2, c3, c4;
        sym<nvml::DeviceGetRemappedRows>("nvmlDeviceGetRemappedRows")(h, &c1, &c2, &c3, &c4); tag("remapped");
    }
    nvmlGpuFabricInfo_v2_t fab{};
    fab.version = nvmlGpuFabricInfo_v2;
    sym<nvml::DeviceGetGpuFabricInfoV>("nvmlDeviceGetGpuFabricInfoV")(h, &fab); tag("fabric");
    if (!f.linkfields) {
        for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
            nvmlEnableState_t act = 0;
            nvmlReturn_t rc = sym<nvml::DeviceGetNvLinkState>("nvmlDeviceGetNvLinkState")(h, link, &act);
            if (rc != NVML_SUCCESS) break;
        }
        tag("nvlink_states");
    }
    nvmlProcessInfo_t infos[16];
    unsigned n = 16;
    sym<nvml::DeviceGetComputeRunningProcesses>("nvmlDeviceGetComputeRunningProcesses_v3")(h, &n, infos); tag("processes");
}

void run_variant(const std::string& v, int fd) {
    Steps s{fd};
    Flags f(v);
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    s.mark("dlopen");
    if (f.noattach) sym<InitWithFlags>("nvmlInitWithFlags")(2);
    else sym<nvml::Init>("nvmlInit_v2")();
    s.mark("init");
    if (v == "init") return;
    char buf[96];
    sym<nvml::SystemGetString>("nvmlSystemGetDriverVersion")(buf, sizeof buf);
    unsigned count = 0;
    sym<nvml::DeviceGetCount>("nvmlDeviceGetCount_v2")(&count);
    s.mark("versions+count");
    std::vector<nvmlDevice_t> h(count);
    auto handle = sym<nvml::DeviceGetHandleByIndex>("nvmlDeviceGetHandleByIndex_v2");
    if (v == "handles") {
        for (unsigned i = 0; i < count; ++i) { handle(i, &h[i]); s.mark("handle(" + std::to_string(i) + ")"); }
        return;
    }
    if (f.threads) {
        std::vector<std::thread> t;
        for (unsigned i = 0; i < count; ++i)
            t.emplace_back([&, i] { handle(i, &h[i]); device_queries(h[i], i, nullptr, f); });
        for (auto& x : t) x.join();
        s.mark("all devices (threads)");
        return;
    }
    for (unsigned i = 0; i < count; ++i) {
        handle(i, &h[i]);
        s.mark("handle(" + std::to_string(i) + ")");
        device_queries(h[i], i, &s, f);
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
    std::vector<std::string> variants = {"init", "handles", "current", "fields", "linkfields", "threads",
                                         "threads+fields", "threads+linkfields", "noattach", "noattach+threads+fields"};
    if (argc > 2) variants.assign(argv + 2, argv + argc);
    std::map<std::string, std::vector<double>> wall;
    std::map<std::string, std::map<std::string, std::vector<double>>> steps;
    std::map<std::string, std::vector<std::string>> order;
    std::map<std::string, std::string> notes;
    for (int r = 0; r < rounds; ++r) {
        for (auto& v : variants) {
            int p[2];
            if (pipe(p) != 0) return 1;
            double t0 = now_ms();
            pid_t pid = fork();
            if (pid == 0) {
                close(p[0]);
                run_variant(v, p[1]);
                _exit(0);
            }
            close(p[1]);
            std::string out;
            char buf[4096];
            for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) out.append(buf, n);
            close(p[0]);
            waitpid(pid, nullptr, 0);
            wall[v].push_back(now_ms() - t0);
            size_t pos = 0;
            while (pos < out.size()) {
                size_t nl = out.find('\n', pos);
                std::string line = out.substr(pos, nl - pos);
                pos = nl == std::string::npos ? out.size() : nl + 1;
                if (line.rfind("#", 0) == 0) { if (r == 0) notes[v] += line + "\n"; continue; }
                size_t sp = line.rfind(' ');
                std::string label = line.substr(0, sp);
                if (!steps[v].count(label)) order[v].push_back(label);
                steps[v][label].push_back(std::atof(line.c_str() + sp + 1));
            }
        }
    }
    std::printf("%-14s %10s   (median of %d fresh children; fork to exit)\n", "variant", "wall ms", rounds);
    for (auto& v : variants) std::printf("%-14s %10.2f\n", v.c_str(), median(wall[v]));
    for (auto& v : variants) {
        std::printf("\n== %s: median ms per step\n", v.c_str());
        for (auto& label : order[v]) std::printf("  %-26s %8.3f\n", label.c_str(), median(steps[v][label]));
        if (notes.count(v)) std::printf("%s", notes[v].c_str());
    }
}
