#pragma once
// The text report of `gpudx verify` (docs/shim.md); the JSON report is verify_report_to_json.
#include <string>

#include "model/verify.hpp"

namespace gpudx {

std::string render_verify_text(const VerifyReport& report);

}  // namespace gpudx
