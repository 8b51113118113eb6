#pragma once
// gpudx's own declarations of the few CUDA driver API types, constants and entry points it uses.
// cuda.h is never included: libcuda.so.1 is dlopen'ed at run time, so gpudx builds without a CUDA
// toolkit and runs on nodes without one. Layouts follow cuda.h (CUDA 12.x/13.x, x86-64 LP64).
// Header-only and free of libgpudx state, so the preload shim can include it too.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpudx {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using cuuint64_t = std::uint64_t;
using cuuint32_t = std::uint32_t;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

struct CUuuid {
    char bytes[16];
};

// cuDeviceGetAttribute attributes gpudx reads.
enum CUdevice_attribute : int {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

// cuGetProcAddress_v2 flags and symbol status.
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2;
enum CUdriverProcAddressQueryResult : int {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;

// cuModuleLoadDataEx options: where the JIT writes its logs.
enum CUjit_option : int {
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

// ---- Checkpoint API (driver 550+, GPU remapping on restore 580+). Reserved fields must be zero.
enum CUprocessState : int {
    CU_PROCESS_STATE_RUNNING = 0,
    CU_PROCESS_STATE_LOCKED = 1,
    CU_PROCESS_STATE_CHECKPOINTED = 2,
    CU_PROCESS_STATE_FAILED = 3,
};

struct CUcheckpointLockArgs {
    unsigned int timeoutMs;  // 0: no timeout
    unsigned int reserved0;
    cuuint64_t reserved1[7];
};

struct CUcheckpointCheckpointArgs {
    cuuint64_t reserved[8];
};

struct CUcheckpointGpuPair {
    CUuuid oldUuid;
    CUuuid newUuid;
};

struct CUcheckpointRestoreArgs {
    CUcheckpointGpuPair* gpuPairs;
    unsigned int gpuPairsCount;
    char reserved[52 - sizeof(CUcheckpointGpuPair*)];
    cuuint64_t reserved1;
};

struct CUcheckpointUnlockArgs {
    cuuint64_t reserved[8];
};

static_assert(sizeof(CUuuid) == 16);
static_assert(sizeof(CUcheckpointLockArgs) == 64);
static_assert(sizeof(CUcheckpointCheckpointArgs) == 64);
static_assert(sizeof(CUcheckpointGpuPair) == 32);
static_assert(sizeof(CUcheckpointRestoreArgs) == 64);
static_assert(offsetof(CUcheckpointRestoreArgs, gpuPairsCount) == 8);
static_assert(offsetof(CUcheckpointRestoreArgs, reserved1) == 56);
static_assert(sizeof(CUcheckpointUnlockArgs) == 64);

// ---- Entry points: the types of the pointers dlsym / cuGetProcAddress hand back.
namespace cu {
using Init = CUresult (*)(unsigned int flags);
using DriverGetVersion = CUresult (*)(int* version);
using DeviceGetCount = CUresult (*)(int* count);
using DeviceGet = CUresult (*)(CUdevice* device, int ordinal);
using DeviceGetName = CUresult (*)(char* name, int len, CUdevice dev);
using DeviceGetUuid = CUresult (*)(CUuuid* uuid, CUdevice dev);  // also cuDeviceGetUuid_v2 (MIG-aware)
using DeviceGetPCIBusId = CUresult (*)(char* pciBusId, int len, CUdevice dev);
using DeviceGetByPCIBusId = CUresult (*)(CUdevice* dev, const char* pciBusId);
using DeviceGetAttribute = CUresult (*)(int* value, int attrib, CUdevice dev);
using DeviceTotalMem = CUresult (*)(size_t* bytes, CUdevice dev);  // cuDeviceTotalMem_v2
using GetErrorName = CUresult (*)(CUresult error, const char** str);
using GetErrorString = CUresult (*)(CUresult error, const char** str);
using GetProcAddress = CUresult (*)(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
using GetProcAddress_v2 = CUresult (*)(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult* symbolStatus);

using CtxCreate = CUresult (*)(CUcontext* ctx, unsigned int flags, CUdevice dev);  // cuCtxCreate_v2
using DevicePrimaryCtxRetain = CUresult (*)(CUcontext* ctx, CUdevice dev);
using DevicePrimaryCtxRelease = CUresult (*)(CUdevice dev);  // cuDevicePrimaryCtxRelease_v2
using CtxDestroy = CUresult (*)(CUcontext ctx);              // cuCtxDestroy_v2
using CtxSetCurrent = CUresult (*)(CUcontext ctx);
using CtxGetDevice = CUresult (*)(CUdevice* dev);
using CtxSynchronize = CUresult (*)();
using CtxEnablePeerAccess = CUresult (*)(CUcontext peer, unsigned int flags);
using DeviceCanAccessPeer = CUresult (*)(int* canAccess, CUdevice dev, CUdevice peer);

using MemAlloc = CUresult (*)(CUdeviceptr* dptr, size_t bytes);  // cuMemAlloc_v2
using MemFree = CUresult (*)(CUdeviceptr dptr);                  // cuMemFree_v2
using MemcpyHtoD = CUresult (*)(CUdeviceptr dst, const void* src, size_t bytes);  // _v2
using MemcpyDtoH = CUresult (*)(void* dst, CUdeviceptr src, size_t bytes);        // _v2
using MemcpyPeer = CUresult (*)(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t bytes);
using MemsetD8 = CUresult (*)(CUdeviceptr dst, unsigned char value, size_t count);  // _v2
using MemHostAlloc = CUresult (*)(void** pp, size_t bytes, unsigned int flags);
using MemFreeHost = CUresult (*)(void* p);
using MemGetInfo = CUresult (*)(size_t* free, size_t* total);  // cuMemGetInfo_v2
using MemcpyDtoDAsync = CUresult (*)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);  // _v2
using MemcpyHtoDAsync = CUresult (*)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);  // _v2
using MemcpyDtoHAsync = CUresult (*)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);        // _v2
using MemcpyPeerAsync = CUresult (*)(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t bytes,
                                     CUstream stream);
using MemsetD32 = CUresult (*)(CUdeviceptr dst, unsigned value, size_t count);  // _v2

using StreamCreate = CUresult (*)(CUstream* stream, unsigned flags);
using StreamSynchronize = CUresult (*)(CUstream stream);

using ModuleLoadData = CUresult (*)(CUmodule* module, const void* image);
using ModuleLoadDataEx = CUresult (*)(CUmodule* module, const void* image, unsigned numOptions, CUjit_option* options,
                                      void** optionValues);
using ModuleUnload = CUresult (*)(CUmodule module);
using ModuleGetFunction = CUresult (*)(CUfunction* fn, CUmodule module, const char* name);
using LaunchKernel = CUresult (*)(CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                                  unsigned blockY, unsigned blockZ, unsigned sharedMemBytes, CUstream stream,
                                  void** kernelParams, void** extra);

using EventCreate = CUresult (*)(CUevent* event, unsigned int flags);
using EventRecord = CUresult (*)(CUevent event, CUstream stream);
using EventSynchronize = CUresult (*)(CUevent event);
using EventElapsedTime = CUresult (*)(float* ms, CUevent start, CUevent end);
using EventDestroy = CUresult (*)(CUevent event);  // cuEventDestroy_v2

using CheckpointProcessLock = CUresult (*)(int pid, CUcheckpointLockArgs* args);
using CheckpointProcessCheckpoint = CUresult (*)(int pid, CUcheckpointCheckpointArgs* args);
using CheckpointProcessRestore = CUresult (*)(int pid, CUcheckpointRestoreArgs* args);
using CheckpointProcessUnlock = CUresult (*)(int pid, CUcheckpointUnlockArgs* args);
using CheckpointProcessGetState = CUresult (*)(int pid, CUprocessState* state);
using CheckpointProcessGetRestoreThreadId = CUresult (*)(int pid, int* tid);
}  // namespace cu

// ---- CUresult codes, with a line an operator can act on.
enum : CUresult {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36,
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
    CUDA_ERROR_ECC_UNCORRECTABLE = 214,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_NOT_READY = 802,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
    CUDA_ERROR_UNKNOWN = 999,
};

struct CuResultInfo {
    CUresult code;
    const char* name;
    const char* meaning;
};

inline constexpr CuResultInfo kCuResults[] = {
    {0, "CUDA_SUCCESS", "success"},
    {1, "CUDA_ERROR_INVALID_VALUE", "an argument was out of range (a caller bug, or a device map naming a GPU the process cannot see)"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "the driver could not allocate memory; another process may hold the GPU's memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "cuInit has not been called, or it failed"},
    {4, "CUDA_ERROR_DEINITIALIZED", "the driver is shutting down in this process"},
    {5, "CUDA_ERROR_PROFILER_DISABLED", "the profiler is disabled for this run"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "the loaded libcuda.so is the toolkit's stub, not the driver: fix the library search path"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "this call needs a newer driver than the one installed"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "the GPU is busy or unavailable (exclusive-process compute mode held by another process)"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable GPU visible: module not loaded, device nodes missing, or CUDA_VISIBLE_DEVICES hides them all"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "the device ordinal does not name a visible GPU"},
    {102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "the GPU needs a license (vGPU) that is not present"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "the kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "no valid context is current"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "the code was not built for this GPU's architecture"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "an uncorrectable ECC error was hit: the GPU needs attention (see nvidia-smi -q -d ECC)"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these GPUs"},
    {218, "CUDA_ERROR_INVALID_PTX", "the PTX failed to compile"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the PTX is newer than this driver supports"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "an operating-system call failed inside the driver (permissions on /dev/nvidia*, cgroup device rules)"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "a handle was invalid"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not allowed in the current state (e.g. checkpoint of a process that is not locked)"},
    {500, "CUDA_ERROR_NOT_FOUND", "a named symbol or object was not found"},
    {600, "CUDA_ERROR_NOT_READY", "asynchronous work has not completed yet"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "a kernel accessed an illegal address; the context is unusable"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "the launch needs more resources than the GPU has"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "a kernel ran past the watchdog timeout"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "the primary context is already active"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "the context was destroyed"},
    {710, "CUDA_ERROR_ASSERT", "a device-side assert fired"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "a kernel failed; the context is unusable"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "a cooperative launch asked for more blocks than can be resident"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted (privileges, or a container without the capability)"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "the operation is not supported on this GPU, driver or platform"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "the system is not ready: on NVSwitch systems the fabric manager has not finished (check nvidia-fabricmanager)"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "libcuda's version differs from the kernel module's: user space and the kernel module come from different driver installs"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "the forward-compatibility libcuda in use does not support this GPU (data-center GPUs only)"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown driver error; check the kernel log for Xid messages"},
};

inline const CuResultInfo* find_cu_result(CUresult code) {
    for (const auto& r : kCuResults)
        if (r.code == code) return &r;
    return nullptr;
}
inline const char* cu_result_name(CUresult code) {
    auto* r = find_cu_result(code);
    return r ? r->name : "CUDA_ERROR_(unlisted)";
}
inline const char* cu_result_meaning(CUresult code) {
    auto* r = find_cu_result(code);
    return r ? r->meaning : "a driver error gpudx has no description for";
}

}  // namespace gpudx
