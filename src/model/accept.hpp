#pragma once
// The record of `gpudx accept` (docs/accept.md): one run's sub-tests with their figures and verdict, kept as JSON
// that a later run is compared with, and what such a comparison finds. actions/accept.hpp runs the tests and
// compares; render/accept.hpp prints both.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "model/accept_thresholds.hpp"

namespace gpudx {

enum class TestStatus { pass, warn, fail, not_run };
const char* to_string(TestStatus s);
std::optional<TestStatus> parse_test_status(std::string_view s);

// One sub-test's outcome. `figures` are numbers (bandwidths in GB/s, counts, milliseconds);
// `thresholds` maps a figure name to the floor it was held to.
struct SubTest {
    std::string id;                     // gpu.context, gpu.compute, gpu.memory, gpu.d2d, gpu.h2d, gpu.d2h,
                                        // pair.peer_access, pair.copy, pairs.concurrent, isolation.job, ...
    std::vector<std::string> subjects;  // GPU UUIDs (two for a pair)
    std::vector<std::string> pci;       // their PCI addresses, same order
    bool required = true;
    TestStatus status = TestStatus::not_run;
    std::string reason;  // why it failed, warned or did not run; empty on a clean pass
    std::map<std::string, double> figures;
    std::map<std::string, double> thresholds;
    std::map<std::string, std::string> details;
    double duration_ms = 0;

    // Stable name across runs: id plus subjects ("pair.copy GPU-a GPU-b").
    std::string key() const;
};

struct AcceptGpu {
    int ordinal = 0;
    std::string uuid;
    std::string pci;  // normalised dddd:bb:dd.f
    std::string name;
    uint64_t total_memory = 0;
    int sm_count = 0;
    int cc_major = 0, cc_minor = 0;
};

inline constexpr int kAcceptSchemaVersion = 1;

struct AcceptReport {
    int schema_version = kAcceptSchemaVersion;
    std::string gpudx_version;
    std::string started_at;  // ISO 8601 UTC
    std::string node;        // hostname
    std::string kernel;      // uname -r
    std::string module_version;  // /sys/module/nvidia/version
    std::string driver_version;  // NVML's driver version string, else derived from the CUDA driver
    std::optional<int> cuda_driver_version;  // cuDriverGetVersion
    std::string driver_library;              // the libcuda.so.1 actually loaded
    std::string image_digest;                // container image digest when known
    std::string mode = "quick";              // quick | long
    std::vector<AcceptGpu> gpus;
    AcceptThresholds thresholds;
    std::string thresholds_source;  // "flags", "matrix FILE class NAME", "none"
    std::string allocation_source;  // "--allow", "CUDA_VISIBLE_DEVICES", ... or empty when none
    std::vector<std::string> allocation;
    std::vector<SubTest> tests;
    std::string verdict;  // pass | warn | fail
    int exit_code = 0;
    double wall_ms = 0;
};

nlohmann::json accept_report_to_json(const AcceptReport& r);
Result<AcceptReport> accept_report_from_json(const nlohmann::json& j);
Result<AcceptReport> load_accept_report(const std::string& path);
nlohmann::json sub_test_to_json(const SubTest& t);
Result<SubTest> sub_test_from_json(const nlohmann::json& j);

// One difference between two records (compare_accept_reports).
struct AcceptChange {
    std::string what;    // "driver_version", "gpu GPU-…", "gpu.d2d GPU-… d2d_gbps", "verdict"
    std::string before, after;
    bool worse = false;  // a regression: a status that got worse, or a figure that dropped more than 5 %
};

// "GPU-5f0d3c1a" of a UUID: enough to tell the GPUs of one node apart in a sub-test's details and a line of the report.
inline std::string short_uuid(const std::string& uuid) { return uuid.size() > 12 ? uuid.substr(0, 12) : uuid; }

}  // namespace gpudx
