/* A stand-in libcuda.so.1 that reproduces the stale bus-id bug of a CUDA restore onto other GPUs.
 *
 * Devices come from FAKE_CUDA_BUS (comma-separated bus ids, default the fixture node's two H200s at
 * 0000:00:06.0 and 0000:00:07.0) and FAKE_CUDA_UUIDS. After fake_cuda_simulate_restore() each ordinal
 * reports the UUID listed in FAKE_CUDA_RESTORE_UUIDS (default: the two UUIDs swapped, as the gpuPairs
 * {GPU0->GPU1, GPU1->GPU0} restore did on the real node) while its bus id and PCI attributes stay those
 * of the old card — exactly what repro/swap-restore.log shows. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8

typedef int CUresult;
typedef int CUdevice;
typedef struct { char bytes[16]; } CUuuid;

static int g_count;
static char g_bus[MAX_DEVICES][16];
static unsigned g_domain[MAX_DEVICES], g_busnum[MAX_DEVICES], g_slot[MAX_DEVICES];
static CUuuid g_uuid[MAX_DEVICES], g_restore_uuid[MAX_DEVICES];
static atomic_int g_restored;
static atomic_long g_calls;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int parse_uuid(const char* s, CUuuid* out) {
    if (strncmp(s, "GPU-", 4) == 0) s += 4;
    int n = 0;
    memset(out, 0, sizeof *out);
    for (; *s && *s != ',' && n < 32; ++s) {
        if (*s == '-') continue;
        int v = (*s >= '0' && *s <= '9') ? *s - '0' : (*s >= 'a' && *s <= 'f') ? *s - 'a' + 10 : (*s >= 'A' && *s <= 'F') ? *s - 'A' + 10 : -1;
        if (v < 0) return 0;
        out->bytes[n / 2] = (char)(out->bytes[n / 2] | (v << ((n % 2) ? 0 : 4)));
        ++n;
    }
    return n == 32;
}

static int split(const char* list, char items[MAX_DEVICES][64]) {
    int n = 0;
    while (list && *list && n < MAX_DEVICES) {
        const char* end = strchr(list, ',');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (len >= 64) len = 63;
        memcpy(items[n], list, len);
        items[n][len] = '\0';
        ++n;
        list = end ? end + 1 : NULL;
    }
    return n;
}

static void init_once(void) {
    const char* bus = getenv("FAKE_CUDA_BUS");
    const char* uuids = getenv("FAKE_CUDA_UUIDS");
    const char* restore = getenv("FAKE_CUDA_RESTORE_UUIDS");
    char items[MAX_DEVICES][64];
    g_count = split(bus ? bus : "0000:00:06.0,0000:00:07.0", items);
    for (int i = 0; i < g_count; ++i) {
        for (char* p = items[i]; *p; ++p)
            if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
        snprintf(g_bus[i], sizeof g_bus[i], "%.15s", items[i]);
        sscanf(g_bus[i], "%x:%x:%x", &g_domain[i], &g_busnum[i], &g_slot[i]);
    }
    int n = split(uuids ? uuids : "GPU-992cb470-9027-88f4-48a9-a9a329d6978d,GPU-40cd403d-66ba-4608-72b9-5be5031085dc",
                  items);
    for (int i = 0; i < g_count && i < n; ++i) parse_uuid(items[i], &g_uuid[i]);
    if (restore) {
        n = split(restore, items);
        for (int i = 0; i < g_count && i < n; ++i) parse_uuid(items[i], &g_restore_uuid[i]);
    } else {
        for (int i = 0; i < g_count; ++i) g_restore_uuid[i] = g_uuid[g_count - 1 - i];
    }
}

static int valid(CUdevice d) {
    pthread_once(&g_once, init_once);
    atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
    return d >= 0 && d < g_count;
}

EXPORT void fake_cuda_simulate_restore(void) { atomic_store(&g_restored, 1); }
EXPORT long fake_cuda_calls(void) { return atomic_load(&g_calls); }

EXPORT CUresult cuInit(unsigned flags) {
    (void)flags;
    pthread_once(&g_once, init_once);
    return 0;
}
EXPORT CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
EXPORT CUresult cuDeviceGetCount(int* n) {
    pthread_once(&g_once, init_once);
    *n = g_count;
    return 0;
}
EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    if (!valid(ordinal)) return 101;
    *d = ordinal;
    return 0;
}
EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    if (!valid(d)) return 101;
    snprintf(name, (size_t)len, "NVIDIA H200");
    return 0;
}
EXPORT CUresult cuDeviceGetPCIBusId(char* out, int len, CUdevice d) {
    if (!valid(d)) return 101;
    if (!out || len <= 0) return 1;
    snprintf(out, (size_t)len, "%s", g_bus[d]);
    return 0;
}
EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* d, const char* id) {
    pthread_once(&g_once, init_once);
    unsigned dom = 0, bus = 0, slot = 0;
    if (!d || !id || sscanf(id, "%x:%x:%x", &dom, &bus, &slot) != 3) return 1;
    for (int i = 0; i < g_count; ++i)
        if (g_domain[i] == dom && g_busnum[i] == bus && g_slot[i] == slot) return *d = i, 0;
    return 1; /* CUDA_ERROR_INVALID_VALUE, as the real driver answers an unknown address */
}
EXPORT CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
    if (!valid(d)) return 101;
    switch (attr) {
        case 33: *v = (int)g_busnum[d]; return 0;
        case 34: *v = (int)g_slot[d]; return 0;
        case 50: *v = (int)g_domain[d]; return 0;
        case 16: *v = 132; return 0;
        case 75: *v = 9; return 0;
        case 76: *v = 0; return 0;
        default: return 1;
    }
}
EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* u, CUdevice d) {
    if (!valid(d)) return 101;
    *u = atomic_load_explicit(&g_restored, memory_order_acquire) ? g_restore_uuid[d] : g_uuid[d];
    return 0;
}
EXPORT CUresult cuDeviceGetUuid(CUuuid* u, CUdevice d) { return cuDeviceGetUuid_v2(u, d); }

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags);
EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long flags, int* status);

