#pragma once
// `gpudx verify PID`: is a process's view of its GPUs' PCI identity consistent (after a checkpoint/restore)?
//
// The preload shim (src/shim, docs/shim.md) publishes what it saw in <dir>/gpudx-shim.<pid>: per ordinal
// the UUID the driver reports, the bus id the driver reports, the bus id of that UUID's card, and how
// many answers it corrected. This reads that file (and /proc/PID/maps, /proc/PID/environ, the node's
// /proc/driver/nvidia/gpus) and explains, per ordinal, whether the identity is consistent, corrected,
// inconsistent or unknown, and what no shim can correct.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "core/root.hpp"

namespace gpudx {

// One "ordinal …" line of the shim's state file. Bus ids in CUDA's spelling, "-" when unknown.
struct ShimOrdinalState {
    int ordinal = 0;
    std::string uuid;         // what cuDeviceGetUuid_v2 reports now
    std::string driver_bus;   // what cuDeviceGetPCIBusId of the driver reports
    std::string current_bus;  // where the card with that UUID sits (the shim's answer), "-" unknown
    std::string source;       // procfs, nvml, none
    uint64_t corrected = 0;   // answers the shim changed (bus id, attributes, by-bus-id, NVML)
    unsigned uuid_changes = 0;             // restores onto another card the shim noticed
    std::vector<std::string> handed_out;  // bus ids the process was given for this ordinal
};

struct ShimState {
    int pid = 0;
    unsigned long long start_ticks = 0;  // /proc/PID/stat field 22 of the writer
    std::string mode;                    // correct | observe
    std::string proc_root;
    std::string nvml;
    long long updated_unix_ms = 0;
    uint64_t nvml_translations = 0;
    std::vector<ShimOrdinalState> ordinals;
};

// The state file's text ("gpudx-shim-state 1" … "end"); an error for anything else or a torn file.
Result<ShimState> parse_shim_state(std::string_view text);
// A bus id or UUID as the reports show it: "unknown" for none (empty, or the state file's "-").
std::string shown_or_unknown(std::string_view bus);
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

enum class IdentityVerdict { consistent, corrected, inconsistent, unknown };
std::string_view verdict_name(IdentityVerdict v);

struct VerifiedOrdinal {
    ShimOrdinalState state;
    std::string node_bus;  // where verify itself finds the UUID on this node; empty when absent
    IdentityVerdict verdict = IdentityVerdict::unknown;
    std::string explanation;
};

struct VerifyReport {
    int pid = 0;
    bool shim_loaded = false;
    std::string shim_path;
    std::string state_path;     // the file read, empty when none was found
    std::string state_problem;  // why there is no usable state
    std::optional<ShimState> state;
    double state_age_s = -1;
    std::vector<std::string> libraries;  // identity-caching libraries mapped in the process
    std::vector<VerifiedOrdinal> ordinals;
    std::vector<std::string> cannot_correct;
    IdentityVerdict verdict = IdentityVerdict::unknown;
    std::string summary;
    int exit_code = 3;  // 0 consistent (or corrected), 1 inconsistent, 3 could not evaluate
};

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

// The report as JSON; the text report is render/verify.hpp's.
nlohmann::json verify_report_to_json(const VerifyReport& report);

}  // namespace gpudx
