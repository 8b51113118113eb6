// Faults injected under the gpudx binary (docs/reliability.md has the table). Each run must print valid JSON
// with the failure recorded where it happened, exit with the code the verdict calls for, within the deadline.
//
// File faults come from tests/fault/fault_inject.c, preloaded: open() or read() of a matching path fails with
// the errno a real kernel gives (EACCES, EIO, ENOENT mid-read). Running as root does not weaken them, unlike
// chmod 000. Driver faults come from the stand-in libraries (tests/standins) and from libraries that export
// nothing (empty_driver.c).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

const std::string kFixture = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const std::string kStandins = GPUDX_STANDIN_LIB_DIR;
const std::string kScenarios = GPUDX_STANDIN_SCENARIOS;

struct Ran {
    int exit_code = -1;
    std::string out;
    double seconds = 0;
    nlohmann::json json;  // discarded when stdout is not JSON
};

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Runs gpudx with extra environment; stderr is dropped (messages are checked in the JSON).
Ran run_gpudx(const std::string& args, const std::map<std::string, std::string>& env = {}) {
    std::string cmd = "env";
    for (auto& [k, v] : env) cmd += " " + quote(k + "=" + v);
    cmd += " " + quote(GPUDX_BINARY) + " " + args + " 2>/dev/null";
    Ran r;
    auto t0 = std::chrono::steady_clock::now();
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = ::pclose(p);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.json = nlohmann::json::parse(r.out, nullptr, false);
    return r;
}

std::map<std::string, std::string> faults(const std::string& rules) {
    return {{"LD_PRELOAD", GPUDX_FAULT_LIB}, {"GPUDX_TEST_FAULTS", rules}};
}

const nlohmann::json* collector(const nlohmann::json& j, const std::string& name) {
    for (auto& c : j["collectors"])
        if (c["name"] == name) return &c;
    return nullptr;
}

// A problem of `name` whose path contains `path` and whose message contains `why`.
bool has_problem(const nlohmann::json& snapshot, const std::string& name, const std::string& path, const std::string& why) {
    auto* c = collector(snapshot, name);
    if (!c) return false;
    for (auto& p : (*c)["problems"])
        if (p["path"].get<std::string>().find(path) != std::string::npos &&
            p["message"].get<std::string>().find(why) != std::string::npos)
            return true;
    return false;
}

bool has_finding(const nlohmann::json& diagnosis, const std::string& id) {
    for (auto& f : diagnosis["findings"])
        if (f["id"] == id) return true;
    return false;
}

std::string layer_state(const nlohmann::json& diagnosis, const std::string& layer) {
    for (auto& l : diagnosis["layers"])
        if (l["layer"] == layer) return l["state"];
    return "?";
}

// snapshot and diagnose of the capture (no driver) under the given file faults.
struct HostRun {
    Ran snapshot, diagnosis;
};
HostRun host_run(const std::string& rules) {
    std::string args = "--root " + quote(kFixture) + " --no-driver";
    return {run_gpudx("snapshot " + args, faults(rules)), run_gpudx("diagnose --format json " + args, faults(rules))};
}

#define EXPECT_VALID_JSON(ran) ASSERT_FALSE((ran).json.is_discarded()) << (ran).out.substr(0, 400)

}  // namespace

// The preload really fails the open: without this the other tests would prove nothing.
TEST(FileFaults, InjectorFailsTheNamedFileOnly) {
    auto log = std::filesystem::temp_directory_path() / ("gpudx-faults-" + std::to_string(::getpid()) + ".log");
    std::filesystem::remove(log);
    auto env = faults("open:EACCES:0000:00:06.0/current_link_speed");
    env["GPUDX_TEST_FAULTS_LOG"] = log.string();
    auto r = run_gpudx("snapshot --root " + quote(kFixture) + " --no-driver", env);
    EXPECT_VALID_JSON(r);
    std::ifstream in(log);
    std::string line;
    ASSERT_TRUE(std::getline(in, line)) << "no fault was injected";
    EXPECT_NE(line.find("open 13 "), std::string::npos) << line;
    EXPECT_NE(line.find("0000:00:06.0/current_link_speed"), std::string::npos) << line;
    std::filesystem::remove(log);
}