/* With FAKE_CUDA_INTERNAL_GETPROC set, asking for cuGetProcAddress hands out driver-internal aliases
 * (not the exported symbols), as a driver is free to do. */
static CUresult internal_get_proc(const char* s, void** p, int v, unsigned long long f) { return cuGetProcAddress(s, p, v, f); }
static CUresult internal_get_proc_v2(const char* s, void** p, int v, unsigned long long f, int* st) {
    return cuGetProcAddress_v2(s, p, v, f, st);
}

static void* lookup(const char* symbol, int version) {
    if (strcmp(symbol, "cuGetProcAddress") == 0 && getenv("FAKE_CUDA_INTERNAL_GETPROC"))
        return version >= 12000 ? (void*)&internal_get_proc_v2 : (void*)&internal_get_proc;
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return version >= 12000 ? (void*)&cuGetProcAddress_v2 : (void*)&cuGetProcAddress;
    if (strcmp(symbol, "cuDeviceGetUuid") == 0)
        return version >= 11040 ? (void*)&cuDeviceGetUuid_v2 : (void*)&cuDeviceGetUuid;
    static const struct { const char* name; void* fn; } table[] = {
        {"cuInit", (void*)&cuInit},
        {"cuDriverGetVersion", (void*)&cuDriverGetVersion},
        {"cuDeviceGetCount", (void*)&cuDeviceGetCount},
        {"cuDeviceGet", (void*)&cuDeviceGet},
        {"cuDeviceGetName", (void*)&cuDeviceGetName},
        {"cuDeviceGetPCIBusId", (void*)&cuDeviceGetPCIBusId},
        {"cuDeviceGetByPCIBusId", (void*)&cuDeviceGetByPCIBusId},
        {"cuDeviceGetAttribute", (void*)&cuDeviceGetAttribute},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
        if (strcmp(symbol, table[i].name) == 0) return table[i].fn;
    return NULL;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags) {
    (void)flags;
    if (!symbol || !pfn) return 1;
    *pfn = lookup(symbol, version);
    return *pfn ? 0 : 500;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long flags, int* status) {
    if (flags > 2) return 1;
    CUresult rc = cuGetProcAddress(symbol, pfn, version, flags);
    if (status) *status = rc == 0 ? 0 : 1;
    return rc;
}
