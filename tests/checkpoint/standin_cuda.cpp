// A stand-in libcuda.so.1 for the checkpoint tests: two H200s (tests/fixtures/h200x2) by default, the
// checkpoint API as a state machine per PID, every call and its arguments appended to a log, and faults
// on demand. Built twice: with the checkpoint entry points (driver 580) and without them (driver 535).
//
//   GPUDX_CKPT_LOG=FILE            append one line per call: "cuCheckpointProcessLock pid=12 timeoutMs=0 -> 0"
//   GPUDX_CKPT_FAIL=STEP[@PID]:CODE[,…]  return CODE from that step (init, lock, checkpoint, restore, unlock, state)
//   GPUDX_CKPT_HANG=STEP[@PID]     never return from that step
//   GPUDX_CKPT_CRASH=STEP[@PID]    abort() in that step (a driver crashing the caller)
//   GPUDX_CKPT_GPUS=UUID|PCI|MODEL|FREE|TOTAL;…  the node's GPUs (also read by the NVML stand-in)
//   GPUDX_CKPT_STATE_DIR=DIR       keep each PID's state in DIR/PID so separate gpudx runs see it
//   GPUDX_CKPT_CUDA_VERSION=13000  what cuDriverGetVersion answers
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "abi/cuda.hpp"
#include "standin_config.hpp"

using namespace gpudx;

