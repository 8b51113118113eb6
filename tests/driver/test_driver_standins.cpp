// The driver layers end to end against the stand-in libraries: real fork/dlopen/deadline path.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rules/engine/check_context.hpp"
#include "rules/engine/families.hpp"
#include "collect/amd.hpp"
#include "collect/collectors.hpp"
#include "abi/cuda.hpp"
#include "abi/nvml.hpp"
#include "abi/rocm_smi.hpp"
#include "identity/join.hpp"

using namespace gpudx;
using namespace std::chrono_literals;

namespace gpudx {
void check_driver(const CheckContext&, std::vector<Finding>&);
void check_identity(const CheckContext&, std::vector<Finding>&);
void check_allocation(const CheckContext&, std::vector<Finding>&);
}  // namespace gpudx

namespace {

const std::string kLibs = GPUDX_STANDIN_LIB_DIR;
const std::string kScenarios = GPUDX_STANDIN_SCENARIOS;
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const char* kUuid0 = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
const char* kUuid1 = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";

void use_scenario(const std::string& name) {
    ::setenv("GPUDX_STANDIN_SCENARIO", (kScenarios + "/" + name).c_str(), 1);
}

// A scenario written on the fly: h200x2 plus the given controls.
void use_controls(const nlohmann::json& controls) {
    auto path = std::filesystem::temp_directory_path() / ("gpudx-scenario-" + std::to_string(::getpid()) + ".json");
    nlohmann::json doc = controls;
    doc["base"] = kScenarios + "/h200x2.json";
    std::ofstream(path) << doc.dump();
    ::setenv("GPUDX_STANDIN_SCENARIO", path.c_str(), 1);
}

// The deadline of a probe that hangs on purpose: the stand-ins answer in microseconds, so every call that
// does answer is in long before it, however loaded the machine; only the hung calls are cut.
constexpr auto kHangDeadline = 2000ms;

// The deadline of a probe that is meant to answer: long, because an answering stand-in returns in microseconds
// and a short deadline only measures how loaded the machine is (under ASan, beside the rest of the suite, a
// 3 s deadline once cut an answering cuInit). Only the tests of hung calls pass kHangDeadline.
constexpr auto kAnsweringDeadline = 60000ms;

// A hung stand-in call never returns, so a probe that came back at all did not wait for it; the slack is
// for a loaded machine, not a figure the design promises. The lower bound is what the design does promise:
// the parent gives a hung call the whole deadline.
void expect_cut_at_the_deadline(double seconds, std::chrono::milliseconds deadline) {
    double limit = std::chrono::duration<double>(deadline).count();
    EXPECT_GE(seconds, limit);
    EXPECT_LT(seconds, limit + 10.0);
}

struct Probed {
    NvmlLayer nvml;
    CudaLayer cuda;
    std::vector<CollectorStatus> statuses;
    double seconds = 0;
};

Probed probe(std::map<std::string, std::string> env = {}, bool all_devices = false,
             std::chrono::milliseconds deadline = kAnsweringDeadline) {
    Root root(kH200);
    CollectOptions o;
    o.environment = std::move(env);
    o.driver_library_dir = kLibs;
    o.driver_deadline = deadline;
    o.all_devices = all_devices;
    CollectContext ctx{root, o};
    Probed p;
    auto t0 = std::chrono::steady_clock::now();
    p.statuses = collect_driver(ctx, p.nvml, p.cuda);
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return p;
}

struct Ran {
    int exit_code = -1;
    std::string out;
};

Ran run_gpudx(const std::string& args) {
    std::string cmd = std::string(GPUDX_BINARY) + " " + args + " 2>/dev/null";
    Ran r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = ::pclose(p);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

std::vector<Finding> checks(const Probed& p, std::map<std::string, std::string> env = {}) {
    Snapshot s;
    s.nvml = p.nvml;
    s.cuda = p.cuda;
    s.collectors = p.statuses;
    s.environment.variables = std::move(env);
    s.collectors.push_back(status_ok(Collector::environment));
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    check_driver(ctx, out);
    check_identity(ctx, out);
    check_allocation(ctx, out);
    return out;
}

bool has(const std::vector<Finding>& fs, std::string_view id) {
    return std::any_of(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
}

}  // namespace

TEST(Standins, RecordedH200NodeReplaysItsRealIdentity) {
    use_scenario("h200x2.json");
    auto p = probe();
    ASSERT_EQ(p.statuses.size(), 2u);
    EXPECT_EQ(p.statuses[0].state, CollectorState::ok) << p.statuses[0].message;
    EXPECT_EQ(p.statuses[1].state, CollectorState::ok) << p.statuses[1].message;
    EXPECT_EQ(p.nvml.library_path, std::filesystem::canonical(kLibs + "/libnvidia-ml.so.1").string());
    EXPECT_EQ(p.nvml.driver_version, "580.159.04");
    EXPECT_EQ(p.nvml.cuda_driver_version, 13000);
    ASSERT_EQ(p.nvml.devices.size(), 2u);
    EXPECT_EQ(p.nvml.devices[0].uuid, kUuid0);
    EXPECT_EQ(p.nvml.devices[0].bus_id, "00000000:00:06.0");
    EXPECT_EQ(p.nvml.devices[0].pci, "0000:00:06.0");
    EXPECT_EQ(p.nvml.devices[1].serial, "1652826063899");
    EXPECT_EQ(p.nvml.devices[1].minor, 1u);
    EXPECT_EQ(p.nvml.devices[1].persistence_mode, true);
    EXPECT_EQ(p.nvml.devices[1].nvlinks.size(), 18u);
    EXPECT_EQ(p.nvml.devices[1].fabric_state, 3u);
    EXPECT_FALSE(p.nvml.devices[0].retired_pages_pending);
    EXPECT_NE(std::find(p.nvml.devices[0].unsupported.begin(), p.nvml.devices[0].unsupported.end(),
                        "nvmlDeviceGetRetiredPagesPendingStatus"),
              p.nvml.devices[0].unsupported.end());
    EXPECT_TRUE(p.nvml.devices[0].errors.empty());
    EXPECT_EQ(p.cuda.driver_version, 13000);
    EXPECT_EQ(p.cuda.caller.init_result, 0);
    EXPECT_EQ(p.cuda.caller.cuda_visible_devices, std::nullopt);
    ASSERT_EQ(p.cuda.caller.devices.size(), 2u);
    EXPECT_EQ(p.cuda.caller.devices[1].uuid, kUuid1);
    EXPECT_EQ(p.cuda.caller.devices[1].bus_id, "0000:00:07.0");
    EXPECT_EQ(p.cuda.caller.devices[1].attr_device, 7);
    EXPECT_EQ(p.cuda.caller.devices[1].cc_major, 9);
    EXPECT_TRUE(checks(p).empty());
}

TEST(Standins, RecordedH200HealthIsOneSampleAndHealthy) {
    use_scenario("h200x2.json");
    auto p = probe();
    ASSERT_EQ(p.nvml.devices.size(), 2u);
    const auto& d = p.nvml.devices[0];
    EXPECT_TRUE(d.errors.empty()) << d.errors.front();
    ASSERT_EQ(d.nvlinks.size(), 18u);
    EXPECT_EQ(d.nvlinks[17].version, 4u);
    EXPECT_EQ(d.nvlinks[17].speed_mbps, 26562u);
    EXPECT_EQ(d.nvlinks[17].remote_type, NvlinkRemote::nvswitch);
    // A healthy node pays one sample: its 2 PCIe replays are the link's training history.
    ASSERT_EQ(d.health.samples.size(), 1u);
    EXPECT_EQ(d.health.samples[0].pcie_replays, 2u);
    EXPECT_EQ(d.health.samples[0].clock_event_reasons, 1u);
    EXPECT_EQ(d.health.samples[0].nvlink_errors.size(), 18u);
    EXPECT_EQ(d.health.temperature_slowdown_c, 89u);
    EXPECT_EQ(d.health.power_limit_mw, 700000u);
    EXPECT_EQ(d.health.row_remap_histogram->max, 3072u);
    EXPECT_EQ(d.health.nvlink_count, 18u);
    Snapshot s;
    s.nvml = p.nvml;
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    kGpuHealthFamily.run(ctx, out);
    EXPECT_TRUE(out.empty()) << out.front().id;
}

TEST(Standins, HealthTakesASecondSampleOnlyWhenTheFirstCallsForIt) {
    // Link 4's replay counter is 3, then 5: the probe samples again and the rule sees the growth.
    nlohmann::json base = nlohmann::json::parse(std::ifstream(kScenarios + "/h200x2.json"));
    auto health = base["nvml"]["devices"][1]["health"];
    auto first = health["samples"][0];
    first["nvlink_errors"][4]["replay"] = 3;
    auto second = first;
    second["nvlink_errors"][4]["replay"] = 5;
    health["samples"] = {first, second};
    use_controls({{"nvml_device_override", {{"1", {{"health", health}}}}}});
    Root root(kH200);
    CollectOptions o;
    o.driver_library_dir = kLibs;
    o.driver_deadline = kAnsweringDeadline;
    o.health_interval_ms = 20;
    CollectContext ctx{root, o};
    NvmlLayer nvml;
    CudaLayer cuda;
    collect_driver(ctx, nvml, cuda);
    ASSERT_EQ(nvml.devices.size(), 2u);
    EXPECT_EQ(nvml.devices[0].health.samples.size(), 1u);
    const auto& h = nvml.devices[1].health;
    ASSERT_EQ(h.samples.size(), 2u);
    EXPECT_EQ(h.samples[1].after_ms, 20u);
    EXPECT_EQ(h.samples[1].nvlink_errors[4].replay, 5u);
    Snapshot s;
    s.nvml = nvml;
    DiagnoseOptions d;
    CheckContext cc{s, d};
    std::vector<Finding> out;
    kGpuHealthFamily.run(cc, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].id, "health.nvlink_errors_growing");

    // With --health-interval 0 the same answers are judged on one sample: history, not growth.
    o.health_interval_ms = 0;
    NvmlLayer once;
    collect_driver(ctx, once, cuda);
    EXPECT_EQ(once.devices[1].health.samples.size(), 1u);
}

// ECC by location costs 5.5 ms of a diagnose on an H200 (device/gpu_health.cpp): asked only when a total is above
// zero, so a GPU with errors still says where they are, and a clean one pays nothing.
TEST(Standins, EccLocationsAreAskedOnlyWhenATotalIsAboveZero) {
    nlohmann::json base = nlohmann::json::parse(std::ifstream(kScenarios + "/h200x2.json"));
    auto health = base["nvml"]["devices"][1]["health"];
    for (auto& e : health["ecc"]) e["corrected_aggregate"] = 7;  // the total and device memory
    use_controls({{"nvml_device_override", {{"1", {{"health", health}}}}}});
    Root root(kH200);
    CollectOptions o;
    o.driver_library_dir = kLibs;
    o.driver_deadline = kAnsweringDeadline;
    o.health_interval_ms = 0;
    CollectContext ctx{root, o};
    NvmlLayer nvml;
    CudaLayer cuda;
    collect_driver(ctx, nvml, cuda);
    ASSERT_EQ(nvml.devices.size(), 2u);
    auto locations = [](const NvmlDevice& d) {
        std::vector<EccLocation> out;
        for (auto& e : d.health.ecc) out.push_back(e.location);
        return out;
    };
    EXPECT_EQ(locations(nvml.devices[0]), std::vector<EccLocation>{EccLocation::total});
    ASSERT_EQ(locations(nvml.devices[1]), (std::vector<EccLocation>{EccLocation::total, EccLocation::device_memory}));
    EXPECT_EQ(nvml.devices[1].health.ecc[1].corrected_aggregate, 7u);
}

TEST(Standins, HealthCallsAnswerNotSupportedAndErrors) {
    use_controls({{"faults",
                   {{{"call", "nvmlDeviceGetRowRemapperHistogram"}, {"result", 3}},
                    {{"call", "nvmlDeviceGetCurrentClocksEventReasons"}, {"device", 1}, {"result", 999}}}}});
    auto p = probe();
    ASSERT_EQ(p.nvml.devices.size(), 2u);
    const auto& d0 = p.nvml.devices[0];
    EXPECT_FALSE(d0.health.row_remap_histogram);
    EXPECT_NE(std::find(d0.unsupported.begin(), d0.unsupported.end(), "nvmlDeviceGetRowRemapperHistogram"),
              d0.unsupported.end());
    const auto& d1 = p.nvml.devices[1];
    EXPECT_FALSE(d1.health.samples[0].clock_event_reasons);
    ASSERT_FALSE(d1.errors.empty());
    EXPECT_NE(d1.errors[0].find("nvmlDeviceGetCurrentClocksEventReasons"), std::string::npos) << d1.errors[0];
}

TEST(Standins, HungNvmlCallTimesOutNamingItWhileCudaIsIntact) {
    use_scenario("nvml-hang-uuid.json");
    auto p = probe({}, false, kHangDeadline);
    expect_cut_at_the_deadline(p.seconds, kHangDeadline);
    EXPECT_EQ(p.statuses[0].state, CollectorState::timed_out);
    ASSERT_TRUE(p.nvml.hung_call);
    EXPECT_EQ(p.nvml.hung_call->function, "nvmlDeviceGetUUID");
    EXPECT_EQ(p.nvml.hung_call->device, 1u);
    EXPECT_EQ(p.nvml.hung_call->label(), "nvmlDeviceGetUUID(1)");
    EXPECT_NE(p.statuses[0].message.find("nvmlDeviceGetUUID(1)"), std::string::npos);
    ASSERT_EQ(p.nvml.devices.size(), 1u);  // device 0 was read before device 1 hung
    EXPECT_EQ(p.nvml.devices[0].uuid, kUuid0);
    EXPECT_EQ(p.statuses[1].state, CollectorState::ok);
    EXPECT_EQ(p.cuda.caller.devices.size(), 2u);
    auto fs = checks(p);
    EXPECT_TRUE(has(fs, "driver.unresponsive"));
    EXPECT_FALSE(has(fs, "driver.nvml_missing_gpu"));  // a partial list is not a missing GPU
}

TEST(Standins, HungCuInitTimesOut) {
    use_scenario("cuinit-hang.json");
    auto p = probe({}, false, kHangDeadline);
    expect_cut_at_the_deadline(p.seconds, kHangDeadline);
    EXPECT_EQ(p.statuses[1].state, CollectorState::timed_out);
    ASSERT_TRUE(p.cuda.hung_call);
    EXPECT_EQ(p.cuda.hung_call->function, "cuInit");
    EXPECT_EQ(p.cuda.hung_call->device, std::nullopt);  // its 0 is the flags
    EXPECT_EQ(p.cuda.hung_call->label(), "cuInit(0)");
    EXPECT_EQ(p.statuses[0].state, CollectorState::ok);
    EXPECT_EQ(p.nvml.devices.size(), 2u);
}

TEST(Standins, EveryCuInitErrorCodeIsNamedAndExplained) {
    for (int code : {100, 35, 34, 803, 804, 802, 304, 800, 999, 3}) {
        use_controls({{"faults", {{{"call", "cuInit"}, {"result", code}}}}});
        auto p = probe();
        SCOPED_TRACE(code);
        EXPECT_EQ(p.cuda.caller.init_result, code);
        EXPECT_EQ(p.cuda.caller.init_name, cu_result_name(code));
        EXPECT_EQ(p.cuda.caller.init_meaning, cu_result_meaning(code));
        EXPECT_EQ(p.statuses[1].state, CollectorState::error);
        EXPECT_NE(p.statuses[1].message.find(cu_result_name(code)), std::string::npos);
        EXPECT_TRUE(has(checks(p), "driver.cuda_init_failed"));
    }
}

TEST(Standins, NvmlInitErrorCodes) {
    for (int code : {9, 18, 4, 12, 999}) {
        use_controls({{"faults", {{{"call", "nvmlInit"}, {"result", code}}}}});
        auto p = probe();
        SCOPED_TRACE(code);
        EXPECT_EQ(p.nvml.init_result, code);
        EXPECT_NE(p.nvml.init_error.find(nvml_return_name(code)), std::string::npos) << p.nvml.init_error;
        EXPECT_EQ(p.statuses[0].state, CollectorState::error);
        EXPECT_TRUE(has(checks(p), "driver.nvml_init_failed"));
    }
}

TEST(Standins, PerDeviceErrorCodesAreRecordedNotFatal) {
    use_scenario("uuid-error.json");
    auto p = probe();
    ASSERT_EQ(p.nvml.devices.size(), 2u);
    ASSERT_EQ(p.nvml.devices[0].errors.size(), 1u);
    EXPECT_NE(p.nvml.devices[0].errors[0].find("NVML_ERROR_GPU_IS_LOST"), std::string::npos);
    EXPECT_EQ(p.nvml.devices[0].bus_id, "00000000:00:06.0");  // the other calls still answered
    EXPECT_EQ(p.nvml.devices[1].uuid, kUuid1);
    EXPECT_TRUE(has(checks(p), "driver.gpu_lost"));
    for (int code : {2, 4, 10, 16, 999}) {
        use_controls({{"faults", {{{"call", "nvmlDeviceGetPciInfo"}, {"device", 1}, {"result", code}}}}});
        auto q = probe();
        SCOPED_TRACE(code);
        ASSERT_EQ(q.nvml.devices.size(), 2u);
        ASSERT_EQ(q.nvml.devices[1].errors.size(), 1u);
        EXPECT_NE(q.nvml.devices[1].errors[0].find(nvml_return_name(code)), std::string::npos);
        EXPECT_TRUE(q.nvml.devices[1].pci.empty());
    }
    use_controls({{"faults", {{{"call", "nvmlDeviceGetRemappedRows"}, {"result", 3}}}}});
    auto u = probe();
    EXPECT_TRUE(u.nvml.devices[0].errors.empty());
    EXPECT_NE(std::find(u.nvml.devices[0].unsupported.begin(), u.nvml.devices[0].unsupported.end(),
                        "nvmlDeviceGetRemappedRows"),
              u.nvml.devices[0].unsupported.end());
}

// The GPUs are asked from one lane (thread) each: a GPU that hangs is named, and the others still answer,
// whichever comes first in index order.
TEST(Standins, AHungGpuIsNamedWhileTheOtherGpusAnswer) {
    for (int hung : {0, 1}) {
        SCOPED_TRACE(hung);
        use_controls({{"faults", {{{"call", "nvmlDeviceGetTotalEccErrors"}, {"device", hung}, {"hang", true}}}}});
        auto p = probe({}, false, kHangDeadline);
        expect_cut_at_the_deadline(p.seconds, kHangDeadline);
        ASSERT_EQ(p.statuses[0].state, CollectorState::timed_out);
        EXPECT_EQ(hung_call_label(p.nvml.hung_call), fmt::format("nvmlDeviceGetFieldValues({})", hung));
        ASSERT_EQ(p.nvml.devices.size(), 1u);
        EXPECT_EQ(p.nvml.devices[0].index, static_cast<unsigned>(1 - hung));
        EXPECT_EQ(p.nvml.devices[0].uuid, hung == 0 ? kUuid1 : kUuid0);
        EXPECT_EQ(p.nvml.devices[0].ecc_uncorrected_volatile, 0u);
    }
    // Both hung: one names the finding, the collector's message tells the other. Which lane takes which GPU
    // is up to the threads, so which of the two comes first is not promised; that both are named is.
    use_controls({{"faults", {{{"call", "nvmlDeviceGetSerial"}, {"hang", true}}}}});
    auto both = probe({}, false, kHangDeadline);
    EXPECT_TRUE(both.nvml.devices.empty());
    const std::string serial0 = "nvmlDeviceGetSerial(0)", serial1 = "nvmlDeviceGetSerial(1)";
    const std::string named = hung_call_label(both.nvml.hung_call);
    ASSERT_TRUE(named == serial0 || named == serial1) << named;
    const std::string& other = named == serial0 ? serial1 : serial0;
    EXPECT_NE(both.statuses[0].message.find("the call that did not return: " + named +
                                            "; also in flight: " + other),
              std::string::npos)
        << both.statuses[0].message;
}

// ECC, retired pages and remapped rows come from one nvmlDeviceGetFieldValues; when that call fails they are
// asked one by one, and the layer is the same either way.
// The recovery action is read only in the batch (it has no call of its own to fall back on), so it is not one of
// the memory-health answers the two paths must agree on.
std::vector<std::string> memory_calls(std::vector<std::string> unsupported) {
    std::erase(unsupported, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION");
    // The health facts that ride in the batched call only (docs/gpu-health.md).
    std::erase(unsupported, "nvmlDeviceGetRetiredPages");
    return unsupported;
}

// The health sample's own nvmlDeviceGetFieldValues fails too when the call is made to fail: not a memory fact.
std::vector<std::string> memory_errors(std::vector<std::string> errors) {
    std::erase_if(errors, [](auto& e) { return e.starts_with("nvmlDeviceGetFieldValues:"); });
    return errors;
}

TEST(Standins, MemoryHealthFieldsAndTheCallsTheyReplaceAgree) {
    auto memory_health = [](const NvmlDevice& d) {
        return nlohmann::json{{"ecc", d.ecc_enabled ? nlohmann::json(*d.ecc_enabled) : nlohmann::json()},
                              {"vol", d.ecc_uncorrected_volatile ? nlohmann::json(*d.ecc_uncorrected_volatile) : nlohmann::json()},
                              {"agg", d.ecc_uncorrected_aggregate ? nlohmann::json(*d.ecc_uncorrected_aggregate) : nlohmann::json()},
                              {"retired", d.retired_pages_pending ? nlohmann::json(*d.retired_pages_pending) : nlohmann::json()},
                              {"cor", d.remapped_rows_correctable ? nlohmann::json(*d.remapped_rows_correctable) : nlohmann::json()},
                              {"unc", d.remapped_rows_uncorrectable ? nlohmann::json(*d.remapped_rows_uncorrectable) : nlohmann::json()},
                              {"pending", d.remapped_rows_pending ? nlohmann::json(*d.remapped_rows_pending) : nlohmann::json()},
                              {"failure", d.remapped_rows_failure ? nlohmann::json(*d.remapped_rows_failure) : nlohmann::json()},
                              {"unsupported", memory_calls(d.unsupported)},
                              {"errors", memory_errors(d.errors)}};
    };
    nlohmann::json patch = {{"1", {{"ecc_uncorrected_volatile", 3}, {"ecc_uncorrected_aggregate", 7},
                                   {"remapped_rows_uncorrectable", 2}, {"remapped_rows_pending", true}}}};
    use_controls({{"nvml_device_override", patch}});
    auto batched = probe();
    use_controls({{"nvml_device_override", patch},
                  {"faults", {{{"call", "nvmlDeviceGetFieldValues"}, {"result", NVML_ERROR_UNKNOWN}}}}});
    auto one_by_one = probe();
    ASSERT_EQ(batched.nvml.devices.size(), 2u);
    ASSERT_EQ(one_by_one.nvml.devices.size(), 2u);
    auto& d1 = batched.nvml.devices[1];
    EXPECT_EQ(d1.ecc_uncorrected_volatile, 3u);
    EXPECT_EQ(d1.ecc_uncorrected_aggregate, 7u);
    EXPECT_EQ(d1.remapped_rows_uncorrectable, 2u);
    EXPECT_EQ(d1.remapped_rows_pending, true);
    for (int i : {0, 1}) {
        SCOPED_TRACE(i);
        EXPECT_EQ(memory_health(batched.nvml.devices[i]), memory_health(one_by_one.nvml.devices[i]));
    }
    // A field's own failure is filed under the call it stands for, with its field id.
    use_controls({{"faults", {{{"call", "nvmlDeviceGetTotalEccErrors"}, {"device", 0}, {"result", NVML_ERROR_GPU_IS_LOST}}}}});
    auto lost = probe();
    ASSERT_EQ(lost.nvml.devices.size(), 2u);
    EXPECT_FALSE(lost.nvml.devices[0].ecc_uncorrected_volatile);
    ASSERT_EQ(lost.nvml.devices[0].errors.size(), 2u);
    EXPECT_EQ(lost.nvml.devices[0].errors[0].rfind("nvmlDeviceGetTotalEccErrors (field 4): NVML_ERROR_GPU_IS_LOST", 0), 0u)
        << lost.nvml.devices[0].errors[0];
    EXPECT_TRUE(lost.nvml.devices[1].errors.empty());
}

TEST(Standins, FewerDevicesThanPcieIsFound) {
    use_scenario("nvml-missing-gpu.json");
    auto p = probe();
    EXPECT_EQ(p.nvml.device_count, 1u);
    Snapshot s;
    s.nvml = p.nvml;
    s.cuda = p.cuda;
    s.collectors = p.statuses;
    for (auto addr : {"0000:00:06.0", "0000:00:07.0"}) {
        PciDevice d;
        d.address = addr;
        d.vendor_id = 0x10de;
        d.is_gpu = true;
        s.pcie.devices.push_back(d);
    }
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> fs;
    check_driver(ctx, fs);
    auto it = std::find_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "driver.nvml_missing_gpu"; });
    ASSERT_NE(it, fs.end());
    EXPECT_NE(it->message.find("missing: 0000:00:07.0"), std::string::npos);
}

