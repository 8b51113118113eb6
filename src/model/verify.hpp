#pragma once
// What `gpudx verify PID` reports (docs/shim.md): the shim's published state, and per ordinal whether the
// process's view of its GPU's PCI identity is consistent, corrected, inconsistent or unknown, as JSON.
// identity/verify.hpp reads and judges; render/verify.hpp prints the text report.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

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

// A bus id or UUID as the reports show it: "unknown" for none (empty, or the state file's "-").
std::string shown_or_unknown(std::string_view bus);
// A bus id of the state file normalised ("0000:00:06.0"), "" for none ("-").
std::string bus_or_empty(std::string_view text);

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

// The report as JSON; the text report is render/verify.hpp's.
nlohmann::json verify_report_to_json(const VerifyReport& report);

}  // namespace gpudx
