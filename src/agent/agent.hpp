#pragma once
// `gpudx agent` (docs/agent.md): follows the kernel log as it is written and puts every new line through the
// signature catalogue at once; watches NVML's events (Xid, ECC, recovery action) in a child it can kill;
// re-diagnoses the kernel-log layer on a line that matters, the whole node on an NVML event and every
// --interval seconds; records each finding that appears or clears (and each drain) in the event store;
// serves /metrics, /v1/status and /v1/events on a TCP address and a unix socket; drains the Slurm node on an
// error. Runs in the foreground, under systemd as Type=notify with the watchdog.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "actions/slurm.hpp"
#include "agent/nvml_watch.hpp"
#include "agent/store.hpp"
#include "collect/context.hpp"
#include "model/matrix.hpp"
#include "model/node_record.hpp"
#include "rules/engine/check_context.hpp"

namespace gpudx {

struct AgentOptions {
    std::string root = "/";
    CollectOptions collect;      // as `gpudx diagnose` collects (the kernel-log layer is re-read with it)
    DiagnoseOptions diagnose;    // as `gpudx diagnose` judges
    // As `diagnose --baseline` and `--matrix`: the node held to its record and to its class's tested set at
    // every diagnosis; the class is named in /metrics (gpudx_node_info), where the fleet's rules group by it.
    std::optional<NodeRecord> baseline;
    std::optional<Matrix> matrix;
    // The command that collects the whole node as a snapshot on stdout (`gpudx snapshot ...` with the node
    // options): a child process, so a wedged driver wedges the child, never the agent.
    std::vector<std::string> snapshot_command;
    std::chrono::milliseconds snapshot_timeout{120000};
    std::chrono::milliseconds interval{60000};
    // The NVML event watcher (`gpudx nvml-events` as a child); its command empty: none (--no-driver).
    NvmlWatchOptions nvml_events;
    // The least time between two diagnoses that NVML events call for: a storm of events is one diagnosis per
    // this, not one per event.
    std::chrono::milliseconds nvml_rediagnose_gap{5000};
    std::optional<std::string> listen = "127.0.0.1:9400";  // nullopt: no TCP listener
    std::string socket_path;     // empty: no unix socket
    std::string state_dir = "/var/lib/gpudx";
    EventStoreOptions store;     // path empty: STATE_DIR/events.db
    bool drain = false;
    SlurmDrainOptions slurm;
    // Lines of the followed kernel log that matter: the signature catalogue's words beside the parser's topics.
    std::vector<std::string> kernel_log_words;
    const SignatureCatalogue* signatures = nullptr;  // null: the built-in catalogue
};

// Exit code when the agent cannot start: a port in use, a socket another agent answers on, a state directory
// that cannot be made (64, as a usage error: what was asked cannot be done here).
inline constexpr int kExitAgentCannotStart = 64;

// Runs until SIGTERM or SIGINT (exit 0). Blocks those signals in every thread it starts.
int run_agent(const AgentOptions& o);

// Whether a kernel-log line (any format the scanner knows) is one the diagnosis keeps: a parser topic (Xid,
// NVRM, AER, ...) or one of `words` (any case).
bool kernel_line_matters(std::string_view line, const std::vector<std::string>& words);

}  // namespace gpudx