TEST(Standins, VisibleDevicesAreAppliedInTheChild) {
    use_scenario("h200x2.json");
    auto p = probe({{"CUDA_VISIBLE_DEVICES", "1"}}, true);
    EXPECT_EQ(p.cuda.caller.cuda_visible_devices, "1");
    ASSERT_EQ(p.cuda.caller.devices.size(), 1u);
    EXPECT_EQ(p.cuda.caller.devices[0].ordinal, 0);
    EXPECT_EQ(p.cuda.caller.devices[0].uuid, kUuid1);
    ASSERT_TRUE(p.cuda.all);
    EXPECT_EQ(p.cuda.all->cuda_visible_devices, std::nullopt);
    EXPECT_EQ(p.cuda.all->devices.size(), 2u);

    auto q = probe({{"CUDA_VISIBLE_DEVICES", "GPU-40cd403d,GPU-992cb470"}});
    ASSERT_EQ(q.cuda.caller.devices.size(), 2u);
    EXPECT_EQ(q.cuda.caller.devices[0].pci, "0000:00:07.0");

    auto r = probe({{"CUDA_VISIBLE_DEVICES", "GPU-deadbeef"}}, true);
    EXPECT_EQ(r.cuda.caller.init_result, 100);
    auto fs = checks(r, {{"CUDA_VISIBLE_DEVICES", "GPU-deadbeef"}});
    auto it = std::find_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "driver.cuda_init_failed"; });
    ASSERT_NE(it, fs.end());
    EXPECT_EQ(it->layer, Layer::allocation);
    EXPECT_TRUE(has(fs, "allocation.uuid_not_on_node"));
}

