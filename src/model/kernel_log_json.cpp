#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
NLOHMANN_JSON_SERIALIZE_ENUM(KernelLogFormat, {{KernelLogFormat::unknown, "unknown"},
                                               {KernelLogFormat::kmsg, "kmsg"},
                                               {KernelLogFormat::dmesg, "dmesg"},
                                               {KernelLogFormat::dmesg_t, "dmesg -T"},
                                               {KernelLogFormat::journal_short, "journalctl short"},
                                               {KernelLogFormat::journal_iso, "journalctl short-iso"},
                                               {KernelLogFormat::syslog, "syslog"}})
GPUDX_DEFINE_LAYER_JSON(KernelLog)
bool enum_from_name(std::string_view name, KernelLogFormat& v) {
    v = nlohmann::json(name).get<KernelLogFormat>();
    return true;
}
}  // namespace gpudx
