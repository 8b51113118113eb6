#pragma once
// The rule engine: turns a snapshot into findings, a state per layer, the failure boundary and a verdict.
#include "model/diagnosis.hpp"
#include "rules/check_context.hpp"

namespace gpudx {

Diagnosis diagnose(const Snapshot& snapshot, const DiagnoseOptions& options);

}  // namespace gpudx
