#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {

namespace {

// Each layer's hung call is stored under "timed_out_call" as its label ("" when none): layer_to_json and
// layer_from_json add it, so these serializers name every other field.
constexpr const char* kHungCallKey = "timed_out_call";

void hung_call_to_json(nlohmann::json& j, const std::optional<HungCall>& call) { j[kHungCallKey] = hung_call_label(call); }

std::optional<HungCall> hung_call_from_json(const nlohmann::json& j, DriverApi api) {
    if (!j.contains(kHungCallKey)) return std::nullopt;
    auto label = j.at(kHungCallKey).get<std::string>();
    if (label.empty()) return std::nullopt;
    return parse_hung_call(api, label);
}

}  // namespace

GPUDX_JSON(NvmlProcess, pid, name, used_memory)
GPUDX_JSON(NvlinkState, link, active)
GPUDX_JSON(NvmlDevice, index, uuid, name, serial, bus_id, pci, domain, bus, device, minor, persistence_mode, mig_mode,
           mig_uuids, ecc_enabled, ecc_uncorrected_volatile, ecc_uncorrected_aggregate, retired_pages_pending,
           remapped_rows_correctable, remapped_rows_uncorrectable, remapped_rows_pending, remapped_rows_failure,
           fabric_state, fabric_status, nvlinks, processes, unsupported, errors)
GPUDX_JSON(NvmlLayer, library_path, load_error, init_result, init_error, driver_version, nvml_version, cuda_driver_version,
           device_count, devices)
GPUDX_JSON(CudaDevice, ordinal, uuid, bus_id, pci, attr_bus, attr_device, attr_domain, name, cc_major, cc_minor,
           total_memory, multiprocessor_count)
GPUDX_JSON(CudaView, cuda_visible_devices, cuda_device_order, init_result, init_name, init_meaning, device_count,
           devices)
GPUDX_JSON(CudaLayer, library_path, load_error, driver_version, caller, all)
GPUDX_JSON(RocmSmiEcc, block, correctable, uncorrectable)
GPUDX_JSON(RocmSmiDevice, index, bdfid, pci, partition, unique_id, name, serial, vbios_version, render_minor,
           xgmi_hive_id, vram_total, ecc_enabled_blocks, ecc, unsupported, errors)
GPUDX_JSON(RocmSmiLayer, library_path, load_error, init_result, init_error, library_version, driver_version,
           device_count, devices)

void layer_to_json(nlohmann::json& j, const NvmlLayer& v) {
    j = v;
    hung_call_to_json(j, v.hung_call);
}
void layer_from_json(const nlohmann::json& j, NvmlLayer& v) {
    v = j.get<NvmlLayer>();
    v.hung_call = hung_call_from_json(j, DriverApi::nvml);
}
void layer_to_json(nlohmann::json& j, const CudaLayer& v) {
    j = v;
    hung_call_to_json(j, v.hung_call);
}
void layer_from_json(const nlohmann::json& j, CudaLayer& v) {
    v = j.get<CudaLayer>();
    v.hung_call = hung_call_from_json(j, DriverApi::cuda);
}
void layer_to_json(nlohmann::json& j, const RocmSmiLayer& v) {
    j = v;
    hung_call_to_json(j, v.hung_call);
}
// Present in a snapshot only when ROCm SMI was asked, so reading it back means it was.
void layer_from_json(const nlohmann::json& j, RocmSmiLayer& v) {
    v = j.get<RocmSmiLayer>();
    v.hung_call = hung_call_from_json(j, DriverApi::rocm_smi);
    v.probed = true;
}
}  // namespace gpudx
