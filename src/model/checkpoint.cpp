// Names of the checkpoint steps, states and commands, and the driver versions they depend on.
#include "model/checkpoint.hpp"

#include <fmt/format.h>

#include "abi/cuda.hpp"
#include "core/text.hpp"

namespace gpudx {

std::string_view step_name(CheckpointStep step) {
    switch (step) {
        case CheckpointStep::lock: return "lock";
        case CheckpointStep::checkpoint: return "checkpoint";
        case CheckpointStep::restore: return "restore";
        case CheckpointStep::unlock: return "unlock";
    }
    return "?";
}

std::optional<CheckpointStep> parse_step(std::string_view name) {
    for (auto s : {CheckpointStep::lock, CheckpointStep::checkpoint, CheckpointStep::restore, CheckpointStep::unlock})
        if (step_name(s) == name) return s;
    return std::nullopt;
}

std::string_view state_name(ProcessState state) {
    switch (state) {
        case ProcessState::running: return "running";
        case ProcessState::locked: return "locked";
        case ProcessState::checkpointed: return "checkpointed";
        case ProcessState::failed: return "failed";
        case ProcessState::unknown: return "unknown";
    }
    return "unknown";
}


std::string_view driver_call_name(CheckpointStep step) {
    switch (step) {
        case CheckpointStep::lock: return "cuCheckpointProcessLock";
        case CheckpointStep::checkpoint: return "cuCheckpointProcessCheckpoint";
        case CheckpointStep::restore: return "cuCheckpointProcessRestore";
        case CheckpointStep::unlock: return "cuCheckpointProcessUnlock";
    }
    return "?";
}

std::string_view command_name(CheckpointCommand c) {
    switch (c) {
        case CheckpointCommand::state: return "state";
        case CheckpointCommand::checkpoint: return "checkpoint";
        case CheckpointCommand::restore: return "restore";
        case CheckpointCommand::migrate: return "migrate";
        case CheckpointCommand::single_step: return "action";
    }
    return "?";
}

std::optional<std::string> usual_cause(const CallResult& r) {
    if (r.ok() || r.code <= 0 || !find_cu_result(r.code)) return std::nullopt;
    return std::string(cu_result_meaning(r.code));
}

std::string describe_version(const DriverInfo& d) {
    std::string out = d.driver_version.empty() ? "driver version unknown" : "driver " + d.driver_version;
    if (d.cuda_version) out += fmt::format(", CUDA {}.{}", *d.cuda_version / 1000, (*d.cuda_version % 1000) / 10);
    return out;
}

std::optional<int> driver_branch(std::string_view version) {
    version = trim(version);
    auto dot = version.find('.');
    auto major = parse_uint(version.substr(0, dot));
    if (!major || *major == 0 || *major > 100000) return std::nullopt;
    return static_cast<int>(*major);
}

// The 580 branch (CUDA 13.0) brought GPU remapping on restore; the branch number is the authority,
// cuDriverGetVersion only when no version string could be read.
bool DriverInfo::can_remap() const {
    if (auto branch = driver_branch(driver_version)) return *branch >= 580;
    return cuda_version && *cuda_version >= 13000;
}

}  // namespace gpudx
