#pragma once
// The text report of `gpudx checkpoint`, `restore`, `migrate` and `state` (docs/checkpoint.md); the JSON report
// is checkpoint_result_to_json.
#include <string>

#include "model/checkpoint.hpp"

namespace gpudx {

std::string render_checkpoint_text(const CheckpointCommandResult& result);

}  // namespace gpudx