TEST(FileFaults, UnreadableSysfsAttributeIsRecordedAndNotGuessed) {
    auto r = host_run("open:EACCES:0000:00:06.0/current_link_speed");
    EXPECT_VALID_JSON(r.snapshot);
    EXPECT_EQ(r.snapshot.exit_code, 0);
    EXPECT_TRUE(has_problem(r.snapshot.json, "pcie", "0000:00:06.0/current_link_speed", "Permission denied"))
        << (*collector(r.snapshot.json, "pcie")).dump();
    for (auto& d : r.snapshot.json["pcie"]["devices"]) {
        if (d["address"] != "0000:00:06.0") continue;
        EXPECT_TRUE(d["link_current"]["speed_gts"].is_null());  // unknown, not 0
    }
    EXPECT_VALID_JSON(r.diagnosis);
    EXPECT_EQ(r.diagnosis.exit_code, 0);  // an unknown speed is not a degraded link
    EXPECT_FALSE(has_finding(r.diagnosis.json, "pcie.link_degraded"));
}

TEST(FileFaults, UnreadableDriverInformationFileIsNotAMissingGpu) {
    auto r = host_run("open:EACCES:gpus/0000:00:07.0/information");
    EXPECT_VALID_JSON(r.snapshot);
    EXPECT_TRUE(has_problem(r.snapshot.json, "module", "gpus/0000:00:07.0/information", "Permission denied"));
    // The directory shows the driver has the GPU: it is listed, its unread fields empty.
    bool listed = false;
    for (auto& g : r.snapshot.json["module"]["nvidia_gpus"]) {
        if (g["address"] != "0000:00:07.0") continue;
        listed = true;
        EXPECT_EQ(g["uuid"], "");
    }
    EXPECT_TRUE(listed);
    EXPECT_VALID_JSON(r.diagnosis);
    EXPECT_FALSE(has_finding(r.diagnosis.json, "module.gpu_not_in_driver")) << r.diagnosis.out.substr(0, 2000);
    EXPECT_EQ(r.diagnosis.exit_code, 0);
}

TEST(FileFaults, SysfsReadEioIsRecorded) {
    auto r = host_run("read:EIO:0000:00:06.0/uevent");
    EXPECT_VALID_JSON(r.snapshot);
    EXPECT_TRUE(has_problem(r.snapshot.json, "pcie", "0000:00:06.0/uevent", "Input/output error"));
    // The separate attributes still identify the GPU.
    EXPECT_EQ(r.snapshot.json["pcie"]["gpus"].size(), 2u);
    EXPECT_VALID_JSON(r.diagnosis);
    EXPECT_EQ(r.diagnosis.exit_code, 0);
}

TEST(FileFaults, DeviceVanishingMidReadIsRecorded) {
    // Every file of 0000:00:07.0 gives one byte, then ENOENT: the device was removed while being read.
    auto r = host_run("midread:ENOENT:0000:00:07.0/");
    EXPECT_VALID_JSON(r.snapshot);
    EXPECT_TRUE(has_problem(r.snapshot.json, "pcie", "0000:00:07.0/vendor", "No such file or directory"));
    EXPECT_TRUE(has_problem(r.snapshot.json, "module", "gpus/0000:00:07.0/information", "No such file or directory"));
    EXPECT_VALID_JSON(r.diagnosis);
    EXPECT_NE(r.diagnosis.exit_code, 3);
    EXPECT_EQ(layer_state(r.diagnosis.json, "pcie"), "ok");  // what was read still counts
}

TEST(FileFaults, UnreadableKernelLogLeavesTheNodeUnjudged) {
    auto r = host_run("open:EACCES:_commands/dmesg.txt");
    EXPECT_VALID_JSON(r.snapshot);
    auto* c = collector(r.snapshot.json, "kernel_log");
    ASSERT_TRUE(c);
    EXPECT_EQ((*c)["state"], "error");
    EXPECT_NE((*c)["message"].get<std::string>().find("Permission denied"), std::string::npos) << c->dump();
    EXPECT_VALID_JSON(r.diagnosis);
    EXPECT_EQ(layer_state(r.diagnosis.json, "kernel_log"), "not_evaluated");
    // The other layers are healthy, but the log may hold the Xid that would drain the node: could not evaluate.
    EXPECT_EQ(r.diagnosis.exit_code, 3);
    EXPECT_EQ(r.diagnosis.json["verdict"], "unknown");
}

