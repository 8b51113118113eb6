#include "gpu_api/nvml/api.hpp"

#include <fmt/format.h>

namespace gpudx {

Result<NvmlApi> NvmlApi::open(const std::optional<std::string>& directory) {
    auto lib = DriverLibrary::open("libnvidia-ml.so.1", directory, "nvmlInit_v2");
    if (!lib) return std::unexpected(lib.error());
    return NvmlApi(std::move(*lib));
}

NvmlApi::NvmlApi(DriverLibrary lib) : library(std::move(lib)) {
    const auto& l = library;
    l.bind(init, "nvmlInit", {"_v2", ""});
    l.bind(error_string, "nvmlErrorString");
    l.bind(driver_version, "nvmlSystemGetDriverVersion");
    l.bind(nvml_version, "nvmlSystemGetNVMLVersion");
    l.bind(cuda_driver_version, "nvmlSystemGetCudaDriverVersion", {"_v2", ""});
    l.bind(process_name, "nvmlSystemGetProcessName");
    l.bind(count, "nvmlDeviceGetCount", {"_v2", ""});
    l.bind(handle_by_index, "nvmlDeviceGetHandleByIndex", {"_v2", ""});
    l.bind(handle_by_pci, "nvmlDeviceGetHandleByPciBusId", {"_v2", ""});
    l.bind(handle_by_uuid, "nvmlDeviceGetHandleByUUID");
    l.bind(uuid, "nvmlDeviceGetUUID");
    l.bind(name, "nvmlDeviceGetName");
    l.bind(serial, "nvmlDeviceGetSerial");
    // Only _v3/_v2 share our nvmlPciInfo_t layout; the plain call fills an older one.
    l.bind(pci, "nvmlDeviceGetPciInfo", {"_v3", "_v2"});
    l.bind(index, "nvmlDeviceGetIndex");
    l.bind(minor, "nvmlDeviceGetMinorNumber");
    l.bind(max_mig, "nvmlDeviceGetMaxMigDeviceCount");
    // The plain call fills nvmlMemory_t; _v2 wants a versioned struct of another layout.
    l.bind(memory, "nvmlDeviceGetMemoryInfo");
    l.bind(persistence, "nvmlDeviceGetPersistenceMode");
    l.bind(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
    l.bind(mig_mode, "nvmlDeviceGetMigMode");
    l.bind(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
    l.bind(ecc_mode, "nvmlDeviceGetEccMode");
    l.bind(ecc_total, "nvmlDeviceGetTotalEccErrors");
    l.bind(remapped, "nvmlDeviceGetRemappedRows");
    l.bind(fabric_v, "nvmlDeviceGetGpuFabricInfoV");
    l.bind(fabric, "nvmlDeviceGetGpuFabricInfo");
    l.bind(nvlink, "nvmlDeviceGetNvLinkState");
    l.bind(p2p_status, "nvmlDeviceGetP2PStatus");
    l.bind(processes, "nvmlDeviceGetComputeRunningProcesses", {"_v3", "_v2"});
    l.bind(field_values, "nvmlDeviceGetFieldValues");
    // The plain call fills the older nvmlPciInfo_t layout.
    l.bind(nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo", {"_v2"});
    l.bind(nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    l.bind(clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!clocks_event_reasons) l.bind(clocks_event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    l.bind(temperature, "nvmlDeviceGetTemperature");
    l.bind(temperature_threshold, "nvmlDeviceGetTemperatureThreshold");
    l.bind(row_remap_histogram, "nvmlDeviceGetRowRemapperHistogram");
    l.bind(pcie_replays, "nvmlDeviceGetPcieReplayCounter");
    l.bind(power_usage, "nvmlDeviceGetPowerUsage");
    l.bind(enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    l.bind(event_set_create, "nvmlEventSetCreate");
    l.bind(event_set_free, "nvmlEventSetFree");
    l.bind(supported_event_types, "nvmlDeviceGetSupportedEventTypes");
    l.bind(register_events, "nvmlDeviceRegisterEvents");
    // The plain nvmlEventSetWait fills an older, shorter nvmlEventData_t (no MIG instance ids).
    l.bind(event_set_wait, "nvmlEventSetWait", {"_v2"});
}

std::string NvmlApi::describe(nvmlReturn_t rc) const {
    const char* text = error_string ? error_string(rc) : nullptr;
    return fmt::format("{} ({}{}{})", nvml_return_name(rc), rc, text ? ", " : "", text ? text : "");
}

}  // namespace gpudx
