#pragma once
// Slurm node state driven by a diagnosis (`gpudx diagnose --drain`): drain the node on an error finding,
// resume it once healthy again, but only when gpudx itself drained it. gpudx recognises its own drains by
// the reason prefix "gpudx:" read back through `scontrol show node`; a node drained or downed by anyone else,
// for any other reason, is never touched (docs/integration.md).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/root.hpp"
#include "model/slurm_reason.hpp"

namespace gpudx {

// Exit code of `diagnose --drain` when the node's state could not be read or changed (scontrol missing,
// failing or hanging, node unknown to Slurm). Outside 0..3 so a health checker can tell it from a verdict.
inline constexpr int kExitSchedulerFailed = 69;

// What `scontrol show node NAME` says about the node.
struct SlurmNodeState {
    std::string name;
    std::string state;   // "IDLE+DRAIN", "DOWN*", "MIXED+DRAIN" ...
    std::string reason;  // without Slurm's " [user@time]" suffix; empty when none
    bool drain = false;  // DRAIN flag set (draining or drained)
    bool down = false;
};

// Parses the multi-line output of `scontrol show node NAME` (Slurm 20.11 .. 24.x), the first node only.
std::optional<SlurmNodeState> parse_scontrol_show_node(std::string_view text);

bool is_gpudx_reason(std::string_view reason);

enum class SlurmAction {
    none,          // nothing to do (healthy and not drained by gpudx, or already drained for this reason)
    drain,         // set DRAIN with gpudx's reason (also replaces an older gpudx reason)
    resume,        // healthy again and the drain is gpudx's own
    leave_foreign, // an error, but the node already carries someone else's reason: left as it is
    unknown,       // the diagnosis could not evaluate the node: neither drain nor resume
};
const char* to_string(SlurmAction a);

// The decision alone, from the diagnosis's exit code (0..3), the reason gpudx would give (empty when it
// found no error) and the node's current state. Pure, so every case is unit-tested.
SlurmAction decide_slurm_action(int diagnosis_exit_code, std::string_view reason, const SlurmNodeState& node);

// The node name Slurm knows this machine by: SLURMD_NODENAME (set by slurmd for prolog, epilog and
// HealthCheckProgram), else the short host name.
std::string default_slurm_node_name(const std::map<std::string, std::string>& env);

struct SlurmDrainOptions {
    std::string node;
    std::string scontrol = "scontrol";  // a path, or a name looked up in PATH
    std::chrono::milliseconds timeout{20000};  // slurmd kills a health check after 60 s: two calls fit
    // false: a node gpudx has drained keeps its reason while errors go on (the agent drains once per episode,
    // not again for each new finding); true: the reason follows the latest diagnosis (diagnose --drain).
    bool update_own_reason = true;
};

struct SlurmDrainResult {
    SlurmAction action = SlurmAction::none;
    SlurmNodeState before;
    std::string message;  // one line for the operator: what was done and why
};

// The node's state as `scontrol show node` says it. An Error when scontrol cannot be run, fails, times out, or
// does not know the node.
Result<SlurmNodeState> read_slurm_node(const SlurmDrainOptions& o);

// Reads the node's state, decides, and runs `scontrol update` when needed. An Error when scontrol cannot
// be run, fails, times out, or does not know the node.
Result<SlurmDrainResult> apply_slurm_drain(const SlurmDrainOptions& o, int diagnosis_exit_code,
                                           const std::string& reason);

// Runs argv (argv[0] looked up in PATH when it has no '/') with stdin from /dev/null, collecting stdout and
// stderr together; killed after `timeout`. Exit status, or an Error when it could not start or timed out.
struct ProcessResult {
    int exit_status = 0;  // 128+signal when killed by a signal
    std::string output;
};
Result<ProcessResult> run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// The processes of a Slurm job on this node (`gpudx diagnose --slurm-job`): `scontrol listpids JOB`, answered by
// this node's slurmd (any proctrack plugin), else the cgroup.procs under the job's cgroup (a job_JOB folder
// under /sys/fs/cgroup, v2 or v1, as proctrack/cgroup makes it). Sorted, each once; an Error saying what was
// tried when neither names a process.
struct SlurmJobPidsOptions {
    std::string job;
    std::string scontrol = "scontrol";
    std::chrono::milliseconds timeout{20000};
};
Result<std::vector<int>> slurm_job_pids(const Root& root, const SlurmJobPidsOptions& o);
// The PID column of `scontrol listpids JOB` rows whose JOBID is the job (or one of its array tasks "JOB_N").
std::vector<int> parse_scontrol_listpids(std::string_view text, std::string_view job);

}  // namespace gpudx