TEST(FileFaults, UnreadableLoaderCacheIsRecorded) {
    auto r = host_run("read:EIO:_commands/ldconfig-p.txt");
    EXPECT_VALID_JSON(r.snapshot);
    EXPECT_TRUE(has_problem(r.snapshot.json, "libraries", "ldconfig-p.txt", "Input/output error"));
    EXPECT_VALID_JSON(r.diagnosis);
}

TEST(FileFaults, UnreadableProcModulesIsNotAModuleNotLoaded) {
    auto r = host_run("open:EACCES:/proc/modules");
    EXPECT_VALID_JSON(r.snapshot);
    EXPECT_TRUE(has_problem(r.snapshot.json, "module", "/proc/modules", "Permission denied"));
    EXPECT_VALID_JSON(r.diagnosis);
    EXPECT_FALSE(has_finding(r.diagnosis.json, "module.not_loaded"));
    EXPECT_EQ(r.diagnosis.exit_code, 0);
}

TEST(FileFaults, NothingReadableIsNotEvaluatedNotNoGpu) {
    // Every file of the capture fails to open (directories still list): no layer may claim a fault it could
    // not see, and the layers resting on the unreadable files are not evaluated.
    auto r = host_run("open:EACCES:" + kFixture + "/");
    EXPECT_VALID_JSON(r.snapshot);
    EXPECT_TRUE(has_problem(r.snapshot.json, "pcie", "/uevent", "Permission denied"))
        << (*collector(r.snapshot.json, "pcie")).dump().substr(0, 600);
    EXPECT_EQ((*collector(r.snapshot.json, "pcie"))["state"], "error");
    // Device nodes recorded in the capture but unreadable are not "missing".
    for (auto& n : r.snapshot.json["devices"]["nodes"]) EXPECT_NE(n["type"], "missing") << n.dump();
    EXPECT_VALID_JSON(r.diagnosis);
    for (auto& f : r.diagnosis.json["findings"]) EXPECT_NE(f["severity"], "error") << f.dump();
    for (auto layer : {"pcie", "module", "kernel_log"}) EXPECT_EQ(layer_state(r.diagnosis.json, layer), "not_evaluated");
    EXPECT_NE(r.diagnosis.exit_code, 1) << r.diagnosis.out.substr(0, 2000);
}

// ---- Driver faults through the stand-in libraries, seen from the binary.

namespace {

std::string scenario_with(const nlohmann::json& controls) {
    auto path = std::filesystem::temp_directory_path() / ("gpudx-fault-scenario-" + std::to_string(::getpid()) + ".json");
    nlohmann::json doc = controls;
    doc["base"] = kScenarios + "/h200x2.json";
    std::ofstream(path) << doc.dump();
    return path.string();
}

Ran driver_run(const std::string& command, const std::string& scenario, const std::string& lib_dir,
               const std::string& extra = "") {
    return run_gpudx(command + " --root " + quote(kFixture) + " --driver-lib-dir " + quote(lib_dir) + " " + extra,
                     {{"GPUDX_STANDIN_SCENARIO", scenario}});
}

}  // namespace

// Every nvmlReturn_t NVML defines (1..29 and NVML_ERROR_UNKNOWN), and one it does not: one test each, so that
// ctest spreads the 62 runs of the binary over its jobs (one test running them all was the suite's longest).
class NvmlInitFailing : public ::testing::TestWithParam<int> {};

