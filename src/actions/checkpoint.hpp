#pragma once
// `gpudx state|checkpoint|restore|migrate`: the CUDA driver's checkpoint API (cuCheckpointProcess*,
// driver 550+, remapping on restore 580+) driven over several processes with a device map.
//
// The orchestration (`run_checkpoint_plan`) works over the abstract `CheckpointDriver`, so tests drive it
// with a fake. The real driver runs in a forked worker process that owns libcuda (it needs cuInit in the
// process that calls it); every call goes to the worker under a deadline, and a call that does not return
// in time gets the worker killed and is reported as an error: gpudx never hangs on a wedged driver.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "core/root.hpp"
#include "actions/device_map.hpp"

namespace gpudx {

enum class CheckpointStep { lock, checkpoint, restore, unlock };
std::string_view step_name(CheckpointStep step);
std::optional<CheckpointStep> parse_step(std::string_view name);
// The driver entry point a step calls ("cuCheckpointProcessLock").
std::string_view driver_call_name(CheckpointStep step);

// CUprocessState, plus what gpudx could not learn.
enum class ProcessState { running, locked, checkpointed, failed, unknown };
std::string_view state_name(ProcessState state);

// CUresult codes gpudx reports itself (negative: never a driver code).
inline constexpr int kCallDeadlineExceeded = -1;  // the call did not return in time; its worker was killed
inline constexpr int kCallWorkerLost = -2;        // the worker died or answered nonsense
inline constexpr int kCallUnavailable = -3;       // the entry point is missing from this driver

struct CallResult {
    int code = 0;          // CUresult; 0 = CUDA_SUCCESS
    std::string name;      // cuGetErrorName ("CUDA_ERROR_ILLEGAL_STATE")
    std::string meaning;   // cuGetErrorString
    double seconds = 0;    // the driver call itself, timed in the process that made it
    double wall_seconds = 0;  // the call as gpudx saw it, including the hop to the worker
    bool ok() const { return code == 0; }
};
// What a failed driver call usually means, in gpudx's words (the driver's own sentence is terse); none for a
// success or a code gpudx has no words for.
std::optional<std::string> usual_cause(const CallResult& r);

struct StateResult {
    CallResult call;
    ProcessState state = ProcessState::unknown;
};

// What the loaded driver can do.
struct DriverInfo {
    std::string library_path;              // libcuda.so.1 as loaded (or asked for)
    std::string load_error;                // dlopen's message when it failed
    std::optional<CallResult> init;        // cuInit(0)
    double init_seconds = 0;
    std::optional<int> cuda_version;       // cuDriverGetVersion, e.g. 13000
    std::string driver_version;            // "580.159.04" (NVML, else /proc/driver/nvidia/version)
    std::vector<std::string> missing_entry_points;  // cuCheckpointProcess* absent: driver older than 550
    bool nvml_loaded = false;

