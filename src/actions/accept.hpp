#pragma once
// `gpudx accept`: acceptance tests after a repair (docs/accept.md). Compute on every card, memory
// alloc/verify/free, host and peer transfers with verification, and a negative isolation check,
// recorded as JSON that a later run can be compared with (the record: model/accept.hpp).
//
// The orchestration here decides the plan, the verdicts and the record; the GPU work sits behind
// AcceptDriver so unit tests drive it with a fake and accept_cuda.cpp drives the real CUDA driver.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "model/accept.hpp"
#include "model/accept_thresholds.hpp"

namespace gpudx {

// ---- what the GPU side must answer -------------------------------------------------------------

struct CopyPlan {
    uint64_t bytes = 0;
    unsigned repetitions = 1;
};

// A timed, verified transfer: `bytes` moved `repetitions` times in `seconds`; `mismatches` counts
// the 8-byte words that arrived wrong when the destination was checked afterwards.
struct CopyFigures {
    uint64_t bytes = 0;
    unsigned repetitions = 0;
    double seconds = 0;
    uint64_t mismatches = 0;
};

struct HostCopyFigures {
    CopyFigures h2d, d2h;
};

struct ComputeFigures {
    uint64_t threads = 0;       // values written, one per thread
    uint64_t wrong_values = 0;  // values that differ from the host's answer
    unsigned sms_seen = 0;      // distinct %smid values recorded by the blocks
    unsigned sm_count = 0;      // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    unsigned repetitions = 1;
    double seconds = 0;
};

enum class MemoryPattern { walking_ones, walking_zeros, address, random };
const char* to_string(MemoryPattern p);

struct MemoryPlan {
    double fraction_of_free = 0.92;     // how much of the free memory to allocate
    uint64_t reserve_bytes = 768ull << 20;  // left free for the driver and the other tests
    uint64_t chunk_bytes = 2ull << 30;
    std::vector<MemoryPattern> patterns{MemoryPattern::walking_ones, MemoryPattern::address, MemoryPattern::random};
    unsigned passes = 1;  // each pass uses a new seed
};

struct PatternOutcome {
    std::string pattern;  // walking_ones, address, random, walking_zeros (with the pass's seed)
    uint64_t seed = 0;
    uint64_t errors = 0;  // wrong 8-byte words over every chunk
    std::optional<uint64_t> first_error_offset;  // byte offset in the tested memory of the first bad word seen
};

struct MemoryFigures {
    uint64_t free_bytes = 0, total_bytes = 0;
    uint64_t tested_bytes = 0;  // allocated and tested
    unsigned chunks = 0;
    std::vector<PatternOutcome> patterns;
    uint64_t written_bytes = 0, read_bytes = 0;
    double write_seconds = 0, read_seconds = 0;  // kernel time only, event-timed
    bool released = false;  // every chunk freed again and the free memory back
};

enum class PeerLink { nvlink, pcie_switch, pcie_host_bridge, pcie_cross_root, unknown };
const char* to_string(PeerLink l);

struct PeerInfo {
    bool a_to_b = false, b_to_a = false;  // cuDeviceCanAccessPeer both ways
    PeerLink link = PeerLink::unknown;
    std::string link_evidence;  // how the link class was decided
};

// What a child process started with a given environment could see.
struct VisibleView {
    std::optional<std::vector<std::string>> cuda_uuids;  // nullopt: CUDA could not be asked (cuda_error says why)
    std::string cuda_error;
    std::optional<std::vector<std::string>> nvml_uuids;
    std::string nvml_error;
};

struct DriverFacts {
    std::string library_path;
    std::optional<int> cuda_driver_version;
    std::string driver_version;  // NVML string when available
};

enum class DriverUnavailable { no_library, no_device, init_failed };

// The GPU side. Every method may fail with an Error saying why; a call that hangs is the
// watchdog's business (run_acceptance_watched), not the driver's.
class AcceptDriver {
public:
    virtual ~AcceptDriver() = default;
    // Load the driver and initialise it. An error whose `sys_errno` is ENODEV means "no GPU or no
    // driver": the whole acceptance is then not run.
    virtual Result<DriverFacts> open() = 0;
    virtual Result<std::vector<AcceptGpu>> devices() = 0;
    virtual Result<double> create_context(int ordinal) = 0;  // milliseconds taken
    virtual Result<ComputeFigures> compute(int ordinal, unsigned repetitions) = 0;
    virtual Result<MemoryFigures> memory(int ordinal, const MemoryPlan& plan) = 0;
    virtual Result<CopyFigures> device_copy(int ordinal, const CopyPlan& plan) = 0;
    virtual Result<HostCopyFigures> host_copies(int ordinal, const CopyPlan& plan) = 0;
    virtual Result<PeerInfo> peer_info(int a, int b) = 0;
    virtual Result<CopyFigures> peer_copy(int src, int dst, const CopyPlan& plan) = 0;
    // Every route (src, dst) at once, each on its own stream.
    virtual Result<std::vector<CopyFigures>> peer_copy_concurrent(const std::vector<std::pair<int, int>>& routes,
                                                                  const CopyPlan& plan) = 0;
    // One child process per environment, all running at the same time.
    virtual std::vector<Result<VisibleView>> visible_in_children(
        const std::vector<std::map<std::string, std::string>>& environments, std::chrono::milliseconds deadline) = 0;
};

// ---- the run ------------------------------------------------------------------------------------

struct AcceptOptions {
    bool long_mode = false;
    AcceptThresholds thresholds;
    std::string thresholds_source = "none";
    std::string pairs = "all";  // all | none | "A:B,C:D" with UUIDs, PCI addresses or ordinals
    std::optional<unsigned> expect_gpus;
    // The allocation to check isolation for: from --allow, else from the scheduler's variables in
    // `environment` (see allocation_from_environment). Empty: isolation is not run (not required).
    std::vector<std::string> allow;
    std::string allow_source;
    std::map<std::string, std::string> environment;  // the job's environment, handed to the children
    CopyPlan d2d{4ull << 30, 20};
    CopyPlan host{1ull << 30, 5};
    CopyPlan p2p{4ull << 30, 10};
    MemoryPlan memory;
    unsigned compute_repetitions = 1;
    // Facts gathered outside the driver, copied into the report.
    std::string node, kernel, module_version, image_digest;
};

// Quick defaults, or the longer memory and stress passes of --long.
AcceptOptions default_accept_options(bool long_mode);

// Told about progress; the watched runner forwards these to the parent process.
struct AcceptObserver {
    virtual ~AcceptObserver() = default;
    virtual void header(const AcceptReport&) {}
    virtual void planned(const std::vector<SubTest>&) {}
    virtual void started(const SubTest&, std::chrono::milliseconds /*deadline*/) {}
    virtual void finished(const SubTest&) {}
};

// Runs every sub-test in this process and returns the record with its verdict.
AcceptReport run_acceptance(AcceptDriver& driver, const AcceptOptions& options, AcceptObserver* observer = nullptr);

struct WatchOptions {
    std::chrono::milliseconds overall{std::chrono::minutes(10)};
    double deadline_scale = 1.0;  // multiplies every sub-test's deadline (tests shrink it)
    std::function<void(const SubTest&, size_t done, size_t planned)> progress;  // a sub-test started
};

// Runs the acceptance in a forked child (the driver is created there by `make_driver`) and watches
// it: a sub-test that overruns its deadline, or a child that dies, becomes a failed sub-test and the
// rest "not run"; the caller never hangs. The parent process never touches the driver.
AcceptReport run_acceptance_watched(const std::function<std::unique_ptr<AcceptDriver>()>& make_driver,
                                    const AcceptOptions& options, const WatchOptions& watch = {});

// Pass/warn/fail of one figure against a floor: below fails, within kThresholdWarnMargin above warns.
TestStatus judge_floor(double value, std::optional<double> floor);
// Worst of the two (not_run ranks between warn and fail for a single sub-test's own parts).
TestStatus worse(TestStatus a, TestStatus b);
// Verdict and exit code from the sub-tests: fail if a required one failed (exit 1) or did not run
// (exit 3 when nothing failed), warn (exit 2), else pass (0).
void apply_verdict(AcceptReport& report);

// The allocation a scheduler gave this job, from its variables: CUDA_VISIBLE_DEVICES, then
// NVIDIA_VISIBLE_DEVICES, then SLURM_STEP_GPUS / SLURM_JOB_GPUS. Returns (source, entries), or
// nullopt when none names GPUs.
std::optional<std::pair<std::string, std::vector<std::string>>> allocation_from_environment(
    const std::map<std::string, std::string>& env);

// Pairs named by a --pairs value against the GPUs found: each entry "A:B" with a UUID (or unique
// UUID prefix), PCI address or ordinal on each side. Unknown names are returned in `unknown`.
struct PairSelection {
    std::vector<std::pair<int, int>> pairs;  // ordinals, a < b
    std::vector<std::string> unknown;
};
PairSelection select_pairs(std::string_view spec, const std::vector<AcceptGpu>& gpus);
// Index into gpus of the GPU a name (UUID, UUID prefix, PCI address, ordinal) denotes.
std::optional<size_t> find_gpu(std::string_view name, const std::vector<AcceptGpu>& gpus);

// PCIe relation of two GPUs from their canonical sysfs paths
// ("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/.../0000:05:00.0").
PeerLink classify_pcie_paths(std::string_view a, std::string_view b);

// ---- the real driver (accept_cuda.cpp) -----------------------------------------------------------

struct CudaAcceptConfig {
    std::optional<std::string> library_dir;  // load libcuda.so.1 / libnvidia-ml.so.1 from here
    // argv of the program that prints a VisibleView as JSON for the isolation children
    // (`gpudx accept --visibility-probe`); argv[0] must be an absolute path.
    std::vector<std::string> probe_command;
};
std::unique_ptr<AcceptDriver> make_cuda_accept_driver(const CudaAcceptConfig& config);

// What this process sees through CUDA and NVML (run in the isolation children). Never throws.
VisibleView probe_visible_devices(const std::optional<std::string>& library_dir);
nlohmann::json visible_view_to_json(const VisibleView& v);
Result<VisibleView> visible_view_from_json(const nlohmann::json& j);

// ---- comparing two records ----------------------------------------------------------------------

std::vector<AcceptChange> compare_accept_reports(const AcceptReport& before, const AcceptReport& after);

}  // namespace gpudx