TEST(Standins, StaleBusIdAfterRestoreIsAnIdentityFinding) {
    use_scenario("stale-bus-id.json");
    auto p = probe();
    ASSERT_EQ(p.cuda.caller.devices.size(), 2u);
    EXPECT_EQ(p.cuda.caller.devices[0].uuid, kUuid1);
    EXPECT_EQ(p.cuda.caller.devices[0].bus_id, "0000:00:06.0");
    auto fs = checks(p);
    auto it = std::find_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "identity.cuda_stale_bus_id"; });
    ASSERT_NE(it, fs.end());
    EXPECT_NE(it->message.find("CUDA ordinal 0 reports bus 0000:00:06.0 but the UUID of 0000:00:07.0"),
              std::string::npos)
        << it->message;
}

TEST(Standins, VersionMismatchBetweenUserSpaceAndKernel) {
    use_scenario("version-mismatch.json");
    auto p = probe();
    EXPECT_EQ(p.nvml.driver_version, "570.86.15");
    EXPECT_EQ(p.cuda.caller.init_result, 803);
    Snapshot s;
    s.nvml = p.nvml;
    s.cuda = p.cuda;
    s.collectors = p.statuses;
    s.module.nvidia_driver_version = "580.159.04";
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> fs;
    check_driver(ctx, fs);
    EXPECT_TRUE(has(fs, "driver.version_mismatch"));
    auto it = std::find_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "driver.cuda_init_failed"; });
    ASSERT_NE(it, fs.end());
    EXPECT_EQ(it->layer, Layer::libraries);
}

