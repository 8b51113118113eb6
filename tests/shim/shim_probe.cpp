// shim_probe: asks the (fake) driver for PCI identity through every path real software uses, before and
// after a simulated restore, and asserts what it sees. Run with and without LD_PRELOAD=libgpudx_shim.so:
// `--expect corrected` and `--expect stale` make the same checks come out opposite, so each can fail.
//
//   shim_probe paths  --expect corrected|stale
//   shim_probe nvml   --expect translated|not-found|stands --link L --node-a DIR [--node-b DIR]
//   shim_probe hammer --expect corrected|stale --threads N --iterations N
//   shim_probe serve  (commands on stdin: query, restore, quit; answers end with a line "ready")
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

extern "C" {
// The fake libcuda.so.1 this program links against.
int cuInit(unsigned);
int cuDeviceGetPCIBusId(char*, int, int);
int cuDeviceGetByPCIBusId(int*, const char*);
int cuDeviceGetAttribute(int*, int, int);
int cuDeviceGetUuid_v2(void*, int);
int cuGetProcAddress(const char*, void**, int, unsigned long long);
int cuGetProcAddress_v2(const char*, void**, int, unsigned long long, int*);
void fake_cuda_simulate_restore(void);
}

namespace {

using BusIdFn = int (*)(char*, int, int);
using ByBusIdFn = int (*)(int*, const char*);
using AttrFn = int (*)(int*, int, int);
using GetProc1 = int (*)(const char*, void**, int, unsigned long long);
using GetProc2 = int (*)(const char*, void**, int, unsigned long long, int*);
using NvmlByBus = int (*)(const char*, void**);
using NvmlUuid = int (*)(void*, char*, unsigned);

const char* const kOldBus[2] = {"0000:00:06.0", "0000:00:07.0"};
const char* const kUuidAt06 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";

int g_failures = 0;

void check(bool ok, const std::string& what) {
    if (!ok) {
        ++g_failures;
        std::printf("FAIL: %s\n", what.c_str());
    }
}

std::string uuid_text(int dev) {
    unsigned char u[16];
    if (cuDeviceGetUuid_v2(u, dev) != 0) return "?";
    char out[48];
    std::snprintf(out, sizeof out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                  u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return out;
}

void* libcuda() {
    static void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h;
}

struct Path {
    std::string name;
    BusIdFn bus_id = nullptr;
    ByBusIdFn by_bus_id = nullptr;
    AttrFn attr = nullptr;
};

template <class Fn>
Fn via_proc1(GetProc1 gp, const char* symbol, int version) {
    void* p = nullptr;
    if (!gp || gp(symbol, &p, version, 0) != 0) return nullptr;
    return reinterpret_cast<Fn>(p);
}

template <class Fn>
Fn via_proc2(GetProc2 gp, const char* symbol, int version, unsigned long long flags) {
    void* p = nullptr;
    int status = -1;
    if (!gp || gp(symbol, &p, version, flags, &status) != 0 || status != 0) return nullptr;
    return reinterpret_cast<Fn>(p);
}

std::vector<Path> all_paths() {
    std::vector<Path> paths;
    paths.push_back({"direct", &cuDeviceGetPCIBusId, &cuDeviceGetByPCIBusId, &cuDeviceGetAttribute});
    void* h = libcuda();
    check(h != nullptr, "dlopen libcuda.so.1");
    paths.push_back({"dlsym", reinterpret_cast<BusIdFn>(dlsym(h, "cuDeviceGetPCIBusId")),
                     reinterpret_cast<ByBusIdFn>(dlsym(h, "cuDeviceGetByPCIBusId")),
                     reinterpret_cast<AttrFn>(dlsym(h, "cuDeviceGetAttribute"))});
    auto gp1 = reinterpret_cast<GetProc1>(dlsym(h, "cuGetProcAddress"));
    auto gp2 = reinterpret_cast<GetProc2>(dlsym(h, "cuGetProcAddress_v2"));
    paths.push_back({"getproc_v1", via_proc1<BusIdFn>(gp1, "cuDeviceGetPCIBusId", 11030),
                     via_proc1<ByBusIdFn>(gp1, "cuDeviceGetByPCIBusId", 11030),
                     via_proc1<AttrFn>(gp1, "cuDeviceGetAttribute", 11030)});
    for (unsigned long long flags : {0ull, 1ull, 2ull})
        paths.push_back({"getproc_v2_flags" + std::to_string(flags),
                         via_proc2<BusIdFn>(gp2, "cuDeviceGetPCIBusId", 12000, flags),
                         via_proc2<ByBusIdFn>(gp2, "cuDeviceGetByPCIBusId", 12000, flags),
                         via_proc2<AttrFn>(gp2, "cuDeviceGetAttribute", 12000, flags)});
    paths.push_back({"getproc_v2_linked", via_proc2<BusIdFn>(&cuGetProcAddress_v2, "cuDeviceGetPCIBusId", 12000, 0),
                     via_proc2<ByBusIdFn>(&cuGetProcAddress_v2, "cuDeviceGetByPCIBusId", 12000, 0),
                     via_proc2<AttrFn>(&cuGetProcAddress_v2, "cuDeviceGetAttribute", 12000, 0)});
    // The CUDA runtime's way: cuGetProcAddress_v2 from dlsym, asked for cuGetProcAddress itself.
    auto self12 = via_proc2<GetProc2>(gp2, "cuGetProcAddress", 12000, 0);
    paths.push_back({"runtime_12000", via_proc2<BusIdFn>(self12, "cuDeviceGetPCIBusId", 12000, 0),
                     via_proc2<ByBusIdFn>(self12, "cuDeviceGetByPCIBusId", 12000, 0),
                     via_proc2<AttrFn>(self12, "cuDeviceGetAttribute", 12000, 0)});
    auto self11 = via_proc2<GetProc1>(gp2, "cuGetProcAddress", 11030, 0);
    paths.push_back({"runtime_11030", via_proc1<BusIdFn>(self11, "cuDeviceGetPCIBusId", 11030),
                     via_proc1<ByBusIdFn>(self11, "cuDeviceGetByPCIBusId", 11030),
                     via_proc1<AttrFn>(self11, "cuDeviceGetAttribute", 11030)});

    // The self-query must hand back the same ABI that was asked for (what this process links to answers
    // which one that is, shim or not), and other entry points must be the driver's own.
    check(reinterpret_cast<void*>(self12) == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"),
          "cuGetProcAddress at 12000 is the _v2 ABI");
    check(reinterpret_cast<void*>(self11) == dlsym(RTLD_DEFAULT, "cuGetProcAddress"),
          "cuGetProcAddress at 11030 is the old ABI");
    void* name_fn = nullptr;
    int status = -1;
    if (self12) self12("cuDeviceGetName", &name_fn, 12000, 0, &status);
    Dl_info info{};
    check(name_fn && dladdr(name_fn, &info) && std::strstr(info.dli_fname, "libcuda.so.1"),
          "cuDeviceGetName resolves to libcuda's own function");
    check(name_fn == dlsym(h, "cuDeviceGetName"), "cuDeviceGetName through getproc == dlsym");
    for (auto& p : paths)
        check(p.bus_id && p.by_bus_id && p.attr, "path " + p.name + " resolved all three entry points");
    return paths;
}

// Checks one path for both ordinals against the expected owner of each ordinal's card.
void check_path(const Path& p, const char* const want_bus[2], const char* phase) {
    if (!p.bus_id || !p.attr || !p.by_bus_id) return;
    for (int d = 0; d < 2; ++d) {
        char bus[32] = {};
        int rc = p.bus_id(bus, sizeof bus, d);
        int dom = -1, b = -1, slot = -1;
        p.attr(&dom, 50, d);
        p.attr(&b, 33, d);
        p.attr(&slot, 34, d);
        std::printf("%s path=%s ord=%d bus=%s attr_domain=%d attr_bus=%d attr_device=%d uuid=%s\n", phase,
                    p.name.c_str(), d, bus, dom, b, slot, uuid_text(d).c_str());
        std::string where = std::string(phase) + " " + p.name + " ordinal " + std::to_string(d);
        check(rc == 0 && std::strcmp(bus, want_bus[d]) == 0, where + ": bus id " + bus + ", want " + want_bus[d]);
        unsigned want_dom = 0, want_b = 0, want_slot = 0;
        std::sscanf(want_bus[d], "%x:%x:%x", &want_dom, &want_b, &want_slot);
        check(dom == int(want_dom) && b == int(want_b) && slot == int(want_slot), where + ": PCI attributes");
        int other = p.attr(&dom, 16, d);  // any other attribute passes through
        check(other == 0 && dom == 132, where + ": other attribute passes through");
        int found = -1;
        int brc = p.by_bus_id(&found, want_bus[d]);
        check(brc == 0 && found == d, where + ": cuDeviceGetByPCIBusId(" + want_bus[d] + ") = " + std::to_string(found));
    }
}

int run_paths(bool corrected) {
    cuInit(0);
    auto paths = all_paths();
    for (auto& p : paths) check_path(p, kOldBus, "before");
    fake_cuda_simulate_restore();
    check(uuid_text(0) == "GPU-40cd403d-66ba-4608-72b9-5be5031085dc", "after restore ordinal 0 reports GPU1's UUID");
    const char* const swapped[2] = {kOldBus[1], kOldBus[0]};
    for (auto& p : paths) check_path(p, corrected ? swapped : kOldBus, "after");
    // A too-short buffer is truncated like the driver's own answer, never overrun.
    char small[8];
    std::memset(small, 'z', sizeof small);
    if (cuDeviceGetPCIBusId(small, 5, 0) == 0)
        check(small[4] == '\0' && small[5] == 'z' && std::strncmp(small, "0000", 4) == 0, "short buffer truncated");
    std::printf("%s: %d failure(s)\n", corrected ? "expect corrected" : "expect stale", g_failures);
    return g_failures ? 1 : 0;
}

void point_link(const std::string& link, const std::string& target) {
    std::string tmp = link + ".new";
    unlink(tmp.c_str());
    if (symlink(target.c_str(), tmp.c_str()) != 0 || rename(tmp.c_str(), link.c_str()) != 0) {
        std::perror("symlink");
        std::exit(2);
    }
}

int run_nvml(const std::string& expect, const std::string& link, const std::string& node_a, const std::string& node_b) {
    point_link(link, node_a);
    cuInit(0);
    char bus[32] = {};
    check(cuDeviceGetPCIBusId(bus, sizeof bus, 0) == 0 && std::strcmp(bus, kOldBus[0]) == 0, "before: ordinal 0 at 06");
    fake_cuda_simulate_restore();
    if (!node_b.empty()) point_link(link, node_b);
    std::string now_uuid = uuid_text(0);
    char now_bus[32] = {};
    cuDeviceGetPCIBusId(now_bus, sizeof now_bus, 0);
    std::printf("after restore: ordinal 0 uuid=%s cuDeviceGetPCIBusId=%s\n", now_uuid.c_str(), now_bus);

    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    check(h != nullptr, "dlopen libnvidia-ml.so.1");
    if (!h) return 1;
    reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"))();
    auto get_uuid = reinterpret_cast<NvmlUuid>(dlsym(h, "nvmlDeviceGetUUID"));
    // NCCL's way: the bus id it got earlier, through a symbol found with dlsym on NVML's handle.
    for (const char* name : {"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"}) {
        auto by_bus = reinterpret_cast<NvmlByBus>(dlsym(h, name));
        void* dev = nullptr;
        int rc = by_bus ? by_bus("00000000:00:06.0", &dev) : -1;
        char uuid[96] = "-";
        if (rc == 0) get_uuid(dev, uuid, sizeof uuid);
        std::printf("%s(00000000:00:06.0) rc=%d uuid=%s\n", name, rc, uuid);
        std::string n = name;
        if (expect == "translated")
            check(rc == 0 && now_uuid == uuid, n + ": old bus id translated to ordinal 0's card now");
        else if (expect == "not-found")
            check(rc == 6, n + ": old bus id is Not Found on the new node");
        else if (expect == "stands")
            check(rc == 0 && std::strcmp(uuid, kUuidAt06) == 0 && now_uuid != uuid,
                  n + ": the card that really sits at the old address is answered");
        // An address this process was never handed is never translated.
        rc = by_bus ? by_bus("00000000:00:09.0", &dev) : -1;
        check(rc == 6, n + ": unrelated unknown bus id stays Not Found");
    }
    std::printf("expect %s: %d failure(s)\n", expect.c_str(), g_failures);
    return g_failures ? 1 : 0;
}

int run_hammer(bool corrected, int threads, int iterations) {
    cuInit(0);
    auto paths = all_paths();
    std::atomic<bool> restored{false};
    std::atomic<long> wrong{0}, calls{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            const Path& p = paths[static_cast<size_t>(t) % paths.size()];
            for (int i = 0; i < iterations; ++i) {
                bool after = restored.load(std::memory_order_acquire);
                int d = i & 1;
                char bus[32] = {};
                int attr = -1, found = -1;
                p.bus_id(bus, sizeof bus, d);
                p.attr(&attr, 34, d);
                if (i % 16 == 0) p.by_bus_id(&found, kOldBus[d]);
                calls.fetch_add(3, std::memory_order_relaxed);
                if (!after) continue;
                const char* want = corrected ? kOldBus[1 - d] : kOldBus[d];
                int want_slot = corrected ? 7 - d : 6 + d;
                if (std::strcmp(bus, want) != 0 || attr != want_slot) wrong.fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    // The restore lands while the threads are mid-way, whatever the machine's speed: a quarter of the calls made.
    const long total_calls = 3L * threads * iterations;
    while (calls.load(std::memory_order_relaxed) < total_calls / 4) std::this_thread::yield();
    fake_cuda_simulate_restore();
    restored.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    std::printf("hammer: %d threads, %ld calls, %ld wrong answers after the restore\n", threads, calls.load(),
                wrong.load());
    check(wrong.load() == 0, "every answer after the restore is the expected one");
    return g_failures ? 1 : 0;
}

int run_serve() {
    cuInit(0);
    std::printf("pid %d\nready\n", int(getpid()));
    std::fflush(stdout);
    std::string cmd;
    while (std::getline(std::cin, cmd)) {
        if (cmd == "quit") break;
        if (cmd == "restore") fake_cuda_simulate_restore();
        if (cmd == "query") {
            for (int d = 0; d < 2; ++d) {
                char bus[32] = {};
                int slot = -1;
                cuDeviceGetPCIBusId(bus, sizeof bus, d);
                cuDeviceGetAttribute(&slot, 34, d);
                std::printf("ord=%d bus=%s attr_device=%d uuid=%s\n", d, bus, slot, uuid_text(d).c_str());
            }
        }
        std::printf("ready\n");
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: shim_probe paths|nvml|hammer|serve [options]\n");
        return 2;
    }
    std::string mode = argv[1], expect, link, node_a, node_b;
    int threads = 16, iterations = 20000;
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--expect") expect = v;
        else if (k == "--link") link = v;
        else if (k == "--node-a") node_a = v;
        else if (k == "--node-b") node_b = v;
        else if (k == "--threads") threads = std::atoi(v.c_str());
        else if (k == "--iterations") iterations = std::atoi(v.c_str());
    }
    if (mode == "paths") return run_paths(expect == "corrected");
    if (mode == "nvml") return run_nvml(expect, link, node_a, node_b);
    if (mode == "hammer") return run_hammer(expect == "corrected", threads, iterations);
    if (mode == "serve") return run_serve();
    std::fprintf(stderr, "shim_probe: unknown mode %s\n", mode.c_str());
    return 2;
}
