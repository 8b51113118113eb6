// libgpudx_shim.so: keeps a process's PCI identity right after a CUDA checkpoint/restore onto another GPU.
//
// After such a restore the driver answers cuDeviceGetUuid_v2 with the new card but keeps answering
// cuDeviceGetPCIBusId and the PCI attributes with the old card's address (NVIDIA/cuda-checkpoint#48).
// This library answers those from the UUID the driver reports *now*, mapped to the card's current address
// (procfs, then NVML). Everything else passes through untouched, and any failure gives the driver's own
// answer. docs/shim.md explains the design; the invariants that matter here:
//  - no locks on any path: reads are one acquire load of an immutable View; writers publish with CAS;
//  - no exception, no libgpudx code, no allocation on the hot path;
//  - the real functions are found through the caller's own libcuda/libnvidia-ml (never our own exports).
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "shim/shim_internal.hpp"
#include "shim/shim_parse.hpp"

#define GPUDX_SHIM_EXPORT extern "C" __attribute__((visibility("default")))

using gpudx::CUdevice;
using gpudx::CUdriverProcAddressQueryResult;
using gpudx::CUresult;
using gpudx::cuuint64_t;
using gpudx::CUuuid;
using gpudx::nvmlDevice_t;
using gpudx::nvmlPciInfo_t;
using gpudx::nvmlReturn_t;
using namespace gpudx::shim;

// ---- Interposed entry points (defined at the end of the file) ----
GPUDX_SHIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
GPUDX_SHIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                               CUdriverProcAddressQueryResult* symbolStatus);
GPUDX_SHIM_EXPORT CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev);
GPUDX_SHIM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId);
GPUDX_SHIM_EXPORT CUresult cuDeviceGetAttribute(int* value, int attrib, CUdevice dev);
GPUDX_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* busId, nvmlDevice_t* device);
GPUDX_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* busId, nvmlDevice_t* device);

extern "C" {
__attribute__((visibility("hidden"), used)) void* gpudx_shim_real_dlsym = nullptr;
}

namespace {

using DlsymFn = void* (*)(void*, const char*);

// ---- Configuration (environment, read once) ----

struct Config {
    char proc_root[512] = "";  // GPUDX_SHIM_PROC_ROOT: where /proc/driver/nvidia lives ("" = /)
    char state_dir[512] = "";  // GPUDX_SHIM_STATE_DIR, else /dev/shm, else /tmp
    int log_fd = -1;           // GPUDX_SHIM_LOG=stderr|PATH
    bool observe = false;      // GPUDX_SHIM_MODE=observe: record and publish, never change an answer
    bool use_nvml = true;      // GPUDX_SHIM_NVML=0: procfs only
};

Config g_config;
std::atomic<int> g_config_state{0};  // 0 unread, 1 reading, 2 ready

void copy_env(const char* name, char* out, size_t cap) {
    const char* v = getenv(name);
    if (v && std::strlen(v) < cap) std::strcpy(out, v);
}

bool dir_writable(const char* dir) {
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK | X_OK) == 0;
}

void read_config() {
    Config c;
    copy_env("GPUDX_SHIM_PROC_ROOT", c.proc_root, sizeof c.proc_root);
    copy_env("GPUDX_SHIM_STATE_DIR", c.state_dir, sizeof c.state_dir);
    if (!c.state_dir[0]) std::strcpy(c.state_dir, dir_writable("/dev/shm") ? "/dev/shm" : "/tmp");
    if (const char* mode = getenv("GPUDX_SHIM_MODE")) c.observe = std::strcmp(mode, "observe") == 0;
    if (const char* nvml = getenv("GPUDX_SHIM_NVML")) c.use_nvml = std::strcmp(nvml, "0") != 0;
    if (const char* log = getenv("GPUDX_SHIM_LOG"); log && *log) {
        if (std::strcmp(log, "stderr") == 0)
            c.log_fd = STDERR_FILENO;
        else
            c.log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    g_config = c;
}

// Never blocks: a thread that finds another one reading waits a bounded while, then gets nullptr and the
// caller answers as the driver did.
const Config* config() {
    int s = g_config_state.load(std::memory_order_acquire);
    if (s == 2) return &g_config;
    int expected = 0;
    if (g_config_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        read_config();
        g_config_state.store(2, std::memory_order_release);
        return &g_config;
    }
    for (int i = 0; i < 10000; ++i) {
        if (g_config_state.load(std::memory_order_acquire) == 2) return &g_config;
        sched_yield();
    }
    return nullptr;
}

uint64_t coarse_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- Logging: off unless GPUDX_SHIM_LOG is set ----

__attribute__((format(printf, 1, 2))) void log_line(const char* fmt, ...) {
    const Config* c = config();
    if (!c || c->log_fd < 0) return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "gpudx-shim[%d]: ", static_cast<int>(getpid()));
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
    va_end(ap);
    size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
    if (len > sizeof buf - 2) len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t ignored = write(c->log_fd, buf, len);
    (void)ignored;
}

