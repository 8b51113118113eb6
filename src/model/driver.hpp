#pragma once
// Answers of the NVIDIA driver libraries (NVML, CUDA driver), probed under a deadline.
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

// A query that may be unsupported on this GPU or driver: value, or why not.
enum class QueryState { ok, unsupported, error, not_asked };

struct NvmlProcess {
    unsigned pid = 0;
    std::string name;
    std::optional<unsigned long long> used_memory;
};

struct NvlinkState {
    unsigned link = 0;
    bool active = false;
};

struct NvmlDevice {
    unsigned index = 0;
    std::string uuid, name, serial;
    std::string bus_id;  // as NVML wrote it
    std::string pci;     // normalised
    std::optional<unsigned> domain, bus, device;
    std::optional<unsigned> minor;
    std::optional<bool> persistence_mode;
    std::optional<bool> mig_mode;
    std::vector<std::string> mig_uuids;
    std::optional<bool> ecc_enabled;
    std::optional<unsigned long long> ecc_uncorrected_volatile, ecc_uncorrected_aggregate;
    std::optional<unsigned> retired_pages_pending;
    std::optional<unsigned> remapped_rows_correctable, remapped_rows_uncorrectable;
    std::optional<bool> remapped_rows_pending, remapped_rows_failure;
    std::optional<unsigned> fabric_state, fabric_status;
    std::vector<NvlinkState> nvlinks;
    std::vector<NvmlProcess> processes;
    std::vector<std::string> unsupported;  // queries the device answered Not Supported
    std::vector<std::string> errors;       // "nvmlDeviceGetX: message"
};

struct NvmlLayer {
    std::string library_path;  // the file actually loaded
    std::string load_error;    // why libnvidia-ml.so.1 could not be loaded (dlerror), when it could not
    std::optional<int> init_result;
    std::string init_error;
    std::string driver_version;
    std::string nvml_version;
    std::optional<int> cuda_driver_version;
    std::optional<unsigned> device_count;
    std::vector<NvmlDevice> devices;
    std::string timed_out_call;  // the call that never returned, when one did not
};

struct CudaDevice {
    int ordinal = 0;
    std::string uuid;
    std::string bus_id;  // as cuDeviceGetPCIBusId wrote it
    std::string pci;     // normalised
    std::optional<int> attr_bus, attr_device, attr_domain;
    std::string name;
    std::optional<int> cc_major, cc_minor;
    std::optional<unsigned long long> total_memory;
    std::optional<int> multiprocessor_count;
};

struct CudaView {
    std::string cuda_visible_devices;  // as evaluated; "<unset>" when unset
    std::string cuda_device_order;
    std::optional<int> init_result;
    std::string init_name, init_meaning;
    std::optional<int> device_count;
    std::vector<CudaDevice> devices;
};

struct CudaLayer {
    std::string library_path;
    std::string load_error;  // why libcuda.so.1 could not be loaded (dlerror), when it could not
    std::optional<int> driver_version;
    CudaView caller;                  // under the caller's environment
    std::optional<CudaView> all;      // with CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER unset (--all-devices)
    std::string timed_out_call;  // "(all devices) " prefixed when the --all-devices probe hung
};

}  // namespace gpudx
