#include "render/agent_metrics.hpp"

#include <fmt/format.h>

#include "render/prometheus.hpp"

namespace gpudx {

std::string render_agent_metrics(const AgentStatus& s) {
    std::string out;
    // Every kind and trigger has its series from the start, at 0 until counted: rate() sees the first one.
    prometheus_family(out, "gpudx_agent_events_total", "counter",
                      "Events the agent recorded since it started, by kind.");
    for (auto kind : kAllAgentEventKinds)
        out += fmt::format("gpudx_agent_events_total{{kind=\"{}\"}} {}\n", to_string(kind),
                           s.events_by_kind[static_cast<size_t>(kind)]);
    prometheus_family(out, "gpudx_agent_diagnoses_total", "counter",
                      "Diagnoses the agent made since it started, by trigger.");
    for (auto trigger : kAllDiagnosisTriggers)
        out += fmt::format("gpudx_agent_diagnoses_total{{trigger=\"{}\"}} {}\n", to_string(trigger),
                           s.diagnoses_by_trigger[static_cast<size_t>(trigger)]);
    prometheus_family(out, "gpudx_agent_kernel_log_lines_total", "counter", "Lines read from the followed kernel log.");
    out += fmt::format("gpudx_agent_kernel_log_lines_total {}\n", s.kernel_log.lines_read);
    prometheus_family(out, "gpudx_agent_kernel_log_lines_matched_total", "counter",
                      "Followed kernel-log lines that a topic or the signature catalogue recognised.");
    out += fmt::format("gpudx_agent_kernel_log_lines_matched_total {}\n", s.kernel_log.lines_matched);
    prometheus_family(out, "gpudx_agent_kmsg_records_lost_total", "counter",
                      "Kernel log records overwritten in the ring buffer before the agent read them.");
    out += fmt::format("gpudx_agent_kmsg_records_lost_total {}\n", s.kernel_log.kmsg_records_lost);
    prometheus_family(out, "gpudx_agent_store_writable", "gauge",
                      "Whether the last write to the event store succeeded (1) or not (0).");
    out += fmt::format("gpudx_agent_store_writable {}\n", s.store.writable ? 1 : 0);
    prometheus_family(out, "gpudx_agent_store_pending_events", "gauge",
                      "Events held in memory because the event store refused them.");
    out += fmt::format("gpudx_agent_store_pending_events {}\n", s.store.pending);
    if (s.last_diagnosis) {
        prometheus_family(out, "gpudx_agent_last_diagnosis_timestamp_seconds", "gauge",
                          "When the agent's current diagnosis was made.");
        out += fmt::format("gpudx_agent_last_diagnosis_timestamp_seconds {:.3f}\n",
                           static_cast<double>(s.last_diagnosis->time_ms) / 1000.0);
    }
    return out;
}

}  // namespace gpudx
