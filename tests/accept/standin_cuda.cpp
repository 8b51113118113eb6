// A stand-in libcuda.so.1 for `gpudx accept` end-to-end tests without a GPU: "device" memory is host
// memory, the three PTX kernels run as their host versions (actions/accept_kernels.hpp), copies are
// memcpy. Faults come from GPUDX_STANDIN_FAULT:
//   no_device        cuInit answers CUDA_ERROR_NO_DEVICE
//   wrong_bytes_d2h  device-to-host copies deliver one wrong byte
//   wrong_bytes_peer peer copies deliver one wrong byte
//   wrong_bytes_d2d  device-to-device copies deliver one wrong byte
//   hang_peer        peer copies never return (the watchdog must catch it)
// GPUDX_STANDIN_GPUS sets the GPU count (default 2); each has 64 MiB and 4 multiprocessors.
// CUDA_VISIBLE_DEVICES (indices or UUID prefixes) is honoured like the real driver does.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actions/accept_kernels.hpp"

namespace {

namespace k = gpudx::accept_kernels;
using CUresult = int;
using CUdeviceptr = unsigned long long;
constexpr uint64_t kDeviceBytes = 64ull << 20;
constexpr int kSms = 4;

std::string fault() {
    const char* f = std::getenv("GPUDX_STANDIN_FAULT");
    return f ? f : "";
}
int gpu_count() {
    const char* n = std::getenv("GPUDX_STANDIN_GPUS");
    return n ? std::atoi(n) : 2;
}

std::string uuid_text(int d) {
    std::string out = "GPU-";
    const char* hex = "0123456789abcdef";
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        unsigned v = static_cast<unsigned>(0x10 * (d + 1) + i) & 0xffu;
        out += hex[v >> 4];
        out += hex[v & 15];
    }
    return out;
}

// Physical devices in the order CUDA_VISIBLE_DEVICES shows them; an entry that names none ends the list.
std::vector<int> visible() {
    std::vector<int> out;
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) {
        for (int d = 0; d < gpu_count(); ++d) out.push_back(d);
        return out;
    }
    std::string list(cvd);
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string e = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        int hit = -1;
        for (int d = 0; d < gpu_count() && e.size(); ++d)
            if (e.rfind("GPU-", 0) == 0 ? uuid_text(d).rfind(e, 0) == 0 : std::to_string(d) == e) hit = d;
        if (hit < 0) break;
        out.push_back(hit);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

struct Context {
    int device;
};
Context g_contexts[16];
thread_local int t_current = 0;
std::mutex g_mutex;
std::map<CUdeviceptr, std::pair<int, uint64_t>> g_allocations;  // ptr -> (device, bytes)
uint64_t g_used[16];

struct Event {
    std::chrono::steady_clock::time_point at;
};

enum FunctionId { kFillFn = 1, kVerifyFn = 2, kComputeFn = 3 };
int g_function_ids[4] = {0, kFillFn, kVerifyFn, kComputeFn};

void corrupt(void* dst, size_t bytes) {
    if (bytes) static_cast<unsigned char*>(dst)[bytes / 2] ^= 0x5a;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned) { return fault() == "no_device" || visible().empty() ? 100 : 0; }
CUresult cuDriverGetVersion(int* v) {
    *v = 13000;
    return 0;
}
CUresult cuDeviceGetCount(int* n) {
    *n = static_cast<int>(visible().size());
    return 0;
}
CUresult cuDeviceGet(int* d, int ordinal) {
    auto v = visible();
    if (ordinal < 0 || ordinal >= static_cast<int>(v.size())) return 101;
    *d = v[static_cast<size_t>(ordinal)];
    return 0;
}
CUresult cuDeviceGetName(char* name, int len, int d) {
    std::snprintf(name, static_cast<size_t>(len), "Stand-in GPU %d", d);
    return 0;
}
CUresult cuDeviceGetUuid_v2(char* uuid, int d) {
    for (int i = 0; i < 16; ++i) uuid[i] = static_cast<char>(0x10 * (d + 1) + i);
    return 0;
}
CUresult cuDeviceGetPCIBusId(char* bus, int len, int d) {
    std::snprintf(bus, static_cast<size_t>(len), "0000:00:%02X.0", 6 + d);
    return 0;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
    *v = attr == 16 ? kSms : attr == 75 ? 9 : 0;
    return 0;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, int) {
    *bytes = kDeviceBytes;
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void** ctx, int d) {
    g_contexts[d].device = d;
    *ctx = &g_contexts[d];
    return 0;
}
CUresult cuCtxSetCurrent(void* ctx) {
    if (ctx) t_current = static_cast<Context*>(ctx)->device;
    return 0;
}
CUresult cuCtxEnablePeerAccess(void*, unsigned) { return 0; }
CUresult cuDeviceCanAccessPeer(int* can, int, int) {
    *can = 1;
    return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
    std::lock_guard lock(g_mutex);
    if (g_used[t_current] + bytes > kDeviceBytes) return 2;
    void* mem = std::malloc(bytes ? bytes : 1);
    if (!mem) return 2;
    *p = reinterpret_cast<CUdeviceptr>(mem);
    g_allocations[*p] = {t_current, bytes};
    g_used[t_current] += bytes;
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    std::lock_guard lock(g_mutex);
    auto it = g_allocations.find(p);
    if (it == g_allocations.end()) return 1;
    g_used[it->second.first] -= it->second.second;
    g_allocations.erase(it);
    std::free(reinterpret_cast<void*>(p));
    return 0;
}
CUresult cuMemGetInfo_v2(size_t* free_b, size_t* total) {
    std::lock_guard lock(g_mutex);
    *free_b = kDeviceBytes - g_used[t_current];
    *total = kDeviceBytes;
    return 0;
}
CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
    *p = std::malloc(bytes);
    return *p ? 0 : 2;
}
CUresult cuMemFreeHost(void* p) {
    std::free(p);
    return 0;
}
CUresult cuMemsetD32_v2(CUdeviceptr p, unsigned v, size_t n) {
    auto* w = reinterpret_cast<uint32_t*>(p);
    for (size_t i = 0; i < n; ++i) w[i] = v;
    return 0;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
    std::memcpy(dst, reinterpret_cast<void*>(src), bytes);
    return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, void*) {
    std::memcpy(dst, reinterpret_cast<void*>(src), bytes);
    if (fault() == "wrong_bytes_d2h") corrupt(dst, bytes);
    return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, void*) {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void*) {
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), bytes);
    if (fault() == "wrong_bytes_d2d") corrupt(reinterpret_cast<void*>(dst), bytes);
    return 0;
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, void*, CUdeviceptr src, void*, size_t bytes, void*) {
    if (fault() == "hang_peer")
        for (;;) ::pause();
    std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), bytes);
    if (fault() == "wrong_bytes_peer") corrupt(reinterpret_cast<void*>(dst), bytes);
    return 0;
}