TEST_P(NvmlInitFailing, IsAnErrorOfTheNvmlLayerOnly) {
    const int code = GetParam();
    auto scenario = scenario_with({{"faults", {{{"call", "nvmlInit"}, {"result", code}}}}});
    auto snap = driver_run("snapshot", scenario, kStandins);
    EXPECT_VALID_JSON(snap);
    EXPECT_EQ(snap.json["nvml"]["init_result"], code);
    EXPECT_NE(snap.json["nvml"]["init_error"].get<std::string>().find("(" + std::to_string(code)), std::string::npos)
        << snap.json["nvml"]["init_error"];
    EXPECT_EQ((*collector(snap.json, "nvml"))["state"], "error");
    EXPECT_EQ((*collector(snap.json, "cuda"))["state"], "ok");  // one layer's failure loses nothing else
    auto diag = driver_run("diagnose --format json", scenario, kStandins);
    EXPECT_VALID_JSON(diag);
    EXPECT_TRUE(has_finding(diag.json, "driver.nvml_init_failed"));
    EXPECT_EQ(diag.exit_code, 1);
}

INSTANTIATE_TEST_SUITE_P(DriverFaults, NvmlInitFailing,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                           23, 24, 25, 26, 27, 28, 29, 999, 12345));

// The --deadline of a run whose stand-in hangs on purpose: every call that answers takes microseconds, so
// only the hung one is cut, however loaded the machine.
constexpr double kHangDeadline = 2.0;
const std::string kHangDeadlineFlag = "--deadline 2";

// A hung stand-in call never returns, so a run that ended at all did not wait for it: the slack is for a
// loaded machine. The lower bound is the design's promise: a hung call is given the whole deadline.
void expect_cut_at_the_deadline(const Ran& r) {
    EXPECT_GE(r.seconds, kHangDeadline);
    EXPECT_LT(r.seconds, kHangDeadline + 10.0);
}

TEST(DriverFaults, HungNvmlCallIsCutAtTheDeadline) {
    auto diag = driver_run("diagnose --format json", kScenarios + "/nvml-hang-uuid.json", kStandins, kHangDeadlineFlag);
    expect_cut_at_the_deadline(diag);
    EXPECT_VALID_JSON(diag);
    EXPECT_TRUE(has_finding(diag.json, "driver.unresponsive"));
    EXPECT_EQ((*collector(diag.json, "nvml"))["state"], "timed_out");
    EXPECT_EQ(diag.exit_code, 1);
}

TEST(DriverFaults, HungCuInitIsCutAtTheDeadline) {
    auto snap = driver_run("snapshot", kScenarios + "/cuinit-hang.json", kStandins, kHangDeadlineFlag);
    expect_cut_at_the_deadline(snap);
    EXPECT_VALID_JSON(snap);
    EXPECT_EQ(snap.json["cuda"]["timed_out_call"], "cuInit(0)");
    EXPECT_EQ(snap.json["nvml"]["devices"].size(), 2u);
    auto diag = driver_run("diagnose --format json", kScenarios + "/cuinit-hang.json", kStandins, kHangDeadlineFlag);
    expect_cut_at_the_deadline(diag);
    EXPECT_EQ(diag.exit_code, 1);
}