    bool usable() const { return load_error.empty() && init && init->ok(); }
    bool has_checkpoint_api() const { return usable() && missing_entry_points.empty(); }
    // Restore onto other GPUs came with driver 580 (CUDA 13.0).
    bool can_remap() const;
};

// Driver branch from a version string ("580.159.04" -> 580).
std::optional<int> driver_branch(std::string_view version);
// The version in /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04 …").
std::string parse_nvrm_version(std::string_view text);
// "driver 580.159.04, CUDA 13.0", or what is unknown of it.
std::string describe_version(const DriverInfo& d);

class CheckpointDriver {
public:
    virtual ~CheckpointDriver() = default;
    virtual const DriverInfo& info() const = 0;
    // Every GPU of the node, in PCI order.
    virtual std::vector<CheckpointGpu> gpus() = 0;
    // Bytes the given processes hold on each GPU (by UUID); nullopt when not every process could be accounted.
    virtual MemoryHeld memory_held(const std::vector<int>& pids) = 0;
    virtual CallResult lock(int pid, unsigned timeout_ms) = 0;
    virtual CallResult checkpoint(int pid) = 0;
    virtual CallResult restore(int pid, const std::vector<GpuPair>& pairs) = 0;  // empty: same GPUs
    virtual CallResult unlock(int pid) = 0;
    virtual StateResult state(int pid) = 0;
};

struct DriverOptions {
    std::string library_dir;        // load libcuda.so.1 / libnvidia-ml.so.1 from here only; empty: the loader's choice
    double call_deadline_s = 600;   // per driver call (a 141 GiB checkpoint at the measured 1.7 GB/s takes ~90 s)
    double init_deadline_s = 60;    // dlopen + cuInit + device queries
};

// Forks the worker that owns libcuda and asks it to initialise. Never fails: what went wrong is in info().
std::unique_ptr<CheckpointDriver> open_isolated_driver(const DriverOptions& options);

struct CheckpointPlan {
    std::vector<int> pids;
    std::vector<CheckpointStep> steps;  // in order; each runs for every PID before the next step starts
    unsigned lock_timeout_ms = 0;       // cuCheckpointProcessLock's timeoutMs (0: wait as the driver decides)
    std::vector<GpuPair> pairs;         // for restore; empty: back onto the same GPUs
    // On a failure, bring every named process back to running (restore onto its own GPUs, unlock).
    bool rollback_on_failure = true;
    bool unlock_on_rollback = true;     // false with --no-unlock: a rolled-back process is left locked
};

struct StepRecord {
    int pid = 0;
    CheckpointStep step = CheckpointStep::lock;
    CallResult result;
    bool rollback = false;  // part of undoing a failed plan
};

struct ProcessOutcome {
    int pid = 0;
    ProcessState state = ProcessState::unknown;
    std::string state_error;  // when cuCheckpointProcessGetState failed
};

struct CheckpointReport {
    std::vector<StepRecord> steps;             // every call made, in order, with its timing
    std::optional<StepRecord> failure;         // the first call that failed
    std::vector<ProcessOutcome> final_states;  // cuCheckpointProcessGetState after the plan (and rollback)
    double seconds = 0;                        // the whole plan, wall clock
    bool ok() const { return !failure; }
};

CheckpointReport run_checkpoint_plan(const CheckpointPlan& plan, CheckpointDriver& driver);

// --- Safety and identity around the plan ---

// Real UID of a process from /proc/PID/status ("Uid:\t1000\t1000\t1000\t1000").
std::optional<unsigned> parse_status_uid(std::string_view status_text);
// Refuses a PID that does not exist or that the caller (uid) does not own, unless the caller is root.
Result<void> check_process_access(const Root& root, int pid, unsigned caller_uid);

// The preload library's path when /proc/PID/maps shows it mapped into the process.
std::optional<std::string> find_loaded_shim(const Root& root, int pid);

// --- The whole command, for the app and end-to-end tests ---

enum class CheckpointCommand { state, checkpoint, restore, migrate, single_step };
std::string_view command_name(CheckpointCommand c);

struct CheckpointRequest {
    CheckpointCommand command = CheckpointCommand::state;
    std::vector<int> pids;
    std::optional<CheckpointStep> action;  // with single_step
    std::string device_map;                // empty: none given
    unsigned lock_timeout_ms = 0;
    bool no_unlock = false;
    DriverOptions driver;
};

struct VerifyOutcome {
    int pid = 0;
    std::string shim_path;  // empty: the shim is not loaded
    std::string verdict;             // `gpudx verify`'s verdict (consistent, corrected, inconsistent, unknown)
    std::optional<bool> consistent;  // from that verdict, when it says
    std::string detail;
};

struct CheckpointCommandResult {
    int exit_code = 0;  // 0 done, 1 a step failed, 3 the driver cannot do it, 64 refused (bad map, foreign PID)
    std::string usage_error;  // one line for stderr when exit_code is 64
    CheckpointRequest request;
    DriverInfo driver;
    std::vector<CheckpointGpu> gpus;
    std::vector<GpuPair> pairs;
    CheckpointReport report;
    std::vector<VerifyOutcome> verify;
    std::vector<std::string> notes;     // warnings and limits, in words
};

CheckpointCommandResult run_checkpoint_command(const CheckpointRequest& request, const Root& root,
                                               CheckpointDriver* driver_override = nullptr);

// The JSON of a report's pieces: the checkpoint worker's answers use them too.
nlohmann::json call_to_json(const CallResult& r);
CallResult call_from_json(const nlohmann::json& j);
nlohmann::json gpu_to_json(const CheckpointGpu& g);
CheckpointGpu gpu_from_json(const nlohmann::json& j);
nlohmann::json info_to_json(const DriverInfo& d);
DriverInfo info_from_json(const nlohmann::json& j);

// The report as JSON (docs/checkpoint.md); the text report is render/checkpoint.hpp's.
nlohmann::json checkpoint_result_to_json(const CheckpointCommandResult& result);
// The GPU of that UUID among those the driver listed, or none.
const CheckpointGpu* gpu_by_uuid(const std::vector<CheckpointGpu>& gpus, const std::string& uuid);

}  // namespace gpudx
