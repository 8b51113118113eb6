#pragma once
// What `gpudx state|checkpoint|restore|migrate` reports (docs/checkpoint.md): the request, what the driver can do,
// every driver call with its timing, the processes' final states and identities, as JSON. actions/checkpoint.hpp
// runs the plan; render/checkpoint.hpp prints the text report.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/device_map.hpp"

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
// "driver 580.159.04, CUDA 13.0", or what is unknown of it.
std::string describe_version(const DriverInfo& d);

// How the driver is loaded and how long its calls may take.
struct DriverOptions {
    std::string library_dir;        // load libcuda.so.1 / libnvidia-ml.so.1 from here only; empty: the loader's choice
    double call_deadline_s = 600;   // per driver call (a 141 GiB checkpoint at the measured 1.7 GB/s takes ~90 s)
    double init_deadline_s = 60;    // dlopen + cuInit + device queries
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

// The JSON of a report's pieces: the checkpoint worker's answers use them too.
nlohmann::json call_to_json(const CallResult& r);
CallResult call_from_json(const nlohmann::json& j);
nlohmann::json info_to_json(const DriverInfo& d);
DriverInfo info_from_json(const nlohmann::json& j);

// The report as JSON (docs/checkpoint.md); the text report is render/checkpoint.hpp's.
nlohmann::json checkpoint_result_to_json(const CheckpointCommandResult& result);

}  // namespace gpudx