TEST(DriverFaults, LibcudaMissingIsAWarningAndNvmlStillAnswers) {
    auto dir = std::filesystem::temp_directory_path() / ("gpudx-nvml-only-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::filesystem::remove(dir / "libnvidia-ml.so.1");
    std::filesystem::create_symlink(kStandins + "/libnvidia-ml.so.1", dir / "libnvidia-ml.so.1");
    auto snap = driver_run("snapshot", kScenarios + "/h200x2.json", dir.string());
    EXPECT_VALID_JSON(snap);
    EXPECT_EQ((*collector(snap.json, "nvml"))["state"], "ok");
    EXPECT_EQ((*collector(snap.json, "cuda"))["state"], "no_data");
    EXPECT_NE(snap.json["cuda"]["load_error"].get<std::string>().find("libcuda.so.1"), std::string::npos);
    auto diag = driver_run("diagnose --format json", kScenarios + "/h200x2.json", dir.string());
    EXPECT_VALID_JSON(diag);
    EXPECT_TRUE(has_finding(diag.json, "driver.cuda_not_loaded"));
    EXPECT_EQ(diag.exit_code, 2);
    std::filesystem::remove_all(dir);
}

TEST(DriverFaults, LibrariesExportingNoExpectedSymbol) {
    auto snap = driver_run("snapshot", kScenarios + "/h200x2.json", GPUDX_FAULT_EMPTY_DIR);
    EXPECT_VALID_JSON(snap);
    EXPECT_NE(snap.json["nvml"]["load_error"].get<std::string>().find("nvmlInit_v2 not found"), std::string::npos);
    EXPECT_NE(snap.json["cuda"]["load_error"].get<std::string>().find("cuInit not found"), std::string::npos);
    auto diag = driver_run("diagnose --format json", kScenarios + "/h200x2.json", GPUDX_FAULT_EMPTY_DIR);
    EXPECT_VALID_JSON(diag);
    EXPECT_TRUE(has_finding(diag.json, "driver.nvml_not_loaded"));
    EXPECT_TRUE(has_finding(diag.json, "driver.cuda_not_loaded"));
    EXPECT_EQ(diag.exit_code, 2);
    // `gpudx ids` still joins what the host layers know.
    auto ids = driver_run("ids --format json", kScenarios + "/h200x2.json", GPUDX_FAULT_EMPTY_DIR);
    EXPECT_VALID_JSON(ids);
    EXPECT_EQ(ids.json["gpus"].size(), 2u);
}

TEST(DriverFaults, CheckpointWithoutAUsableDriverExitsThree) {
    auto r = run_gpudx("state " + std::to_string(::getpid()) + " --format json --driver-lib-dir " +
                       quote(GPUDX_FAULT_EMPTY_DIR));
    EXPECT_VALID_JSON(r);
    EXPECT_EQ(r.exit_code, 3) << r.out.substr(0, 600);
}

// A driver that writes garbage into the channel of the child that loads it: each supervised child's reader
// reports what it could not read (the probes as a read problem of their collector, the checkpoint worker's
// parent in the failed call, the accept watchdog as the reason it stopped), never drops it.
TEST(DriverFaults, GarbledProbeOutputIsAReadProblemOfItsCollector) {
    auto snap = driver_run("snapshot", kScenarios + "/h200x2.json", GPUDX_FAULT_GARBLING_DIR);
    EXPECT_VALID_JSON(snap);
    for (const char* name : {"nvml", "cuda"}) {
        SCOPED_TRACE(name);
        EXPECT_TRUE(has_problem(snap.json, name, "", "probe output: a result that is not JSON")) << snap.out.substr(0, 2000);
        EXPECT_TRUE(has_problem(snap.json, name, "", "Z what is this"));
    }
    // What the child did report still counts: the library exports nothing.
    EXPECT_NE(snap.json["nvml"]["load_error"].get<std::string>().find("nvmlInit_v2 not found"), std::string::npos);
}

TEST(DriverFaults, GarbledCheckpointWorkerAnswerIsNamedInTheFailure) {
    auto r = run_gpudx("state " + std::to_string(::getpid()) + " --format json --driver-lib-dir " +
                       quote(GPUDX_FAULT_GARBLING_DIR));
    EXPECT_VALID_JSON(r);
    EXPECT_EQ(r.exit_code, 3) << r.out.substr(0, 600);
    EXPECT_NE(r.out.find("its answer is not a JSON object"), std::string::npos) << r.out.substr(0, 1200);
    EXPECT_NE(r.out.find("R {not json"), std::string::npos);
}

TEST(DriverFaults, GarbledAcceptProgressStopsTheRunAndSaysWhy) {
    auto r = run_gpudx("accept --format json --driver-lib-dir " + quote(GPUDX_FAULT_GARBLING_DIR));
    EXPECT_VALID_JSON(r);
    ASSERT_FALSE(r.json["tests"].empty()) << r.out.substr(0, 600);
    std::string reasons;
    for (auto& t : r.json["tests"]) reasons += t["reason"].get<std::string>() + "\n";
    EXPECT_NE(reasons.find("a line that is not a JSON object (\"R {not json\")"), std::string::npos) << reasons;
    EXPECT_EQ(r.json["verdict"], "fail");
}
