#pragma once
// `gpudx verify PID`: is a process's view of its GPUs' PCI identity consistent (after a checkpoint/restore)?
//
// The preload shim (src/shim, docs/shim.md) publishes what it saw in <dir>/gpudx-shim.<pid>: per ordinal
// the UUID the driver reports, the bus id the driver reports, the bus id of that UUID's card, and how
// many answers it corrected. This reads that file (and /proc/PID/maps, /proc/PID/environ, the node's
// /proc/driver/nvidia/gpus) and explains, per ordinal, whether the identity is consistent, corrected,
// inconsistent or unknown, and what no shim can correct (the report: model/verify.hpp).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/root.hpp"
#include "model/verify.hpp"

namespace gpudx {

// The state file's text ("gpudx-shim-state 1" … "end"); an error for anything else or a torn file.
Result<ShimState> parse_shim_state(std::string_view text);
// The mapped libgpudx_shim*.so in /proc/PID/maps text, if any.
std::optional<std::string> shim_mapping(std::string_view maps_text);
// GPU libraries that cache identity (libcudart, libnccl, libtorch_cuda, …), by file name, from maps text.
std::vector<std::string> identity_caching_libraries(std::string_view maps_text);
// Innermost PID from the "NSpid:" line of /proc/PID/status (the PID the process sees itself as).
std::optional<int> parse_nspid(std::string_view status_text);
// The uids of the "Uid:" line of /proc/PID/status (real, effective, saved, filesystem).
std::vector<uint32_t> parse_status_uids(std::string_view status_text);
// Field 22 (start time in clock ticks) of /proc/PID/stat.
std::optional<unsigned long long> parse_start_ticks(std::string_view stat_text);
// Value of NAME in /proc/PID/environ text (NUL-separated).
std::optional<std::string> environ_value(std::string_view environ_text, std::string_view name);
// UUID (lower case) -> normalised PCI address from the node's /proc/driver/nvidia/gpus/*/information.
std::map<std::string, std::string> node_gpus_by_uuid(const Root& node);

// What `gpudx verify` checks before it believes a state file in a shared directory (/dev/shm, /tmp), where
// any user may place one under the process's name (docs/reliability.md).
struct StateFileOwnership {
    bool regular = false;  // a regular file itself, not a link to one
    uint32_t uid = 0;
    uint32_t mode = 0;  // st_mode
};
// Why the file cannot be the process's own, empty when it can: it must be a regular file owned by one of the
// process's uids or by root, and writable by its owner alone.
std::string state_file_distrust(const StateFileOwnership& file, const std::vector<uint32_t>& process_uids);

struct VerifyOptions {
    std::string state_dir;  // where the shim writes (default: the process's GPUDX_SHIM_STATE_DIR, /dev/shm, /tmp)
    std::string node_root;  // where /proc/driver/nvidia lives (default: the process's GPUDX_SHIM_PROC_ROOT, else root)
};

// Pure evaluation: what the process's maps and state file say, against the node's UUID -> address map.
VerifyReport evaluate_identity(int pid, std::string_view maps_text, const std::optional<ShimState>& state,
                               const std::map<std::string, std::string>& node_gpus, long long now_unix_ms);

// Reads everything for a live process through `root` (normally "/"). An error only when the process
// does not exist or its maps cannot be read.
Result<VerifyReport> verify_process(const Root& root, int pid, const VerifyOptions& options);

}  // namespace gpudx