// ---- The real entry points ----

enum RealFn : int {
    kGetProcAddress,
    kGetProcAddressV2,
    kGetPCIBusId,
    kGetByPCIBusId,
    kGetAttribute,
    kNvmlByBusId,
    kNvmlByBusIdV2,
    kInterposedCount,  // the entries above have a wrapper; those below are only called
    kGetUuidV2 = kInterposedCount,
    kGetUuid,
    kGetCount,
    kRealCount,
};

const char* const kRealNames[kRealCount] = {
    "cuGetProcAddress", "cuGetProcAddress_v2",           "cuDeviceGetPCIBusId", "cuDeviceGetByPCIBusId",
    "cuDeviceGetAttribute", "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2",
    "cuDeviceGetUuid_v2", "cuDeviceGetUuid", "cuDeviceGetCount",
};

bool is_nvml_fn(int i) { return i == kNvmlByBusId || i == kNvmlByBusIdV2; }

void* wrapper_of(int i) {
    switch (i) {
        case kGetProcAddress: return reinterpret_cast<void*>(&cuGetProcAddress);
        case kGetProcAddressV2: return reinterpret_cast<void*>(&cuGetProcAddress_v2);
        case kGetPCIBusId: return reinterpret_cast<void*>(&cuDeviceGetPCIBusId);
        case kGetByPCIBusId: return reinterpret_cast<void*>(&cuDeviceGetByPCIBusId);
        case kGetAttribute: return reinterpret_cast<void*>(&cuDeviceGetAttribute);
        case kNvmlByBusId: return reinterpret_cast<void*>(&nvmlDeviceGetHandleByPciBusId);
        case kNvmlByBusIdV2: return reinterpret_cast<void*>(&nvmlDeviceGetHandleByPciBusId_v2);
        default: return nullptr;
    }
}

bool is_own(const void* p) {
    for (int i = 0; i < kInterposedCount; ++i)
        if (p == wrapper_of(i)) return true;
    return false;
}

int interposed_index(const char* name) {
    if (!name || (name[0] != 'c' && name[0] != 'n')) return -1;
    for (int i = 0; i < kInterposedCount; ++i)
        if (std::strcmp(name, kRealNames[i]) == 0) return i;
    return -1;
}

std::atomic<void*> g_real[kRealCount];
std::atomic<void*> g_cuda_handle{nullptr};
std::atomic<void*> g_nvml_handle{nullptr};

DlsymFn real_dlsym() {
    return reinterpret_cast<DlsymFn>(gpudx_shim_resolve_real_dlsym());
}

// True when `p` lies in the library family's file (libcuda.so* or libnvidia-ml.so*).
bool in_family(const void* p, bool nvml) {
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname) return false;
    const char* base = std::strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    const char* prefix = nvml ? "libnvidia-ml.so" : "libcuda.so";
    return std::strncmp(base, prefix, std::strlen(prefix)) == 0;
}

// Remembers the library that `p` came from, so later lookups use the same copy (a node may carry two).
void learn_handle(const void* p, bool nvml) {
    std::atomic<void*>& slot = nvml ? g_nvml_handle : g_cuda_handle;
    if (slot.load(std::memory_order_acquire)) return;
    Dl_info info;
    if (!dladdr(p, &info) || !info.dli_fname) return;
    void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return;
    void* expected = nullptr;
    if (!slot.compare_exchange_strong(expected, h, std::memory_order_acq_rel)) dlclose(h);
}

void store_real(int i, void* p) {
    if (!p || is_own(p)) return;
    void* expected = nullptr;
    g_real[i].compare_exchange_strong(expected, p, std::memory_order_acq_rel);
}

