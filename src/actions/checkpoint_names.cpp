// Names of the checkpoint steps, states and commands, and the driver versions they depend on.
#include "actions/checkpoint.hpp"

#include <cctype>

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

const CheckpointGpu* gpu_by_uuid(const std::vector<CheckpointGpu>& gpus, const std::string& uuid) {
    for (const auto& g : gpus)
        if (g.uuid == uuid) return &g;
    return nullptr;
}

std::optional<int> driver_branch(std::string_view version) {
    version = trim(version);
    auto dot = version.find('.');
    auto major = parse_uint(version.substr(0, dot));
    if (!major || *major == 0 || *major > 100000) return std::nullopt;
    return static_cast<int>(*major);
}

std::string parse_nvrm_version(std::string_view text) {
    for (auto line : split_lines(text)) {
        if (line.find("NVRM version:") == std::string_view::npos) continue;
        // The version is the first field shaped like digits.digits after "Kernel Module" (or "Open Kernel Module").
        auto fields = split_ws(line);
        for (size_t i = 0; i < fields.size(); ++i) {
            if (fields[i] != "Module" || i + 1 >= fields.size()) continue;
            auto v = fields[i + 1];
            if (v.find('.') != std::string_view::npos && driver_branch(v)) return std::string(v);
        }
        for (auto f : fields)
            if (f.find('.') != std::string_view::npos && f.size() > 4 && std::isdigit(static_cast<unsigned char>(f[0])) &&
                driver_branch(f))
                return std::string(f);
    }
    return {};
}

// The 580 branch (CUDA 13.0) brought GPU remapping on restore; the branch number is the authority,
// cuDriverGetVersion only when no version string could be read.
bool DriverInfo::can_remap() const {
    if (auto branch = driver_branch(driver_version)) return *branch >= 580;
    return cuda_version && *cuda_version >= 13000;
}

}  // namespace gpudx
