#pragma once
// The rule engine: turns a snapshot into findings, a state per layer, the failure boundary and a verdict.
#include <span>

#include "model/diagnosis.hpp"
#include "rules/engine/check_context.hpp"

namespace gpudx {

Diagnosis diagnose(const Snapshot& snapshot, const DiagnoseOptions& options);
// Over the given families instead of every family (a test's family that throws).
Diagnosis diagnose(const Snapshot& snapshot, const DiagnoseOptions& options, std::span<const RuleFamily> families);

}  // namespace gpudx