void* resolve_real(int i) {
    DlsymFn rd = real_dlsym();
    if (!rd) return nullptr;
    bool nvml = is_nvml_fn(i);
    void* p = nullptr;
    if (void* h = (nvml ? g_nvml_handle : g_cuda_handle).load(std::memory_order_acquire)) p = rd(h, kRealNames[i]);
    if (!p) {
        // The next definition after this library: the process's own libcuda when it links one.
        p = rd(RTLD_NEXT, kRealNames[i]);
        if (p && (is_own(p) || !in_family(p, nvml))) p = nullptr;
    }
    if (!p) {
        // Loaded privately (dlopen with RTLD_LOCAL, as the CUDA runtime and NCCL do): find it by soname.
        if (void* h = dlopen(nvml ? "libnvidia-ml.so.1" : "libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
            p = rd(h, kRealNames[i]);
            dlclose(h);
        }
    }
    if (p && !is_own(p)) {
        learn_handle(p, nvml);
        store_real(i, p);
    }
    return g_real[i].load(std::memory_order_acquire);
}

inline void* real(int i) {
    void* p = g_real[i].load(std::memory_order_acquire);
    return p ? p : resolve_real(i);
}

template <class Fn>
inline Fn real_as(int i) {
    return reinterpret_cast<Fn>(real(i));
}

// ---- What each ordinal is now ----

enum Source : uint8_t { kSourceNone, kSourceProcfs, kSourceNvml };
const char* source_name(uint8_t s) { return s == kSourceProcfs ? "procfs" : s == kSourceNvml ? "nvml" : "none"; }

// Immutable once published; replaced (never freed: a reader may still hold it) when the UUID changes.
struct View {
    uint8_t uuid[16];
    uint64_t current;  // kNoAddress: the UUID's card could not be found
    uint8_t source;
    const View* retired_next;  // set once, when a newer view replaces this one (g_retired)
};

// Replaced views stay reachable here for the life of the process: readers that loaded one before it was replaced
// may still use it, and a leak checker sees them held, not lost. A few per restore, so the list stays short.
std::atomic<const View*> g_retired{nullptr};

void retire(const View* old) {
    auto* v = const_cast<View*>(old);  // only retired_next changes, and no reader looks at it
    const View* head = g_retired.load(std::memory_order_relaxed);
    do {
        v->retired_next = head;
    } while (!g_retired.compare_exchange_weak(head, old, std::memory_order_release, std::memory_order_relaxed));
}

constexpr int kMaxOrdinals = 64;
constexpr int kHandedSlots = 4;
constexpr uint64_t kRetryNegativeNs = 1000000000ull;

enum CorrectionKind : uint32_t { kKindBusId = 1, kKindAttribute = 2, kKindByBusId = 4, kKindNvml = 8 };

struct Slot {
    std::atomic<const View*> view{nullptr};
    std::atomic<uint64_t> retry_after_ns{0};
    std::atomic<uint64_t> driver_address{kNoAddress};  // the driver's own bus id, as last seen
    std::atomic<int> driver_domain_digits{4};
    std::atomic<uint64_t> corrected{0};
    std::atomic<uint64_t> handed[kHandedSlots] = {};  // addresses handed to the process, +1 (0 = empty)
    std::atomic<uint32_t> logged{0};                  // CorrectionKind bits already logged for this view
    std::atomic<uint32_t> uuid_changes{0};
};

Slot g_slots[kMaxOrdinals];
std::atomic<uint64_t> g_nvml_translations{0};

void request_publish(bool state_changed);

bool query_uuid(CUdevice dev, uint8_t out[16]) {
    using Fn = gpudx::cu::DeviceGetUuid;
    CUuuid uuid;
    if (auto v2 = real_as<Fn>(kGetUuidV2)) {
        if (v2(&uuid, dev) == gpudx::CUDA_SUCCESS) return std::memcpy(out, uuid.bytes, 16), true;
    } else if (auto v1 = real_as<Fn>(kGetUuid)) {
        if (v1(&uuid, dev) == gpudx::CUDA_SUCCESS) return std::memcpy(out, uuid.bytes, 16), true;
    }
    return false;
}

bool procfs_lookup(const uint8_t uuid[16], uint64_t* out) {
    const Config* c = config();
    if (!c) return false;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/proc/driver/nvidia/gpus", c->proc_root);
    DIR* d = opendir(dir);
    if (!d) return false;
    bool found = false;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        char path[900];
        snprintf(path, sizeof path, "%s/%s/information", dir, e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        char text[4096];
        ssize_t n = read(fd, text, sizeof text);
        close(fd);
        if (n <= 0) continue;
        InformationFile info = parse_information(text, static_cast<size_t>(n));
        if (!info.has_uuid || std::memcmp(info.uuid, uuid, 16) != 0) continue;
        uint64_t a = info.location != kNoAddress ? info.location : parse_bus_id(e->d_name, std::strlen(e->d_name));
        if (a != kNoAddress) *out = a, found = true;
        break;
    }
    closedir(d);
    return found;
}

// NVML, for what procfs does not list (MIG instances). Loaded on first need; a thread that finds another
// one loading it gets "unknown" and retries later rather than waiting.
struct NvmlApi {
    nvmlReturn_t (*init)();
    nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*);
    nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*);
    nvmlReturn_t (*is_mig)(nvmlDevice_t, unsigned int*);
    nvmlReturn_t (*parent_of_mig)(nvmlDevice_t, nvmlDevice_t*);
};
NvmlApi g_nvml;
std::atomic<int> g_nvml_state{0};  // 0 not tried, 1 loading, 2 ready, 3 unavailable

