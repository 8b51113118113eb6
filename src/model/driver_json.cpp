#include "model/json_support.hpp"
#include "model/layer_json.hpp"
#include "model/snapshot_keys.hpp"

namespace gpudx {

namespace {

void hung_call_to_json(nlohmann::json& j, const std::optional<HungCall>& call) { j[kHungCallKey] = hung_call_label(call); }

std::optional<HungCall> hung_call_from_json(const nlohmann::json& j, DriverApi api) {
    if (!j.contains(kHungCallKey)) return std::nullopt;
    auto label = j.at(kHungCallKey).get<std::string>();
    if (label.empty()) return std::nullopt;
    return parse_hung_call(api, label);
}

}  // namespace

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
// An event's type by its name; a name gpudx does not know is refused (the event does not fit), never read as
// another type.
void to_json(nlohmann::json& j, NvmlEventType t) { j = to_string(t); }
void from_json(const nlohmann::json& j, NvmlEventType& t) {
    auto parsed = j.is_string() ? parse_nvml_event_type(j.get_ref<const std::string&>()) : std::nullopt;
    if (!parsed) throw nlohmann::json::type_error::create(302, "not an NVML event type gpudx knows: " + j.dump(), &j);
    t = *parsed;
}

bool enum_from_name(std::string_view name, NvmlEventType& v) {
    auto parsed = parse_nvml_event_type(name);
    if (parsed) v = *parsed;
    return parsed.has_value();
}

// NvmlEvent has no hung call: its serializer is the table's own.
GPUDX_DEFINE_LAYER_JSON(NvmlEvent)
}  // namespace gpudx
