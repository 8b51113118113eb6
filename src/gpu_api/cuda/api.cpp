#include "gpu_api/cuda/api.hpp"

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

Result<CudaApi> CudaApi::open(const std::optional<std::string>& directory) {
    auto lib = DriverLibrary::open("libcuda.so.1", directory, "cuInit");
    if (!lib) return std::unexpected(lib.error());
    return CudaApi(std::move(*lib));
}

CudaApi::CudaApi(DriverLibrary lib) : library(std::move(lib)) {
    const auto& l = library;
    l.bind(init, "cuInit");
    l.bind(driver_get_version, "cuDriverGetVersion");
    l.bind(get_error_name, "cuGetErrorName");
    l.bind(get_error_string, "cuGetErrorString");
    l.bind(device_get_count, "cuDeviceGetCount");
    l.bind(device_get, "cuDeviceGet");
    l.bind(device_get_name, "cuDeviceGetName");
    l.bind(device_get_uuid, "cuDeviceGetUuid", {"_v2", ""});
    l.bind(device_get_pci_bus_id, "cuDeviceGetPCIBusId");
    l.bind(device_get_attribute, "cuDeviceGetAttribute");
    l.bind(device_total_mem, "cuDeviceTotalMem", {"_v2"});
    l.bind(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    l.bind(ctx_set_current, "cuCtxSetCurrent");
    l.bind(ctx_enable_peer_access, "cuCtxEnablePeerAccess");
    l.bind(device_can_access_peer, "cuDeviceCanAccessPeer");
    l.bind(mem_alloc, "cuMemAlloc", {"_v2"});
    l.bind(mem_free, "cuMemFree", {"_v2"});
    l.bind(mem_get_info, "cuMemGetInfo", {"_v2"});
    l.bind(mem_host_alloc, "cuMemHostAlloc");
    l.bind(mem_free_host, "cuMemFreeHost");
    l.bind(memcpy_dtoh, "cuMemcpyDtoH", {"_v2"});
    l.bind(memcpy_dtod_async, "cuMemcpyDtoDAsync", {"_v2"});
    l.bind(memcpy_htod_async, "cuMemcpyHtoDAsync", {"_v2"});
    l.bind(memcpy_dtoh_async, "cuMemcpyDtoHAsync", {"_v2"});
    l.bind(memcpy_peer_async, "cuMemcpyPeerAsync");
    l.bind(memset_d32, "cuMemsetD32", {"_v2"});
    l.bind(module_load_data_ex, "cuModuleLoadDataEx");
    l.bind(module_get_function, "cuModuleGetFunction");
    l.bind(launch_kernel, "cuLaunchKernel");
    l.bind(event_create, "cuEventCreate");
    l.bind(event_record, "cuEventRecord");
    l.bind(event_synchronize, "cuEventSynchronize");
    l.bind(event_elapsed_time, "cuEventElapsedTime");
    l.bind(event_destroy, "cuEventDestroy", {"_v2"});
    l.bind(stream_create, "cuStreamCreate");
    l.bind(stream_synchronize, "cuStreamSynchronize");
    l.bind(checkpoint_lock, "cuCheckpointProcessLock");
    l.bind(checkpoint_checkpoint, "cuCheckpointProcessCheckpoint");
    l.bind(checkpoint_restore, "cuCheckpointProcessRestore");
    l.bind(checkpoint_unlock, "cuCheckpointProcessUnlock");
    l.bind(checkpoint_get_state, "cuCheckpointProcessGetState");
}

std::string CudaApi::error_name(CUresult rc) const {
    const char* text = nullptr;
    if (get_error_name && get_error_name(rc, &text) == CUDA_SUCCESS && text) return text;
    return cu_result_name(rc);
}

std::string CudaApi::error_meaning(CUresult rc) const {
    const char* text = nullptr;
    if (get_error_string && get_error_string(rc, &text) == CUDA_SUCCESS && text) return text;
    return cu_result_meaning(rc);
}

std::string format_gpu_uuid(const CUuuid& uuid) {
    const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
    return fmt::format("GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                       b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                       b[15]);
}

std::optional<CUuuid> parse_gpu_uuid(std::string_view text) {
    if (text.size() >= 4 && to_lower(text.substr(0, 4)) == "gpu-") text.remove_prefix(4);
    std::string hex;
    for (char c : text)
        if (c != '-') hex.push_back(c);
    if (hex.size() != 32) return std::nullopt;
    CUuuid out{};
    for (size_t i = 0; i < 16; ++i) {
        auto byte = parse_uint(std::string_view(hex).substr(2 * i, 2), 16);
        if (!byte) return std::nullopt;
        out.bytes[i] = static_cast<char>(*byte);
    }
    return out;
}

}  // namespace gpudx
