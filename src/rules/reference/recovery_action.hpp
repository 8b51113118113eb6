#pragma once
// The driver's recovery action for a GPU, as NVML reports it (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) and as an
// Xid 154 line states it: what it asks the operator for, and how severe gpudx calls it. One table for both, so
// the kernel log and NVML say the same thing about the same action.
#include <optional>
#include <string>
#include <string_view>

#include "model/finding.hpp"

namespace gpudx {

struct RecoveryAction {
    unsigned value = 0;  // nvmlDeviceGpuRecoveryAction_t
    std::string_view name;       // "GPU reset"
    Severity severity = Severity::warning;
    std::string_view next_step;  // <UUID> stands for the GPU's UUID
};

// The action for a value NVML or the driver reports; for a value gpudx does not know, an entry saying so
// (a warning: the driver asks for something).
RecoveryAction recovery_action(unsigned value);
bool is_known_recovery_action(unsigned value);

// What an Xid 154 line states: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
// "... changed to 0x1 (GPU Reset Required)". `wording` is the driver's name in parentheses, when written.
struct StatedRecoveryAction {
    unsigned value = 0;
    std::string wording;
};
std::optional<StatedRecoveryAction> recovery_action_in_text(std::string_view line);

}  // namespace gpudx