bool nvml_ready() {
    int s = g_nvml_state.load(std::memory_order_acquire);
    if (s != 0) return s == 2;
    int expected = 0;
    if (!g_nvml_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return false;
    DlsymFn rd = real_dlsym();
    void* h = rd ? dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL) : nullptr;
    NvmlApi api{};
    if (h) {
        api.init = reinterpret_cast<decltype(api.init)>(rd(h, "nvmlInit_v2"));
        api.by_uuid = reinterpret_cast<decltype(api.by_uuid)>(rd(h, "nvmlDeviceGetHandleByUUID"));
        api.pci_info = reinterpret_cast<decltype(api.pci_info)>(rd(h, "nvmlDeviceGetPciInfo_v3"));
        if (!api.pci_info) api.pci_info = reinterpret_cast<decltype(api.pci_info)>(rd(h, "nvmlDeviceGetPciInfo_v2"));
        api.is_mig = reinterpret_cast<decltype(api.is_mig)>(rd(h, "nvmlDeviceIsMigDeviceHandle"));
        api.parent_of_mig =
            reinterpret_cast<decltype(api.parent_of_mig)>(rd(h, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"));
    }
    bool ok = api.init && api.by_uuid && api.pci_info && api.init() == gpudx::NVML_SUCCESS;
    if (ok) g_nvml = api;
    g_nvml_state.store(ok ? 2 : 3, std::memory_order_release);
    return ok;
}

bool nvml_lookup(const uint8_t uuid[16], uint64_t* out) {
    const Config* c = config();
    if (!c || !c->use_nvml || !nvml_ready()) return false;
    char text[64];
    nvmlDevice_t device = nullptr;
    format_uuid(uuid, "GPU-", text, sizeof text);
    if (g_nvml.by_uuid(text, &device) != gpudx::NVML_SUCCESS) {
        format_uuid(uuid, "MIG-", text, sizeof text);
        if (g_nvml.by_uuid(text, &device) != gpudx::NVML_SUCCESS) return false;
    }
    unsigned int mig = 0;
    if (g_nvml.is_mig && g_nvml.parent_of_mig && g_nvml.is_mig(device, &mig) == gpudx::NVML_SUCCESS && mig) {
        nvmlDevice_t parent = nullptr;
        if (g_nvml.parent_of_mig(device, &parent) != gpudx::NVML_SUCCESS) return false;
        device = parent;
    }
    nvmlPciInfo_t pci{};
    if (g_nvml.pci_info(device, &pci) != gpudx::NVML_SUCCESS) return false;
    pci.busId[sizeof pci.busId - 1] = '\0';
    uint64_t a = parse_bus_id(pci.busId, std::strlen(pci.busId));
    if (a == kNoAddress) return false;
    *out = a;
    return true;
}

const View* refresh_view(int dev, const uint8_t uuid[16], const View* old) {
    Slot& s = g_slots[dev];
    uint64_t address = kNoAddress;
    uint8_t source = kSourceNone;
    if (procfs_lookup(uuid, &address))
        source = kSourceProcfs;
    else if (nvml_lookup(uuid, &address))
        source = kSourceNvml;
    if (address == kNoAddress) s.retry_after_ns.store(coarse_ns() + kRetryNegativeNs, std::memory_order_relaxed);
    // The same negative answer again: keep the view we have (no allocation per retry).
    if (old && address == kNoAddress && old->current == kNoAddress && std::memcmp(old->uuid, uuid, 16) == 0)
        return old;
    auto* fresh = static_cast<View*>(std::calloc(1, sizeof(View)));
    if (!fresh) return nullptr;
    std::memcpy(fresh->uuid, uuid, 16);
    fresh->current = address;
    fresh->source = source;
    const View* expected = old;
    if (!s.view.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
        std::free(fresh);  // another thread published first; never seen by anyone
        return expected;
    }
    if (old) retire(old);
    if (old && std::memcmp(old->uuid, uuid, 16) != 0) {
        s.uuid_changes.fetch_add(1, std::memory_order_relaxed);
        s.logged.store(0, std::memory_order_relaxed);
        char u[48], b[24];
        format_uuid(uuid, "GPU-", u, sizeof u);
        if (!format_cuda_bus_id(address, 4, b, sizeof b)) std::strcpy(b, "unknown");
        log_line("ordinal %d now reports UUID %s; that card is at %s (%s)", dev, u, b, source_name(source));
    }
    request_publish(true);
    return fresh;
}

// The view matching the UUID the driver reports for `dev` now; nullptr when that cannot be learnt.
const View* current_view(CUdevice dev) {
    if (dev < 0 || dev >= kMaxOrdinals) return nullptr;
    uint8_t uuid[16];
    if (!query_uuid(dev, uuid)) return nullptr;
    Slot& s = g_slots[dev];
    const View* v = s.view.load(std::memory_order_acquire);
    if (v && std::memcmp(v->uuid, uuid, 16) == 0 &&
        (v->current != kNoAddress || coarse_ns() < s.retry_after_ns.load(std::memory_order_relaxed)))
        return v;
    return refresh_view(dev, uuid, v);
}

void note_handed(Slot& s, uint64_t address) {
    if (address == kNoAddress) return;
    uint64_t tag = address + 1;
    for (auto& h : s.handed)
        if (h.load(std::memory_order_relaxed) == tag) return;
    for (auto& h : s.handed) {
        uint64_t expected = 0;
        if (h.compare_exchange_strong(expected, tag, std::memory_order_relaxed)) return request_publish(true);
        if (expected == tag) return;
    }
}

// Plain loads first: on the hot path nothing is written unless something changed.
void note_driver(Slot& s, uint64_t address, int domain_digits) {
    if (address == kNoAddress) return;
    if (s.driver_domain_digits.load(std::memory_order_relaxed) != domain_digits)
        s.driver_domain_digits.store(domain_digits, std::memory_order_relaxed);
    if (s.driver_address.load(std::memory_order_relaxed) == address) return;
    if (s.driver_address.exchange(address, std::memory_order_relaxed) != address) request_publish(true);
}

// Counts one corrected answer; logs the first of each kind per view (`detail` replaces the usual wording).
void note_correction(int dev, CorrectionKind kind, const char* call, uint64_t driver_said, const View* v,
                     const char* detail = nullptr) {
    Slot& s = g_slots[dev];
    uint64_t count = s.corrected.fetch_add(1, std::memory_order_relaxed);
    uint32_t before = kind;
    if (!(s.logged.load(std::memory_order_relaxed) & kind)) before = s.logged.fetch_or(kind, std::memory_order_relaxed);
    if (!(before & kind) && detail) {
        log_line("ordinal %d: %s: %s", dev, call, detail);
    } else if (!(before & kind)) {
        char u[48], was[24], now[24];
        format_uuid(v->uuid, "GPU-", u, sizeof u);
        if (!format_cuda_bus_id(driver_said, 4, was, sizeof was)) std::strcpy(was, "?");
        format_cuda_bus_id(v->current, 4, now, sizeof now);
        log_line("ordinal %d (%s): %s: driver says %s, that UUID's card is at %s (%s); answering %s", dev, u, call,
                 was, now, source_name(v->source), now);
    }
    // The first correction is news; later ones only move a count, flushed at most once a second and
    // looked at every 64th time so the hot path does not read the clock.
    if (count == 0 || (count & 63) == 0) request_publish(count == 0);
}

// ---- Publishing the process's view for `gpudx verify` ----
//
// A small text file, <state_dir>/gpudx-shim.<pid>, replaced atomically (write + rename). Identity changes
// are written at once; correction counts at most once a second. Host memory and the file both survive a
// CUDA checkpoint (the process is not re-created); after a migration to another node the next identity
// call writes the file there.

std::atomic<int> g_writing{0};
std::atomic<bool> g_pending{false};
std::atomic<uint64_t> g_next_count_write_ns{0};
std::atomic<int> g_written_pid{0};
std::atomic<bool> g_exiting{false};
char g_state_text[64 * 1024];  // only touched by the thread holding g_writing

struct Appender {
    char* buf;
    size_t cap, len = 0;
    __attribute__((format(printf, 2, 3))) void add(const char* fmt, ...) {
        if (len >= cap) return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf + len, cap - len, fmt, ap);
        va_end(ap);
        if (n > 0) len = (len + static_cast<size_t>(n) < cap) ? len + static_cast<size_t>(n) : cap - 1;
    }
};

unsigned long long process_start_ticks() {
    char text[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    const char* p = std::strrchr(text, ')');  // the command name may hold blanks and parentheses
    if (!p) return 0;
    // Field 22 (starttime); after ')' come fields 3, 4, …
    int field = 2;
    for (; *p && field < 22; ++p)
        if (*p == ' ') ++field;
    return std::strtoull(p, nullptr, 10);
}

void format_address_or_dash(uint64_t a, char* out, size_t cap) {
    if (!format_cuda_bus_id(a, 4, out, cap)) snprintf(out, cap, "-");
}

void write_state_file() {
    const Config* c = config();
    if (!c) return;
    Appender out{g_state_text, sizeof g_state_text};
    int pid = static_cast<int>(getpid());
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    out.add("gpudx-shim-state 1\npid %d\nstart_ticks %llu\nmode %s\nproc_root %s\nupdated_unix_ms %lld\n", pid,
            process_start_ticks(), c->observe ? "observe" : "correct", c->proc_root[0] ? c->proc_root : "/",
            static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000);
    int nvml_state = g_nvml_state.load(std::memory_order_acquire);
    out.add("nvml %s\nnvml_translations %llu\n",
            nvml_state == 2 ? "loaded" : nvml_state == 3 ? "unavailable" : "not-needed",
            static_cast<unsigned long long>(g_nvml_translations.load(std::memory_order_relaxed)));

    int count = 0;
    auto get_count = real_as<gpudx::cu::DeviceGetCount>(kGetCount);
    if (!get_count || get_count(&count) != gpudx::CUDA_SUCCESS) count = 0;
    if (count > kMaxOrdinals) count = kMaxOrdinals;
    auto bus_id = real_as<gpudx::cu::DeviceGetPCIBusId>(kGetPCIBusId);
    for (int d = 0; d < count; ++d) {
        Slot& s = g_slots[d];
        const View* v = current_view(d);  // refreshes the UUID, so the file is true as of now
        if (bus_id) {
            char text[32] = {};
            if (bus_id(text, sizeof text, d) == gpudx::CUDA_SUCCESS) {
                uint64_t a = parse_bus_id(text, std::strlen(text));
                if (a != kNoAddress) s.driver_address.store(a, std::memory_order_relaxed);
            }
        }
        char uuid[48] = "-", driver[24], current[24];
        if (v) format_uuid(v->uuid, "GPU-", uuid, sizeof uuid);
        format_address_or_dash(s.driver_address.load(std::memory_order_relaxed), driver, sizeof driver);
        format_address_or_dash(v ? v->current : kNoAddress, current, sizeof current);
        out.add("ordinal %d uuid=%s driver_bus=%s current_bus=%s source=%s corrected=%llu uuid_changes=%u handed=", d,
                uuid, driver, current, source_name(v ? v->source : uint8_t{kSourceNone}),
                static_cast<unsigned long long>(s.corrected.load(std::memory_order_relaxed)),
                s.uuid_changes.load(std::memory_order_relaxed));
        bool any = false;
        for (auto& h : s.handed) {
            uint64_t tag = h.load(std::memory_order_relaxed);
            if (!tag) continue;
            char a[24];
            format_address_or_dash(tag - 1, a, sizeof a);
            out.add("%s%s", any ? "," : "", a);
            any = true;
        }
        out.add("%s\n", any ? "" : "-");
    }
    out.add("end\n");

    // /dev/shm and /tmp are shared by every user: the temporary file gets a name nobody can predict and is
    // created only if nothing is there (mkostemp's O_EXCL never follows a link nor opens a file another user
    // placed). rename() then replaces the directory entry, never writes through it; in a sticky directory it
    // cannot replace another user's file, and `gpudx verify` believes no file that is not the process's own.
    char path[700], tmp[760];
    snprintf(path, sizeof path, "%s/gpudx-shim.%d", c->state_dir, pid);
    snprintf(tmp, sizeof tmp, "%s/.gpudx-shim.%d.XXXXXX", c->state_dir, pid);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return;
    // Readable by all (verify may run as another user); mkostemp creates it 0600.
    bool ok = fchmod(fd, 0644) == 0;
    ok = write(fd, g_state_text, out.len) == static_cast<ssize_t>(out.len) && ok;
    ok = (close(fd) == 0) && ok;
    if (ok && rename(tmp, path) == 0)
        g_written_pid.store(pid, std::memory_order_relaxed);
    else
        unlink(tmp);
}

// state_changed: identity or the first correction changed, write now. Otherwise only counts moved: write
// when the last count write is a second old. One writer at a time; others leave a note and return.
void request_publish(bool state_changed) {
    if (g_exiting.load(std::memory_order_relaxed)) return;
    if (!state_changed) {
        uint64_t now = coarse_ns();
        if (now < g_next_count_write_ns.load(std::memory_order_relaxed)) return;
    }
    g_pending.store(true, std::memory_order_release);
    for (int attempt = 0; attempt < 3; ++attempt) {
        int expected = 0;
        if (!g_writing.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
        for (int round = 0; round < 4 && g_pending.exchange(false, std::memory_order_acq_rel); ++round)
            write_state_file();
        g_next_count_write_ns.store(coarse_ns() + 1000000000ull, std::memory_order_relaxed);
        g_writing.store(0, std::memory_order_release);
        if (!g_pending.load(std::memory_order_acquire)) return;
    }
}

void after_fork_in_child() {
    // The parent's writer (if any) does not exist here; the child publishes under its own pid.
    g_writing.store(0, std::memory_order_relaxed);
    g_written_pid.store(0, std::memory_order_relaxed);
}

__attribute__((constructor)) void shim_init() {
    gpudx_shim_resolve_real_dlsym();
    config();
    pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

__attribute__((destructor)) void shim_fini() {
    g_exiting.store(true, std::memory_order_relaxed);
    int pid = static_cast<int>(getpid());
    const Config* c = config();
    if (c && g_written_pid.load(std::memory_order_relaxed) == pid) {
        char path[700];
        snprintf(path, sizeof path, "%s/gpudx-shim.%d", c->state_dir, pid);
        unlink(path);
    }
}

// ---- cuGetProcAddress: substitute only the identity entry points ----

void substitute_proc(const char* symbol, void** pfn, int cuda_version) {
    if (!pfn || !*pfn) return;
    void* p = *pfn;
    if (is_own(p)) return;
    // The runtime asks cuGetProcAddress for itself (11030: the old ABI, 12000: _v2); hand back the wrapper
    // of the same ABI, decided by which real function came back, never by the version asked for.
    if (p == real(kGetProcAddressV2)) {
        *pfn = wrapper_of(kGetProcAddressV2);
        return;
    }
    if (p == real(kGetProcAddress)) {
        *pfn = wrapper_of(kGetProcAddress);
        return;
    }
    int i = interposed_index(symbol);
    if (i == kGetProcAddress) {
        // A pointer that is neither exported function (a driver-internal alias): the ABI follows the version
        // asked for (cuGetProcAddress_v2 came with 12.0), and our wrapper calls the exported equivalent.
        int variant = cuda_version >= 12000 ? kGetProcAddressV2 : kGetProcAddress;
        if (real(variant)) *pfn = wrapper_of(variant);
        return;
    }
    if (i == kGetPCIBusId || i == kGetByPCIBusId || i == kGetAttribute) {
        // These have one ABI; the exported symbol and what the driver hands out behave the same.
        if (!g_real[i].load(std::memory_order_acquire)) store_real(i, p);
        if (real(i)) *pfn = wrapper_of(i);
    }
}

nvmlReturn_t nvml_by_bus_id(int which, const char* busId, nvmlDevice_t* device) {
    auto fn = real_as<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(which);
    if (!fn) return gpudx::NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = fn(busId, device);
    if (rc != gpudx::NVML_ERROR_NOT_FOUND || !busId || !device) return rc;
    const Config* c = config();
    if (!c || c->observe) return rc;
    uint64_t asked = parse_bus_id(busId, strnlen(busId, 64));
    if (asked == kNoAddress) return rc;
    // Only an address this process was handed for one of its devices is translated: that device's
    // card is the one the caller means, wherever it sits now.
    for (int d = 0; d < kMaxOrdinals; ++d) {
        Slot& s = g_slots[d];
        bool handed = false;
        for (auto& h : s.handed) handed = handed || h.load(std::memory_order_relaxed) == asked + 1;
        if (!handed) continue;
        const View* v = current_view(d);
        if (!v) v = s.view.load(std::memory_order_acquire);
        if (!v || v->current == kNoAddress || v->current == asked) continue;
        char now[24];
        if (!format_nvml_bus_id(v->current, now, sizeof now)) continue;
        if (fn(now, device) != gpudx::NVML_SUCCESS) continue;
        g_nvml_translations.fetch_add(1, std::memory_order_relaxed);
        note_correction(d, kKindNvml, kRealNames[which], asked, v);
        return gpudx::NVML_SUCCESS;
    }
    return rc;
}

}  // namespace

// ---- dlsym support (called from dlsym_entry.cpp) ----

extern "C" __attribute__((visibility("hidden"), used, no_sanitize("thread"))) void* gpudx_shim_resolve_real_dlsym() {
    void* p = __atomic_load_n(&gpudx_shim_real_dlsym, __ATOMIC_ACQUIRE);
    if (p) return p;
    p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (p) __atomic_store_n(&gpudx_shim_real_dlsym, p, __ATOMIC_RELEASE);
    return p;
}

extern "C" __attribute__((visibility("hidden"), used)) void* gpudx_shim_dlsym_handle(void* handle, const char* name) {
    DlsymFn rd = real_dlsym();
    if (!rd) return nullptr;
    void* p = rd(handle, name);  // the caller's handle, so its search order and dependencies apply
    int i = p ? interposed_index(name) : -1;
    if (i < 0 || is_own(p)) return p;
    bool nvml = is_nvml_fn(i);
    if (!in_family(p, nvml)) return p;
    learn_handle(p, nvml);
    store_real(i, p);
    // Another copy of the library than the one this shim tracks: leave it alone.
    return g_real[i].load(std::memory_order_acquire) == p ? wrapper_of(i) : p;
}

// ---- The interposed entry points ----

GPUDX_SHIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
    auto fn = real_as<gpudx::cu::GetProcAddress>(kGetProcAddress);
    if (!fn) return gpudx::CUDA_ERROR_NOT_FOUND;
    CUresult rc = fn(symbol, pfn, cudaVersion, flags);
    if (rc == gpudx::CUDA_SUCCESS) substitute_proc(symbol, pfn, cudaVersion);
    return rc;
}

GPUDX_SHIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                               CUdriverProcAddressQueryResult* symbolStatus) {
    auto fn = real_as<gpudx::cu::GetProcAddress_v2>(kGetProcAddressV2);
    if (!fn) return gpudx::CUDA_ERROR_NOT_FOUND;
    CUresult rc = fn(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == gpudx::CUDA_SUCCESS && (!symbolStatus || *symbolStatus == gpudx::CU_GET_PROC_ADDRESS_SUCCESS))
        substitute_proc(symbol, pfn, cudaVersion);
    return rc;
}

GPUDX_SHIM_EXPORT CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
    auto fn = real_as<gpudx::cu::DeviceGetPCIBusId>(kGetPCIBusId);
    if (!fn) return gpudx::CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = fn(pciBusId, len, dev);
    if (rc != gpudx::CUDA_SUCCESS || !pciBusId || len <= 0 || dev < 0 || dev >= kMaxOrdinals) return rc;
    const Config* c = config();
    if (!c) return rc;
    size_t text_len = strnlen(pciBusId, static_cast<size_t>(len));
    uint64_t driver = parse_bus_id(pciBusId, text_len);
    int digits = domain_digits_of(pciBusId, text_len);
    Slot& s = g_slots[dev];
    note_driver(s, driver, digits);
    const View* v = current_view(dev);
    if (!v || v->current == kNoAddress || driver == kNoAddress || driver == v->current || c->observe) {
        note_handed(s, driver);
        return rc;
    }
    char fixed[24];
    size_t n = format_cuda_bus_id(v->current, digits, fixed, sizeof fixed);
    if (!n) return rc;
    if (static_cast<size_t>(len) > n) {
        std::memcpy(pciBusId, fixed, n + 1);
    } else {  // the driver truncated to fit; so do we
        std::memcpy(pciBusId, fixed, static_cast<size_t>(len) - 1);
        pciBusId[len - 1] = '\0';
    }
    note_handed(s, v->current);
    note_correction(dev, kKindBusId, "cuDeviceGetPCIBusId", driver, v);
    return rc;
}

