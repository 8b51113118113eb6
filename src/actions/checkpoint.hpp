#pragma once
// `gpudx state|checkpoint|restore|migrate`: the CUDA driver's checkpoint API (cuCheckpointProcess*,
// driver 550+, remapping on restore 580+) driven over several processes with a device map.
//
// The orchestration (`run_checkpoint_plan`) works over the abstract `CheckpointDriver`, so tests drive it
// with a fake. The real driver runs in a forked worker process that owns libcuda (it needs cuInit in the
// process that calls it); every call goes to the worker under a deadline, and a call that does not return
// in time gets the worker killed and is reported as an error: gpudx never hangs on a wedged driver. What the
// commands report is model/checkpoint.hpp's.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actions/device_map.hpp"
#include "core/error.hpp"
#include "core/root.hpp"
#include "model/checkpoint.hpp"

namespace gpudx {

struct StateResult {
    CallResult call;
    ProcessState state = ProcessState::unknown;
};

// The version in /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04 …").
std::string parse_nvrm_version(std::string_view text);

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

CheckpointReport run_checkpoint_plan(const CheckpointPlan& plan, CheckpointDriver& driver);

// --- Safety and identity around the plan ---

// Real UID of a process from /proc/PID/status ("Uid:\t1000\t1000\t1000\t1000").
std::optional<unsigned> parse_status_uid(std::string_view status_text);
// Refuses a PID that does not exist or that the caller (uid) does not own, unless the caller is root.
Result<void> check_process_access(const Root& root, int pid, unsigned caller_uid);

// The preload library's path when /proc/PID/maps shows it mapped into the process.
std::optional<std::string> find_loaded_shim(const Root& root, int pid);

// --- The whole command, for the app and end-to-end tests ---

CheckpointCommandResult run_checkpoint_command(const CheckpointRequest& request, const Root& root,
                                               CheckpointDriver* driver_override = nullptr);

}  // namespace gpudx
