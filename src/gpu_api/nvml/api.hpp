#pragma once
// libnvidia-ml.so.1 as every part of gpudx reaches it: the driver probe, the acceptance and the checkpoint
// worker. Opened once, every entry point resolved once (newest version first); one this library lacks is null,
// and each caller decides whether it can do without it.
#include <optional>
#include <string>

#include "abi/nvml.hpp"
#include "core/error.hpp"
#include "gpu_api/library.hpp"

namespace gpudx {

struct NvmlApi {
    DriverLibrary library;

    nvml::Init init = nullptr;  // nvmlInit_v2
    nvml::ErrorString error_string = nullptr;
    nvml::SystemGetString driver_version = nullptr, nvml_version = nullptr;
    nvml::SystemGetCudaDriverVersion cuda_driver_version = nullptr;
    nvml::SystemGetProcessName process_name = nullptr;
    nvml::DeviceGetCount count = nullptr;
    nvml::DeviceGetHandleByIndex handle_by_index = nullptr;
    nvml::DeviceGetHandleByPciBusId handle_by_pci = nullptr;
    nvml::DeviceGetHandleByUUID handle_by_uuid = nullptr;
    nvml::DeviceGetString uuid = nullptr, name = nullptr, serial = nullptr;
    nvml::DeviceGetPciInfo pci = nullptr;
    nvml::DeviceGetUInt index = nullptr, minor = nullptr, max_mig = nullptr;
    nvml::DeviceGetMemoryInfo memory = nullptr;
    nvml::DeviceGetEnableState persistence = nullptr, retired_pending = nullptr;
    nvml::DeviceGetMigMode mig_mode = nullptr;
    nvml::DeviceGetMigDeviceHandleByIndex mig_handle = nullptr;
    nvml::DeviceGetEnableStatePair ecc_mode = nullptr;
    nvml::DeviceGetTotalEccErrors ecc_total = nullptr;
    nvml::DeviceGetRemappedRows remapped = nullptr;
    nvml::DeviceGetGpuFabricInfoV fabric_v = nullptr;
    nvml::DeviceGetGpuFabricInfo fabric = nullptr;
    nvml::DeviceGetNvLinkState nvlink = nullptr;
    nvml::DeviceGetP2PStatus p2p_status = nullptr;
    nvml::DeviceGetComputeRunningProcesses processes = nullptr;
    nvml::DeviceGetFieldValues field_values = nullptr;
    // The GPU's own health (docs/gpu-health.md).
    nvml::DeviceGetNvLinkRemotePciInfo nvlink_remote_pci = nullptr;  // _v2
    nvml::DeviceGetNvLinkRemoteDeviceType nvlink_remote_type = nullptr;
    nvml::DeviceGetClocksEventReasons clocks_event_reasons = nullptr;  // or ...ClocksThrottleReasons
    nvml::DeviceGetTemperature temperature = nullptr;
    nvml::DeviceGetTemperatureThreshold temperature_threshold = nullptr;
    nvml::DeviceGetRowRemapperHistogram row_remap_histogram = nullptr;
    nvml::DeviceGetUInt pcie_replays = nullptr, power_usage = nullptr, enforced_power_limit = nullptr;
    // Events (the agent's watcher, gpu_api/nvml/events.hpp).
    nvml::EventSetCreate event_set_create = nullptr;
    nvml::EventSetFree event_set_free = nullptr;
    nvml::DeviceGetSupportedEventTypes supported_event_types = nullptr;
    nvml::DeviceRegisterEvents register_events = nullptr;
    nvml::EventSetWait event_set_wait = nullptr;  // nvmlEventSetWait_v2

    // Loads libnvidia-ml.so.1 (from `directory` when given) and resolves every entry point; nvmlInit is not
    // called here, so a probe can announce it first.
    static Result<NvmlApi> open(const std::optional<std::string>& directory);
    explicit NvmlApi(DriverLibrary lib);

    // "NVML_ERROR_NOT_SUPPORTED (3, Not Supported)": the code's name and number, and the library's own text.
    std::string describe(nvmlReturn_t rc) const;
};

}  // namespace gpudx
