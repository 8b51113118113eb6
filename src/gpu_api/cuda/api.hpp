#pragma once
// libcuda.so.1 as every part of gpudx reaches it: the driver probe, the acceptance (contexts, memory, kernels)
// and the checkpoint worker (the checkpoint API). Opened once, every entry point resolved once (newest version
// first); one this library lacks is null, and each caller decides whether it can do without it.
#include <optional>
#include <string>
#include <string_view>

#include "abi/cuda.hpp"
#include "core/error.hpp"
#include "gpu_api/library.hpp"

namespace gpudx {

struct CudaApi {
    DriverLibrary library;

    cu::Init init = nullptr;
    cu::DriverGetVersion driver_get_version = nullptr;
    cu::GetErrorName get_error_name = nullptr;
    cu::GetErrorString get_error_string = nullptr;
    cu::DeviceGetCount device_get_count = nullptr;
    cu::DeviceGet device_get = nullptr;
    cu::DeviceGetName device_get_name = nullptr;
    cu::DeviceGetUuid device_get_uuid = nullptr;  // cuDeviceGetUuid_v2 where there is one (MIG-aware)
    cu::DeviceGetPCIBusId device_get_pci_bus_id = nullptr;
    cu::DeviceGetAttribute device_get_attribute = nullptr;
    cu::DeviceTotalMem device_total_mem = nullptr;

    cu::DevicePrimaryCtxRetain primary_ctx_retain = nullptr;
    cu::CtxSetCurrent ctx_set_current = nullptr;
    cu::CtxEnablePeerAccess ctx_enable_peer_access = nullptr;
    cu::DeviceCanAccessPeer device_can_access_peer = nullptr;
    cu::MemAlloc mem_alloc = nullptr;
    cu::MemFree mem_free = nullptr;
    cu::MemGetInfo mem_get_info = nullptr;
    cu::MemHostAlloc mem_host_alloc = nullptr;
    cu::MemFreeHost mem_free_host = nullptr;
    cu::MemcpyDtoH memcpy_dtoh = nullptr;
    cu::MemcpyDtoDAsync memcpy_dtod_async = nullptr;
    cu::MemcpyHtoDAsync memcpy_htod_async = nullptr;
    cu::MemcpyDtoHAsync memcpy_dtoh_async = nullptr;
    cu::MemcpyPeerAsync memcpy_peer_async = nullptr;
    cu::MemsetD32 memset_d32 = nullptr;
    cu::ModuleLoadDataEx module_load_data_ex = nullptr;
    cu::ModuleGetFunction module_get_function = nullptr;
    cu::LaunchKernel launch_kernel = nullptr;
    cu::EventCreate event_create = nullptr;
    cu::EventRecord event_record = nullptr;
    cu::EventSynchronize event_synchronize = nullptr;
    cu::EventElapsedTime event_elapsed_time = nullptr;
    cu::EventDestroy event_destroy = nullptr;
    cu::StreamCreate stream_create = nullptr;
    cu::StreamSynchronize stream_synchronize = nullptr;

    // Driver 550 and newer.
    cu::CheckpointProcessLock checkpoint_lock = nullptr;
    cu::CheckpointProcessCheckpoint checkpoint_checkpoint = nullptr;
    cu::CheckpointProcessRestore checkpoint_restore = nullptr;
    cu::CheckpointProcessUnlock checkpoint_unlock = nullptr;
    cu::CheckpointProcessGetState checkpoint_get_state = nullptr;

    // Loads libcuda.so.1 (from `directory` when given) and resolves every entry point; cuInit is not called
    // here, so a probe can announce it first and a caller can set CUDA_VISIBLE_DEVICES before it.
    static Result<CudaApi> open(const std::optional<std::string>& directory);
    explicit CudaApi(DriverLibrary lib);
    CudaApi() = default;  // no library: every entry point null

    // The code's name and an operator's meaning: the library's own words where it has them, else gpudx's table.
    std::string error_name(CUresult rc) const;
    std::string error_meaning(CUresult rc) const;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi and NVML write the UUID the driver returns.
std::string format_gpu_uuid(const CUuuid& uuid);
// The bytes of a UUID written either way: with or without "GPU-", any case, dashes anywhere.
std::optional<CUuuid> parse_gpu_uuid(std::string_view text);

}  // namespace gpudx
