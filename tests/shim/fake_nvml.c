/* A stand-in libnvidia-ml.so.1 whose node is whatever /proc/driver/nvidia/gpus says under
 * FAKE_NVML_PROC_ROOT (read on every call, so a test can move the process to "another node" by
 * re-pointing a symlink). Like the real NVML after a restore, it knows only the cards of the node it runs
 * on: a bus id from elsewhere is NVML_ERROR_NOT_FOUND (6). */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 16

typedef int nvmlReturn_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

struct fake_device {
    char uuid[96];
    unsigned domain, bus, slot, function;
};
typedef struct fake_device* nvmlDevice_t;

static struct fake_device g_devices[MAX_DEVICES];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* Calls `match` for each GPU of the node; returns the handle of the first match or NULL. */
static nvmlDevice_t find(int (*match)(const struct fake_device*, const void*), const void* arg) {
    const char* root = getenv("FAKE_NVML_PROC_ROOT");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/proc/driver/nvidia/gpus", root ? root : "/nonexistent");
    nvmlDevice_t found = NULL;
    pthread_mutex_lock(&g_lock);
    DIR* d = opendir(dir);
    int index = 0;
    struct dirent* e;
    while (d && (e = readdir(d)) && index < MAX_DEVICES) {
        if (e->d_name[0] == '.') continue;
        char path[1400], line[256];
        snprintf(path, sizeof path, "%s/%s/information", dir, e->d_name);
        FILE* f = fopen(path, "r");
        if (!f) continue;
        struct fake_device dev;
        memset(&dev, 0, sizeof dev);
        while (fgets(line, sizeof line, f)) {
            char* value = strchr(line, ':');
            if (!value) continue;
            value += 1 + strspn(value + 1, " \t");
            value[strcspn(value, "\n")] = '\0';
            if (strncmp(line, "GPU UUID", 8) == 0) snprintf(dev.uuid, sizeof dev.uuid, "%s", value);
            if (strncmp(line, "Bus Location", 12) == 0)
                sscanf(value, "%x:%x:%x.%x", &dev.domain, &dev.bus, &dev.slot, &dev.function);
        }
        fclose(f);
        if (match(&dev, arg)) {
            g_devices[index] = dev;
            found = &g_devices[index];
            break;
        }
        ++index;
    }
    if (d) closedir(d);
    pthread_mutex_unlock(&g_lock);
    return found;
}

static int match_bus(const struct fake_device* dev, const void* arg) {
    unsigned dom = 0, bus = 0, slot = 0, fn = 0;
    if (sscanf((const char*)arg, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) < 3) return 0;
    return dev->domain == dom && dev->bus == bus && dev->slot == slot;
}

static int match_uuid(const struct fake_device* dev, const void* arg) {
    return strcasecmp(dev->uuid, (const char*)arg) == 0;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return 0; }
EXPORT nvmlReturn_t nvmlInit(void) { return 0; }
EXPORT nvmlReturn_t nvmlShutdown(void) { return 0; }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* busId, nvmlDevice_t* device) {
    if (!busId || !device) return 2;
    nvmlDevice_t d = find(match_bus, busId);
    if (!d) return 6;
    *device = d;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* busId, nvmlDevice_t* device) {
    return nvmlDeviceGetHandleByPciBusId_v2(busId, device);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
    if (!uuid || !device) return 2;
    nvmlDevice_t d = find(match_uuid, uuid);
    if (!d) return 6;
    *device = d;
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* out, unsigned int len) {
    if (!device || !out) return 2;
    snprintf(out, len, "%s", device->uuid);
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
    if (!device || !pci) return 2;
    memset(pci, 0, sizeof *pci);
    pci->domain = device->domain;
    pci->bus = device->bus;
    pci->device = device->slot;
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", device->domain, device->bus, device->slot,
             device->function);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", device->domain, device->bus,
             device->slot, device->function);
    return 0;
}
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMig) {
    if (!device || !isMig) return 2;
    *isMig = 0;
    return 0;
}