TEST(Standins, MissingLibraryDirectoryIsNoDataNotACrash) {
    use_scenario("h200x2.json");
    Root root(kH200);
    CollectOptions o;
    o.driver_library_dir = "/nonexistent-gpudx";
    CollectContext ctx{root, o};
    NvmlLayer n;
    CudaLayer c;
    auto st = collect_driver(ctx, n, c);
    EXPECT_EQ(st[0].state, CollectorState::no_data);
    EXPECT_NE(n.load_error.find("/nonexistent-gpudx/libnvidia-ml.so.1"), std::string::npos);
    EXPECT_EQ(st[1].state, CollectorState::no_data);
}

// ---- The gpudx binary.

TEST(GpudxIds, RecordedNodeIsConsistentInEveryFormat) {
    use_scenario("h200x2.json");
    auto text = run_gpudx("ids --root " + kH200 + " --driver-lib-dir " + kLibs);
    EXPECT_EQ(text.exit_code, 0) << text.out;
    EXPECT_NE(text.out.find("0000:00:06.0"), std::string::npos);
    EXPECT_NE(text.out.find(kUuid1), std::string::npos);
    EXPECT_NE(text.out.find("consistent"), std::string::npos) << text.out;

    auto json = run_gpudx("ids --format json --root " + kH200 + " --driver-lib-dir " + kLibs);
    EXPECT_EQ(json.exit_code, 0);
    auto j = nlohmann::json::parse(json.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << json.out;
    EXPECT_EQ(j["consistent"], true);
    ASSERT_GE(j["gpus"].size(), 2u);
    EXPECT_EQ(j["gpus"][0]["pci"], "0000:00:06.0");
    EXPECT_EQ(j["gpus"][0]["nvml"]["uuid"], kUuid0);
    EXPECT_EQ(j["gpus"][0]["cuda"]["ordinal"], 0);
    EXPECT_EQ(j["gpus"][1]["cuda"]["bus_id"], "0000:00:07.0");

    auto csv = run_gpudx("ids --format csv --root " + kH200 + " --driver-lib-dir " + kLibs);
    EXPECT_EQ(csv.exit_code, 0);
    EXPECT_EQ(csv.out.rfind("pci,slot,numa_node,minor,dev_node,uuid,", 0), 0u) << csv.out;
    EXPECT_NE(csv.out.find("00000000:00:07.0,1,GPU-40cd403d-66ba-4608-72b9-5be5031085dc,0000:00:07.0"),
              std::string::npos)
        << csv.out;
}

TEST(GpudxIds, StaleBusIdExitsOneAndNamesBothAddresses) {
    use_scenario("stale-bus-id.json");
    auto r = run_gpudx("ids --root " + kH200 + " --driver-lib-dir " + kLibs);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("identity.cuda_stale_bus_id"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("CUDA ordinal 0 reports bus 0000:00:06.0 but the UUID of 0000:00:07.0"), std::string::npos)
        << r.out;
}

TEST(GpudxSnapshot, HungDriverStillYieldsValidJsonWithinTheDeadline) {
    use_scenario("nvml-hang-uuid.json");
    auto t0 = std::chrono::steady_clock::now();
    auto r = run_gpudx(fmt::format("snapshot --deadline {} --root {} --driver-lib-dir {}",
                                   std::chrono::duration<double>(kHangDeadline).count(), kH200, kLibs));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    expect_cut_at_the_deadline(s, kHangDeadline);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 400);
    EXPECT_EQ(j["nvml"]["timed_out_call"], "nvmlDeviceGetUUID(1)");
    EXPECT_EQ(j["cuda"]["caller"]["devices"].size(), 2u);
    bool pcie_status = false, nvml_timed_out = false;
    for (auto& c : j["collectors"]) {
        if (c["name"] == "pcie") pcie_status = true;
        if (c["name"] == "nvml" && c["state"] == "timed_out") nvml_timed_out = true;
    }
    EXPECT_TRUE(pcie_status);
    EXPECT_TRUE(nvml_timed_out);
}

