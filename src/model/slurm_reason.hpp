#pragma once
// The reason gpudx gives Slurm for a node it drains (docs/integration.md): written by render/formats.hpp's
// slurm_reason, read back by actions/slurm.hpp to tell gpudx's own drains from anyone else's.
#include <string_view>

namespace gpudx {

// Every Slurm reason gpudx writes starts with this; `diagnose --drain` knows its own drains by it.
inline constexpr std::string_view kSlurmReasonPrefix = "gpudx:";

}  // namespace gpudx
