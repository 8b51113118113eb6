// A stand-in libnvidia-ml.so.1 for the checkpoint tests: the GPUs of GPUDX_CKPT_GPUS (see standin_cuda.cpp),
// their free memory, and the memory each process holds.
//
//   GPUDX_CKPT_DRIVER_VERSION=580.159.04   what nvmlSystemGetDriverVersion answers
//   GPUDX_CKPT_HELD=PID@UUID=BYTES[,…]      compute processes per GPU
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "abi/nvml.hpp"
#include "standin_config.hpp"

using namespace gpudx;

namespace {
struct NvmlMemory {
    unsigned long long total, free, used;
};

nvmlDevice_t handle_of(size_t index) { return reinterpret_cast<nvmlDevice_t>(index + 1); }
long index_of(nvmlDevice_t handle) {
    auto i = static_cast<long>(reinterpret_cast<uintptr_t>(handle)) - 1;
    return i >= 0 && i < static_cast<long>(standin::gpus().size()) ? i : -1;
}
}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() { return NVML_SUCCESS; }
__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned len) {
    const char* v = std::getenv("GPUDX_CKPT_DRIVER_VERSION");
#ifdef GPUDX_STANDIN_NO_CHECKPOINT
    std::snprintf(buf, len, "%s", v ? v : "535.183.01");
#else
    std::snprintf(buf, len, "%s", v ? v : "580.159.04");
#endif
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
    const auto& node = standin::gpus();
    for (size_t i = 0; i < node.size(); ++i)
        if (strcasecmp(node[i].uuid_text.c_str(), uuid) == 0) {
            *device = handle_of(i);
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned* index) {
    long i = index_of(device);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *index = static_cast<unsigned>(i);
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, NvmlMemory* memory) {
    long i = index_of(device);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& g = standin::gpus()[static_cast<size_t>(i)];
    memory->total = g.total;
    memory->free = g.free;
    memory->used = g.total - g.free;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                                             unsigned* count,
                                                                                             nvmlProcessInfo_t* infos) {
    long i = index_of(device);
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& g = standin::gpus()[static_cast<size_t>(i)];
    std::vector<nvmlProcessInfo_t> found;
    if (const char* held = std::getenv("GPUDX_CKPT_HELD"))
        for (const auto& item : standin::split(held, ',')) {
            auto at = item.find('@'), eq = item.find('=');
            if (at == std::string::npos || eq == std::string::npos || eq < at) continue;
            if (strcasecmp(item.substr(at + 1, eq - at - 1).c_str(), g.uuid_text.c_str()) != 0) continue;
            found.push_back({static_cast<unsigned>(std::stoul(item.substr(0, at))), std::stoull(item.substr(eq + 1)), 0, 0});
        }
    if (*count < found.size()) {
        *count = static_cast<unsigned>(found.size());
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (size_t k = 0; k < found.size(); ++k) infos[k] = found[k];
    *count = static_cast<unsigned>(found.size());
    return NVML_SUCCESS;
}

}  // extern "C"
