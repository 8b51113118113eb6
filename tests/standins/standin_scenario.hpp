#pragma once
// Shared by the stand-in libnvidia-ml.so.1 and libcuda.so.1: the scenario they serve, and faults.
//
// Scenario file: $GPUDX_STANDIN_SCENARIO, else $GPUDX_STANDIN_ROOT/_driver/answers.json (what
// `gpudx gather` records; gpudx sets GPUDX_STANDIN_ROOT in its probe children when reading --root).
// Format (docs/driver-layers.md): the answers document of record_driver_answers(), i.e.
//   {"nvml": <NvmlLayer JSON>, "cuda": {"driver_version", "init_result", "devices": [<CudaDevice>]},
//    "rocm_smi": <RocmSmiLayer JSON>}
// plus optional test controls:
//   "base": "other.json"                      start from another scenario (path relative to this file)
//   "nvml_drop_devices": [1], "cuda_drop_devices": [1], "rocm_smi_drop_devices": [1]
//   "nvml_override": {...}                     JSON merge patch into "nvml"
//   "nvml_device_override": {"1": {...}}, "cuda_device_override": {"0": {"uuid": "..."}},
//   "rocm_smi_device_override": {"2": {"unique_id": "..."}}
//   "faults": [{"call": "nvmlDeviceGetUUID", "device": 1, "hang": true},
//              {"call": "cuInit", "result": 100}]
// A fault's call is the base name (no _v2/_v3); without "device" it applies to every device.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace standin {

struct Scenario {
    nlohmann::json doc;   // merged document
    std::string problem;  // why it could not be loaded; empty when fine
};

const Scenario& scenario();

// Applies a fault for `call` on `device` (-1: no device): hangs forever, or returns the result to answer.
std::optional<int> fault(std::string_view call, int device = -1);

// "0000:00:06.0" / "00000000:00:06.0" -> domain, bus, device, function; false when it does not parse.
bool parse_bus_id(std::string_view text, unsigned& domain, unsigned& bus, unsigned& dev, unsigned& fn);
// "GPU-992cb470-9027-..." -> 16 bytes; false when it does not parse.
bool parse_uuid(std::string_view text, unsigned char out[16]);

}  // namespace standin
