#pragma once
// The text reports of `gpudx accept` (docs/accept.md); the JSON record is the report's own (accept_report_to_json).
#include <string>
#include <vector>

#include "model/accept.hpp"

namespace gpudx {

// The changes against an earlier record, regressions marked.
std::string render_accept_comparison(const std::vector<AcceptChange>& changes);

// The run as text: the GPUs, one line a sub-test (figures, reason), the verdict. verbose: also each sub-test's
// details (patterns, link evidence, what the children saw).
std::string render_accept_text(const AcceptReport& r, bool color = false, bool verbose = false);

}  // namespace gpudx