GPUDX_SHIM_EXPORT CUresult cuDeviceGetAttribute(int* value, int attrib, CUdevice dev) {
    auto fn = real_as<gpudx::cu::DeviceGetAttribute>(kGetAttribute);
    if (!fn) return gpudx::CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = fn(value, attrib, dev);
    if (attrib != gpudx::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID && attrib != gpudx::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID &&
        attrib != gpudx::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)
        return rc;
    if (rc != gpudx::CUDA_SUCCESS || !value || dev < 0 || dev >= kMaxOrdinals) return rc;
    const Config* c = config();
    const View* v = c ? current_view(dev) : nullptr;
    if (!v || v->current == kNoAddress) return rc;
    int want = attrib == gpudx::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID      ? static_cast<int>(address_bus(v->current))
               : attrib == gpudx::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID ? static_cast<int>(address_device(v->current))
                                                                    : static_cast<int>(address_domain(v->current));
    Slot& s = g_slots[dev];
    if (*value == want) {
        note_handed(s, v->current);
        return rc;
    }
    if (c->observe) return rc;
    uint64_t driver = s.driver_address.load(std::memory_order_relaxed);
    *value = want;
    note_handed(s, v->current);
    note_correction(dev, kKindAttribute, "cuDeviceGetAttribute", driver, v);
    return rc;
}