TEST(GpudxSnapshot, ReplaysACaptureThroughItsRecordedAnswers) {
    // A capture made by `gpudx gather` holds _driver/answers.json; the stand-ins find it via the root.
    ::unsetenv("GPUDX_STANDIN_SCENARIO");
    auto root = std::filesystem::temp_directory_path() / ("gpudx-capture-" + std::to_string(::getpid()));
    std::filesystem::create_directories(root / "_driver");
    std::filesystem::copy_file(kScenarios + "/stale-bus-id.json", root / "_driver/stale-bus-id.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(kScenarios + "/h200x2.json", root / "_driver/h200x2.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(kScenarios + "/stale-bus-id.json", root / "_driver/answers.json",
                               std::filesystem::copy_options::overwrite_existing);
    auto r = run_gpudx("snapshot --root " + root.string() + " --driver-lib-dir " + kLibs);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["cuda"]["caller"]["devices"][0]["uuid"], kUuid1);
    EXPECT_EQ(j["nvml"]["devices"][0]["uuid"], kUuid0);
    std::filesystem::remove_all(root);
}

// ---- ROCm SMI through the stand-in librocm_smi64.so.7, on the 8×MI300X fixture and its recorded answers.

namespace {

const std::string kMi300x8 = std::string(GPUDX_TEST_FIXTURES) + "/mi300x8";

struct ProbedRocm {
    RocmSmiLayer rocm_smi;
    std::vector<CollectorStatus> statuses;
    double seconds = 0;
};

// NVML (CUDA not asked) and ROCm SMI of the capture in `dir`, through the libraries in `libs`.
ProbedRocm probe_rocm_root(const std::string& dir, const std::string& libs,
                           std::chrono::milliseconds deadline = kAnsweringDeadline) {
    Root root(dir);
    CollectOptions o;
    o.driver_library_dir = libs;
    o.driver_deadline = deadline;
    o.probe_cuda = false;
    CollectContext ctx{root, o};
    NvmlLayer nvml;
    CudaLayer cuda;
    ProbedRocm p;
    auto t0 = std::chrono::steady_clock::now();
    p.statuses = collect_driver(ctx, nvml, cuda, &p.rocm_smi);
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return p;
}

// Probes the fixture's driver layers with `controls` applied to its recorded answers (none: as recorded).
ProbedRocm probe_mi300x8(const nlohmann::json& controls, std::chrono::milliseconds deadline = kAnsweringDeadline) {
    if (controls.is_null()) {
        ::unsetenv("GPUDX_STANDIN_SCENARIO");  // the stand-ins find <root>/_driver/answers.json
    } else {
        auto path = std::filesystem::temp_directory_path() / ("gpudx-rocm-" + std::to_string(::getpid()) + ".json");
        nlohmann::json doc = controls;
        doc["base"] = kMi300x8 + "/_driver/answers.json";
        std::ofstream(path) << doc.dump();
        ::setenv("GPUDX_STANDIN_SCENARIO", path.c_str(), 1);
    }
    return probe_rocm_root(kMi300x8, kLibs, deadline);
}

const CollectorStatus* status(const ProbedRocm& p, std::string_view name) {
    for (auto& s : p.statuses)
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace

TEST(RocmSmiStandin, RecordedAnswersReplayEveryGpuWithItsIdentity) {
    auto p = probe_mi300x8(nullptr);
    auto* st = status(p, "rocm_smi");
    ASSERT_TRUE(st);
    EXPECT_EQ(st->state, CollectorState::ok) << st->message;
    const auto& r = p.rocm_smi;
    EXPECT_TRUE(r.probed);
    EXPECT_NE(r.library_path.find("librocm_smi64.so.7"), std::string::npos) << r.library_path;
    EXPECT_EQ(r.library_version, "7.3.0");
    EXPECT_EQ(r.driver_version, "6.8.5");
    ASSERT_EQ(r.device_count, 8u);
    ASSERT_EQ(r.devices.size(), 8u);
    // The addresses come back through the BDFID encoding, the unique ids through rsmi_dev_unique_id_get.
    auto recorded = nlohmann::json::parse(std::ifstream(kMi300x8 + "/_driver/answers.json"));
    for (size_t i = 0; i < 8; ++i) {
        const auto& want = recorded["rocm_smi"]["devices"][i];
        EXPECT_EQ(r.devices[i].pci, want["pci"].get<std::string>());
        EXPECT_EQ(r.devices[i].unique_id, want["unique_id"].get<std::string>());
        EXPECT_EQ(r.devices[i].render_minor, want["render_minor"].get<unsigned>());
        EXPECT_EQ(r.devices[i].ecc.size(), 7u);
        EXPECT_TRUE(r.devices[i].errors.empty()) << r.devices[i].errors.front();
        EXPECT_FALSE(r.devices[i].partition);
    }
    // A node without a KFD topology is not asked at all.
    auto h200 = probe_rocm_root(kH200, kLibs);
    EXPECT_FALSE(h200.rocm_smi.probed);
    EXPECT_FALSE(status(h200, "rocm_smi"));
}

TEST(RocmSmiStandin, HungCallTimesOutNamingItAndTheGpuAlreadyAddressed) {
    auto p = probe_mi300x8({{"faults", {{{"call", "rsmi_dev_ecc_count_get"}, {"device", 5}, {"hang", true}}}}},
                           kHangDeadline);
    expect_cut_at_the_deadline(p.seconds, kHangDeadline);
    auto* st = status(p, "rocm_smi");
    ASSERT_TRUE(st);
    EXPECT_EQ(st->state, CollectorState::timed_out);
    ASSERT_TRUE(p.rocm_smi.hung_call);
    EXPECT_EQ(p.rocm_smi.hung_call->api, DriverApi::rocm_smi);
    EXPECT_EQ(p.rocm_smi.hung_call->device, 5u);
    EXPECT_EQ(p.rocm_smi.hung_call->arguments, "UMC");
    EXPECT_EQ(p.rocm_smi.hung_call->label(), "rsmi_dev_ecc_count_get(5, UMC)");
    // Devices 0-4 whole, device 5 with the address it answered before the hang.
    ASSERT_EQ(p.rocm_smi.devices.size(), 6u);
    EXPECT_EQ(p.rocm_smi.devices[5].pci, "0000:a6:00.0");

    Snapshot s;
    s.rocm_smi = p.rocm_smi;
    s.collectors = p.statuses;
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    check_driver(ctx, out);
    auto it = std::find_if(out.begin(), out.end(), [](auto& f) { return f.id == "driver.unresponsive"; });
    ASSERT_NE(it, out.end());
    EXPECT_NE(it->message.find("ROCm SMI did not answer: rsmi_dev_ecc_count_get(5, UMC)"), std::string::npos)
        << it->message;
    ASSERT_EQ(it->subjects.size(), 1u);
    EXPECT_EQ(it->subjects[0].pci, "0000:a6:00.0");
}

TEST(RocmSmiStandin, StatusCodesAreNamedAndUnsupportedIsNotAnError) {
    auto p = probe_mi300x8({{"faults", {{{"call", "rsmi_init"}, {"result", rsmi::INIT_ERROR}}}}});
    auto* st = status(p, "rocm_smi");
    ASSERT_TRUE(st);
    EXPECT_EQ(st->state, CollectorState::error);
    EXPECT_NE(p.rocm_smi.init_error.find("RSMI_STATUS_INIT_ERROR (8"), std::string::npos) << p.rocm_smi.init_error;

    auto q = probe_mi300x8({{"faults",
                             {{{"call", "rsmi_dev_serial_number_get"}, {"result", rsmi::NOT_SUPPORTED}},
                              {{"call", "rsmi_dev_unique_id_get"}, {"device", 2}, {"result", rsmi::FILE_ERROR}}}}});
    ASSERT_EQ(q.rocm_smi.devices.size(), 8u);
    EXPECT_EQ(status(q, "rocm_smi")->state, CollectorState::ok);
    const auto& d2 = q.rocm_smi.devices[2];
    EXPECT_TRUE(d2.unique_id.empty());
    ASSERT_EQ(d2.errors.size(), 1u);
    EXPECT_EQ(d2.errors[0].rfind("rsmi_dev_unique_id_get: RSMI_STATUS_FILE_ERROR (3", 0), 0u) << d2.errors[0];
    EXPECT_NE(std::find(d2.unsupported.begin(), d2.unsupported.end(), "rsmi_dev_serial_number_get"),
              d2.unsupported.end());
    EXPECT_TRUE(q.rocm_smi.devices[0].errors.empty());
}

TEST(RocmSmiStandin, MissingLibraryIsNoDataNotACrash) {
    auto p = probe_rocm_root(kMi300x8, "/nonexistent-gpudx-libs");
    auto* st = status(p, "rocm_smi");
    ASSERT_TRUE(st);
    EXPECT_EQ(st->state, CollectorState::no_data);
    EXPECT_NE(p.rocm_smi.load_error.find("librocm_smi64.so"), std::string::npos) << p.rocm_smi.load_error;
}

// ---- AMD GPU health through the stand-in: the fixture's healthy answers and the mi300x8-health-faults scenario.

namespace {

std::vector<Finding> judge_amd_health(const RocmSmiLayer& r, const std::string& root = kMi300x8) {
    Snapshot s;
    s.rocm_smi = r;
    // The rules read the GPU model from the KFD topology (all-to-all hives): the fixture's module layer.
    std::vector<ReadProblem> problems;
    read_amd_gpus(Root(root), s.module, problems);
    DiagnoseOptions d;
    CheckContext cc{s, d};
    std::vector<Finding> out;
    kAmdHealthFamily.run(cc, out);
    return out;
}

}  // namespace

TEST(RocmSmiStandin, HealthyFixtureAnswersItsHealthAndGivesNoWarning) {
    auto p = probe_mi300x8(nullptr);
    ASSERT_EQ(p.rocm_smi.devices.size(), 8u);
    for (const auto& d : p.rocm_smi.devices) {
        const auto& h = d.health;
        EXPECT_TRUE(d.errors.empty()) << d.errors.front();
        // MI300X has no edge sensor: recorded as unsupported, never as a reading.
        ASSERT_EQ(h.temperature_limits.size(), 2u);
        EXPECT_EQ(h.temperature_limits[0].sensor, RocmTemperatureSensor::junction);
        EXPECT_EQ(h.temperature_limits[0].critical_mc, 100000);
        EXPECT_EQ(h.temperature_limits[1].emergency_mc, 115000);
        EXPECT_NE(std::find(d.unsupported.begin(), d.unsupported.end(), "rsmi_dev_temp_metric_get(edge, current)"),
                  d.unsupported.end());
        EXPECT_NE(std::find(d.unsupported.begin(), d.unsupported.end(),
                            "indep_throttle_status (not in this GPU's gpu metrics)"),
                  d.unsupported.end());
        // A healthy node pays one sample.
        ASSERT_EQ(h.samples.size(), 1u);
        EXPECT_EQ(h.samples[0].temperatures.size(), 2u);
        EXPECT_EQ(h.samples[0].throttle_status, 0u);
        EXPECT_FALSE(h.samples[0].indep_throttle_status);
        EXPECT_EQ(h.gpu_metrics_version, "1.5");
        EXPECT_EQ(h.xgmi_error_status, RocmXgmiStatus::no_errors);
        ASSERT_EQ(h.links.size(), 7u);
        for (auto& l : h.links) {
            EXPECT_EQ(l.type, RocmLinkType::xgmi);
            EXPECT_EQ(l.hops, 1u);
        }
    }
    auto out = judge_amd_health(p.rocm_smi);
    for (auto& f : out) EXPECT_EQ(f.severity, Severity::info) << f.id << ": " << f.message;
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].id, "health.amd_not_judged");
}

