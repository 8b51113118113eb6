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
GPUDX_JSON(KernelLogLine, monotonic_s, wall_time, text, topic)
GPUDX_JSON(XidEvent, pci, code, pid, process, text, monotonic_s, wall_time, gpu_instance)
GPUDX_JSON(KernelLogTally, kind, device, module, code, count, first_monotonic_s, last_monotonic_s, first_wall_time,
           last_wall_time, first_text, last_text, processes)
GPUDX_JSON(KernelLog, source, format, lines_read, lines_skipped, lines_dropped, boots_seen, window, lines_over_cap,
           lines, xids, tallies)
GPUDX_DEFINE_LAYER_JSON(KernelLog)
}  // namespace gpudx