CUresult cuStreamCreate(void** s, unsigned) {
    static int stream_token;
    *s = &stream_token;
    return 0;
}
CUresult cuStreamSynchronize(void*) { return 0; }
CUresult cuEventCreate(void** e, unsigned) {
    *e = new Event{};
    return 0;
}
CUresult cuEventDestroy_v2(void* e) {
    delete static_cast<Event*>(e);
    return 0;
}
CUresult cuEventRecord(void* e, void*) {
    static_cast<Event*>(e)->at = std::chrono::steady_clock::now();
    return 0;
}
CUresult cuEventSynchronize(void*) { return 0; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
    double d = std::chrono::duration<double, std::milli>(static_cast<Event*>(b)->at - static_cast<Event*>(a)->at).count();
    *ms = static_cast<float>(d > 0.001 ? d : 0.001);
    return 0;
}

CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned, int*, void**) {
    std::string text(static_cast<const char*>(image));
    for (auto* name : {".entry gpudx_fill", ".entry gpudx_verify", ".entry gpudx_compute"})
        if (text.find(name) == std::string::npos) return 218;  // CUDA_ERROR_INVALID_PTX
    static int module_token;
    *module = &module_token;
    return 0;
}
CUresult cuModuleGetFunction(void** fn, void*, const char* name) {
    std::string n(name);
    int id = n == k::kFill ? kFillFn : n == k::kVerify ? kVerifyFn : n == k::kCompute ? kComputeFn : 0;
    if (!id) return 500;
    *fn = &g_function_ids[id];
    return 0;
}
CUresult cuLaunchKernel(void* fn, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned, unsigned, void*,
                        void** args, void**) {
    int id = *static_cast<int*>(fn);
    auto u64 = [&](int i) { return *static_cast<uint64_t*>(args[i]); };
    auto u32 = [&](int i) { return *static_cast<uint32_t*>(args[i]); };
    if (id == kFillFn || id == kVerifyFn) {
        uint64_t ptr = u64(0), words = u64(1), seed = u64(3), base = u64(4);
        uint32_t kind = u32(2);
        auto* w = reinterpret_cast<uint64_t*>(ptr);
        if (id == kFillFn) {
            for (uint64_t i = 0; i < words; ++i) w[i] = k::pattern_word(kind, base + i, ptr + 8 * i, seed);
        } else {
            auto* errors = reinterpret_cast<uint64_t*>(u64(5));
            auto* first = reinterpret_cast<uint64_t*>(u64(6));
            for (uint64_t i = 0; i < words; ++i)
                if (w[i] != k::pattern_word(kind, base + i, ptr + 8 * i, seed)) {
                    ++*errors;
                    if (base + i < *first) *first = base + i;
                }
        }
        return 0;
    }
    if (id == kComputeFn) {
        auto* values = reinterpret_cast<uint32_t*>(u64(0));
        auto* smids = reinterpret_cast<uint32_t*>(u64(1));
        k::ComputeAnswer answer(u32(2));
        for (uint64_t g = 0; g < uint64_t(gx) * bx; ++g) values[g] = answer.value(static_cast<uint32_t>(g));
        for (unsigned b = 0; b < gx; ++b) smids[b] = b % kSms;
        return 0;
    }
    return 400;
}

}  // extern "C"