GPUDX_SHIM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
    auto fn = real_as<gpudx::cu::DeviceGetByPCIBusId>(kGetByPCIBusId);
    if (!fn) return gpudx::CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = fn(dev, pciBusId);
    if (!dev || !pciBusId) return rc;
    const Config* c = config();
    if (!c || c->observe) return rc;
    uint64_t asked = parse_bus_id(pciBusId, strnlen(pciBusId, 64));
    auto get_count = real_as<gpudx::cu::DeviceGetCount>(kGetCount);
    int count = 0;
    if (asked == kNoAddress || !get_count || get_count(&count) != gpudx::CUDA_SUCCESS) return rc;
    if (count > kMaxOrdinals) count = kMaxOrdinals;
    // The ordinal whose card sits at that address now, whatever the driver's stale table says.
    for (int d = 0; d < count; ++d) {
        const View* v = current_view(d);
        if (!v || v->current != asked) continue;
        if (rc != gpudx::CUDA_SUCCESS || *dev != d) {
            char detail[160];
            snprintf(detail, sizeof detail, "asked for %.40s, the driver answered ordinal %d (rc %d); answering %d",
                     pciBusId, rc == gpudx::CUDA_SUCCESS ? *dev : -1, rc, d);
            *dev = d;
            note_correction(d, kKindByBusId, "cuDeviceGetByPCIBusId", asked, v, detail);
        }
        note_handed(g_slots[d], asked);
        return gpudx::CUDA_SUCCESS;
    }
    return rc;
}

GPUDX_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* busId, nvmlDevice_t* device) {
    return nvml_by_bus_id(kNvmlByBusId, busId, device);
}

GPUDX_SHIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* busId, nvmlDevice_t* device) {
    return nvml_by_bus_id(kNvmlByBusIdV2, busId, device);
}
