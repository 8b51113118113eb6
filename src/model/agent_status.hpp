#pragma once
// What `gpudx agent` knows of itself (docs/agent.md): what it serves as "agent" in /v1/status (its JSON, read
// back by clients) and what its /metrics families count (render/agent_metrics.hpp). Beside it, the names the
// agent records and counts by, each set declared once: the kinds of event it records and what triggers a
// diagnosis. Their strings are for the boundaries alone (JSON, HTTP, SQLite); a string read back that names
// none of them is said, never taken for another.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "core/named_enum.hpp"

namespace gpudx {

// appeared, changed, cleared: a warning or error finding (changed: the same finding on the same GPUs at another
// severity); drained, resumed, drain_failed: the Slurm node; nvml: an event NVML delivered (an Xid, a
// double-bit ECC error, a recovery action, ...); agent: the agent's own news (started, kmsg records lost, the
// event store moved aside or unwritable, a log file gone, the NVML watcher's state).
#define GPUDX_AGENT_EVENT_KINDS(X) X(appeared) X(changed) X(cleared) X(drained) X(resumed) X(drain_failed) X(nvml) X(agent)
// start: the agent's first diagnosis; interval: every --interval; kernel_log: a followed line that matters;
// nvml_event: NVML events called for it.
#define GPUDX_DIAGNOSIS_TRIGGERS(X) X(start) X(interval) X(kernel_log) X(nvml_event)

GPUDX_NAMED_ENUM(AgentEventKind, GPUDX_AGENT_EVENT_KINDS)
GPUDX_NAMED_ENUM(DiagnosisTrigger, GPUDX_DIAGNOSIS_TRIGGERS)
inline constexpr auto kAllAgentEventKinds = values_of(kAgentEventKindNames);
inline constexpr auto kAllDiagnosisTriggers = values_of(kDiagnosisTriggerNames);

constexpr std::string_view to_string(AgentEventKind k) { return name_of(k); }
constexpr std::string_view to_string(DiagnosisTrigger t) { return name_of(t); }
// nullopt for a name none of the enum's values has.
constexpr std::optional<AgentEventKind> parse_agent_event_kind(std::string_view name) {
    return parse_name<AgentEventKind>(name);
}
constexpr std::optional<DiagnosisTrigger> parse_diagnosis_trigger(std::string_view name) {
    return parse_name<DiagnosisTrigger>(name);
}

struct AgentStatus {
    std::string version;
    int64_t started_ms = 0;  // Unix time
    double uptime_s = 0;
    std::vector<std::string> serving;  // where it listens: "127.0.0.1:9400", "/var/lib/gpudx/agent.sock"

    struct NvmlEvents {
        bool watching = false;
        uint64_t received = 0;
    } nvml_events;

    struct KernelLog {
        std::string source;  // the file followed, or /dev/kmsg
        uint64_t lines_read = 0, lines_matched = 0, kmsg_records_lost = 0;
    } kernel_log;

    struct LastDiagnosis {
        int64_t time_ms = 0;
        DiagnosisTrigger trigger = DiagnosisTrigger::start;
        double duration_ms = 0;
    };
    std::optional<LastDiagnosis> last_diagnosis;  // none before the first

    struct Store {
        // false: no database could be made at all, the events are in memory (only writable, stored, pending and
        // problem are said then).
        bool database = true;
        bool writable = false;
        uint64_t stored = 0, pending = 0, dropped = 0, write_failures = 0;
        std::string problem, moved_aside;
    } store;

    struct Drain {
        std::string node;
        std::string last;  // the last outcome, as said to the operator
        bool failing = false;
    };
    std::optional<Drain> drain;  // only with --drain

    struct Note {
        int64_t time_ms = 0;
        std::string message;
    };
    std::vector<Note> notes;  // the latest, oldest first

    // Counted since the agent started, for /metrics only (not in the JSON).
    std::array<uint64_t, std::size(kAllAgentEventKinds)> events_by_kind{};
    std::array<uint64_t, std::size(kAllDiagnosisTriggers)> diagnoses_by_trigger{};
};

// The "agent" object of /v1/status (docs/agent.md).
nlohmann::json agent_status_to_json(const AgentStatus& s);
// Reads back what agent_status_to_json wrote; an Error for a document that is not one (a time, a trigger or a
// field it cannot read), saying which.
Result<AgentStatus> agent_status_from_json(const nlohmann::json& j);

}  // namespace gpudx