namespace {

std::map<int, int>& memory_states() {
    static std::map<int, int> states;
    return states;
}

[[maybe_unused]] int load_state(int pid) {
    if (const char* dir = std::getenv("GPUDX_CKPT_STATE_DIR")) {
        std::string path = std::string(dir) + "/" + std::to_string(pid);
        if (FILE* f = std::fopen(path.c_str(), "r")) {
            int s = 0;
            if (std::fscanf(f, "%d", &s) != 1) s = 0;
            std::fclose(f);
            return s;
        }
        return CU_PROCESS_STATE_RUNNING;
    }
    auto it = memory_states().find(pid);
    return it == memory_states().end() ? CU_PROCESS_STATE_RUNNING : it->second;
}

[[maybe_unused]] void save_state(int pid, int state) {
    if (const char* dir = std::getenv("GPUDX_CKPT_STATE_DIR")) {
        std::string path = std::string(dir) + "/" + std::to_string(pid);
        if (FILE* f = std::fopen(path.c_str(), "w")) {
            std::fprintf(f, "%d\n", state);
            std::fclose(f);
        }
        return;
    }
    memory_states()[pid] = state;
}

// The result of a call after fault injection; logs it either way.
CUresult finish(const char* step, int pid, const std::string& call_text, CUresult natural) {
    if (standin::hang_requested(step, pid)) {
        standin::log_line(call_text + " -> (hang)");
        for (;;) ::pause();
    }
    if (standin::crash_requested(step, pid)) {
        standin::log_line(call_text + " -> (crash)");
        std::abort();
    }
    CUresult rc = natural;
    if (auto injected = standin::injected_failure(step, pid)) rc = *injected;
    standin::log_line(call_text + " -> " + std::to_string(rc));
    return rc;
}

bool initialised = false;

[[maybe_unused]] std::string uuid_text(const CUuuid& u) {
    const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
    char out[64];
    std::snprintf(out, sizeof out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                  b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return out;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuInit(unsigned flags) {
    CUresult rc = finish("init", 0, "cuInit flags=" + std::to_string(flags), CUDA_SUCCESS);
    initialised = rc == CUDA_SUCCESS;
    return rc;
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* version) {
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    const char* v = std::getenv("GPUDX_CKPT_CUDA_VERSION");
#ifdef GPUDX_STANDIN_NO_CHECKPOINT
    *version = v ? std::atoi(v) : 12020;
#else
    *version = v ? std::atoi(v) : 13000;
#endif
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetCount(int* count) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    *count = static_cast<int>(standin::gpus().size());
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= static_cast<int>(standin::gpus().size())) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    if (dev < 0 || dev >= static_cast<int>(standin::gpus().size()) || len <= 0) return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(name, static_cast<size_t>(len), "%s", standin::gpus()[dev].model.c_str());
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
    if (dev < 0 || dev >= static_cast<int>(standin::gpus().size())) return CUDA_ERROR_INVALID_DEVICE;
    *uuid = standin::gpus()[dev].uuid;
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
    return cuDeviceGetUuid_v2(uuid, dev);
}

__attribute__((visibility("default"))) CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
    if (dev < 0 || dev >= static_cast<int>(standin::gpus().size()) || len <= 0) return CUDA_ERROR_INVALID_DEVICE;
    std::string upper = standin::gpus()[dev].pci;
    for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::snprintf(bus, static_cast<size_t>(len), "%s", upper.c_str());
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    if (dev < 0 || dev >= static_cast<int>(standin::gpus().size())) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = standin::gpus()[dev].total;
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuGetErrorName(CUresult error, const char** str) {
    auto* info = find_cu_result(error);
    if (!info) return CUDA_ERROR_INVALID_VALUE;
    *str = info->name;
    return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuGetErrorString(CUresult error, const char** str) {
    // The real driver's short sentences, for the codes the tests use.
    switch (error) {
        case CUDA_SUCCESS: *str = "no error"; return CUDA_SUCCESS;
        case CUDA_ERROR_INVALID_VALUE: *str = "invalid argument"; return CUDA_SUCCESS;
        case CUDA_ERROR_OUT_OF_MEMORY: *str = "out of memory"; return CUDA_SUCCESS;
        case CUDA_ERROR_ILLEGAL_STATE: *str = "the operation cannot be performed in the present state"; return CUDA_SUCCESS;
        case CUDA_ERROR_NOT_SUPPORTED: *str = "operation not supported"; return CUDA_SUCCESS;
        case CUDA_ERROR_UNKNOWN: *str = "unknown error"; return CUDA_SUCCESS;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
}

#ifndef GPUDX_STANDIN_NO_CHECKPOINT

__attribute__((visibility("default"))) CUresult cuCheckpointProcessGetState(int pid, CUprocessState* state) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    int s = load_state(pid);
    CUresult rc = finish("state", pid, "cuCheckpointProcessGetState pid=" + std::to_string(pid), CUDA_SUCCESS);
    if (rc == CUDA_SUCCESS && state) *state = static_cast<CUprocessState>(s);
    return rc;
}

__attribute__((visibility("default"))) CUresult cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
    unsigned timeout = args ? args->timeoutMs : 0;
    bool reserved_clear = !args || (args->reserved0 == 0 && std::all_of(std::begin(args->reserved1), std::end(args->reserved1),
                                                                           [](cuuint64_t v) { return v == 0; }));
    int s = load_state(pid);
    CUresult natural = !reserved_clear ? CUDA_ERROR_INVALID_VALUE
                       : s == CU_PROCESS_STATE_RUNNING ? CUDA_SUCCESS
                                                       : CUDA_ERROR_ILLEGAL_STATE;
    CUresult rc = finish("lock", pid,
                         "cuCheckpointProcessLock pid=" + std::to_string(pid) + " timeoutMs=" + std::to_string(timeout),
                         natural);
    if (rc == CUDA_SUCCESS) save_state(pid, CU_PROCESS_STATE_LOCKED);
    return rc;
}

__attribute__((visibility("default"))) CUresult cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs*) {
    CUresult natural = load_state(pid) == CU_PROCESS_STATE_LOCKED ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
    CUresult rc = finish("checkpoint", pid, "cuCheckpointProcessCheckpoint pid=" + std::to_string(pid), natural);
    if (rc == CUDA_SUCCESS) save_state(pid, CU_PROCESS_STATE_CHECKPOINTED);
    return rc;
}

__attribute__((visibility("default"))) CUresult cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
    std::string pairs;
    CUresult natural = load_state(pid) == CU_PROCESS_STATE_CHECKPOINTED ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
    if (args && args->gpuPairsCount > 0) {
        // Like the driver: the pairs must cover every GPU, each once on each side.
        const auto& node = standin::gpus();
        std::vector<int> as_old(node.size()), as_new(node.size());
        for (unsigned i = 0; i < args->gpuPairsCount; ++i) {
            const auto& p = args->gpuPairs[i];
            pairs += (i ? "," : "") + uuid_text(p.oldUuid) + "=" + uuid_text(p.newUuid);
            for (size_t g = 0; g < node.size(); ++g) {
                if (std::memcmp(node[g].uuid.bytes, p.oldUuid.bytes, 16) == 0) ++as_old[g];
                if (std::memcmp(node[g].uuid.bytes, p.newUuid.bytes, 16) == 0) ++as_new[g];
            }
        }
        for (size_t g = 0; g < node.size(); ++g)
            if (as_old[g] != 1 || as_new[g] != 1) natural = CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = finish("restore", pid,
                         "cuCheckpointProcessRestore pid=" + std::to_string(pid) + " pairs=" + (pairs.empty() ? "-" : pairs),
                         natural);
    if (rc == CUDA_SUCCESS) save_state(pid, CU_PROCESS_STATE_LOCKED);
    return rc;
}

__attribute__((visibility("default"))) CUresult cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs*) {
    CUresult natural = load_state(pid) == CU_PROCESS_STATE_LOCKED ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
    CUresult rc = finish("unlock", pid, "cuCheckpointProcessUnlock pid=" + std::to_string(pid), natural);
    if (rc == CUDA_SUCCESS) save_state(pid, CU_PROCESS_STATE_RUNNING);
    return rc;
}

#endif  // GPUDX_STANDIN_NO_CHECKPOINT

}  // extern "C"
