#include "rules/reference/recovery_action.hpp"

#include <array>
#include <cctype>

#include "core/text.hpp"

namespace gpudx {

namespace {

// nvml.h's nvmlDeviceGpuRecoveryAction_t, with what each asks for (NVML's documentation of the field).
constexpr std::array kActions{
    RecoveryAction{0, "none", Severity::info, "No recovery is pending: nothing to do."},
    RecoveryAction{1, "GPU reset", Severity::error,
                   "Drain the GPU, stop its processes and reset it (nvidia-smi -r -i <UUID>); the driver refuses new "
                   "work on it until then."},
    RecoveryAction{2, "node reboot", Severity::error,
                   "Drain the node and reboot it: the driver says a GPU reset is not enough."},
    RecoveryAction{3, "drain P2P", Severity::warning,
                   "Stop the peer-to-peer and NVLink traffic to this GPU (end the jobs using it), then read the action "
                   "again (`gpudx diagnose`): it then says whether a reset or a reboot is needed."},
    RecoveryAction{4, "drain and reset", Severity::error,
                   "The GPU runs at reduced capacity: stop scheduling new work on it, let the running jobs finish, then "
                   "reset it (nvidia-smi -r -i <UUID>)."},
};

}  // namespace

bool is_known_recovery_action(unsigned value) { return value < kActions.size(); }

RecoveryAction recovery_action(unsigned value) {
    if (is_known_recovery_action(value)) return kActions[value];
    return {value, "an action gpudx does not know", Severity::warning,
            "The driver asks for a recovery gpudx does not know: read `nvidia-smi -q -i <UUID>` (GPU Recovery Action) "
            "and the driver's release notes, and drain the GPU until it is done."};
}

std::optional<StatedRecoveryAction> recovery_action_in_text(std::string_view line) {
    const std::string lower = to_lower(line);
    size_t at = lower.find("recovery action");
    if (at == std::string::npos) return std::nullopt;
    // The new action follows the last " to 0x" ("changed from 0x0 (None) to 0x2 (...)").
    size_t to = lower.rfind(" to 0x");
    if (to == std::string::npos || to < at) return std::nullopt;
    size_t k = to + 6, end = k;
    unsigned value = 0;
    while (end < line.size() && end - k < 8 && std::isxdigit(static_cast<unsigned char>(line[end]))) {
        char c = line[end];
        value = value * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        ++end;
    }
    if (end == k) return std::nullopt;
    StatedRecoveryAction out{value, {}};
    size_t open = line.find('(', end);
    if (open != std::string_view::npos && line.substr(end, open - end).find_first_not_of(' ') == std::string_view::npos) {
        size_t close = line.find(')', open);
        if (close != std::string_view::npos) out.wording = std::string(line.substr(open + 1, close - open - 1));
    }
    return out;
}

}  // namespace gpudx