TEST(RocmSmiStandin, HealthFaultsAreSampledTwiceAndFound) {
    ::setenv("GPUDX_STANDIN_SCENARIO", (kScenarios + "/mi300x8-health-faults.json").c_str(), 1);
    Root root(kMi300x8);
    CollectOptions o;
    o.driver_library_dir = kLibs;
    o.driver_deadline = kAnsweringDeadline;
    o.probe_cuda = false;
    o.health_interval_ms = 20;
    CollectContext ctx{root, o};
    NvmlLayer nvml;
    CudaLayer cuda;
    RocmSmiLayer r;
    collect_driver(ctx, nvml, cuda, &r);
    ::unsetenv("GPUDX_STANDIN_SCENARIO");
    ASSERT_EQ(r.devices.size(), 8u);
    // Only the GPUs whose first sample called for it were sampled again, after one shared interval.
    EXPECT_EQ(r.devices[0].health.samples.size(), 1u);
    ASSERT_EQ(r.devices[2].health.samples.size(), 2u);
    EXPECT_EQ(r.devices[2].health.samples[1].after_ms, 20u);
    ASSERT_EQ(r.devices[2].health.samples[1].ecc.size(), 1u);
    EXPECT_EQ(r.devices[2].health.samples[1].ecc[0].correctable, 130u);
    EXPECT_EQ(r.devices[1].health.samples[1].indep_throttle_status, (1ull << 36) | 1);

    auto out = judge_amd_health(r);
    auto ids = [&](std::string_view id) {
        std::vector<std::string> pcis;
        for (auto& f : out)
            if (f.id == id)
                for (auto& g : f.subjects) pcis.push_back(g.pci);
        return pcis;
    };
    EXPECT_EQ(ids("health.amd_temperature_high"), (std::vector<std::string>{"0000:26:00.0", "0000:e5:00.0"}));
    EXPECT_EQ(ids("health.amd_throttle_thermal"), (std::vector<std::string>{"0000:26:00.0"}));
    EXPECT_EQ(ids("health.amd_ecc_correctable_growing"), (std::vector<std::string>{"0000:46:00.0"}));
    EXPECT_EQ(ids("health.xgmi_link_pcie"), (std::vector<std::string>{"0000:65:00.0", "0000:a6:00.0"}));
    EXPECT_EQ(ids("health.xgmi_errors"), (std::vector<std::string>{"0000:c6:00.0"}));
    EXPECT_TRUE(ids("health.amd_ecc_correctable_seen").empty());
    for (auto& f : out) {
        if (f.id != "health.amd_temperature_high") continue;
        EXPECT_EQ(f.severity, f.message.find("memory") != std::string::npos ? Severity::error : Severity::warning)
            << f.message;
    }

    // With --health-interval 0 the same answers are judged on one sample: the corrected errors are history.
    ::setenv("GPUDX_STANDIN_SCENARIO", (kScenarios + "/mi300x8-health-faults.json").c_str(), 1);
    o.health_interval_ms = 0;
    RocmSmiLayer once;
    collect_driver(ctx, nvml, cuda, &once);
    ::unsetenv("GPUDX_STANDIN_SCENARIO");
    EXPECT_EQ(once.devices[2].health.samples.size(), 1u);
    auto single = judge_amd_health(once);
    EXPECT_TRUE(std::any_of(single.begin(), single.end(),
                            [](auto& f) { return f.id == "health.amd_ecc_correctable_seen"; }));
}

