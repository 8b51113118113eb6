#pragma once
// The rule tables, each defined in its own file of rules/families/ or rules/comparisons/: the families diagnose runs, and the rules applied
// outside it (the node record comparison, the compatibility matrix, the engine's own).
#include <span>
#include <string_view>

#include "rules/engine/check_context.hpp"

namespace gpudx {

extern const RuleFamily kPcieFamily, kModuleFamily, kKernelLogFamily, kLibrariesFamily, kDevicesFamily, kDriverFamily,
    kIdentityFamily, kContainerFamily, kAllocationFamily, kAmdFamily, kProcessFamily, kGpuHealthFamily,
    kInfinibandFamily, kServicesFamily, kAmdHealthFamily;

// Rules with no family of diagnose: `name` stands for the family in `gpudx rules` and docs/rules.md.
struct RuleTable {
    std::string_view name;
    std::span<const Rule> rules;
};
extern const RuleTable kBaselineRules, kMatrixRules, kEngineRules;

}  // namespace gpudx