TEST(RocmSmiStandin, HungLinkTypeCallNamesTheSourceGpu) {
    auto p = probe_mi300x8({{"faults", {{{"call", "rsmi_topo_get_link_type"}, {"device", 2}, {"hang", true}}}}},
                           kHangDeadline);
    ASSERT_TRUE(p.rocm_smi.hung_call);
    EXPECT_EQ(p.rocm_smi.hung_call->label(), "rsmi_topo_get_link_type(2, 3)");
    EXPECT_EQ(p.rocm_smi.hung_call->device, 2u);
    // Every device was read before the links: their first samples are kept.
    ASSERT_EQ(p.rocm_smi.devices.size(), 8u);
    EXPECT_EQ(p.rocm_smi.devices[7].health.samples.size(), 1u);
}

TEST(RocmSmiStandin, TemperatureErrorIsAnErrorNotUnsupported) {
    auto p = probe_mi300x8({{"faults", {{{"call", "rsmi_dev_temp_metric_get"}, {"device", 4}, {"result", rsmi::FILE_ERROR}}}}});
    const auto& d = p.rocm_smi.devices[4];
    ASSERT_FALSE(d.errors.empty());
    EXPECT_EQ(d.errors[0].rfind("rsmi_dev_temp_metric_get(edge, current): RSMI_STATUS_FILE_ERROR", 0), 0u) << d.errors[0];
    EXPECT_TRUE(d.health.temperature_limits.empty());
}
