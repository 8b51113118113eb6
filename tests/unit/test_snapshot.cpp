#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "rules/engine/diagnose.hpp"
#include "collect/collectors.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";

Snapshot fixture_snapshot() {
    Root root(kH200);
    CollectOptions o;
    o.probe_driver = false;
    o.environment = load_environment(root);
    return take_snapshot(root, o);
}
}  // namespace

TEST(Snapshot, RoundTripsThroughJson) {
    auto s = fixture_snapshot();
    auto j1 = snapshot_to_json(s);
    auto back = snapshot_from_json(j1);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(snapshot_to_json(*back).dump(2), j1.dump(2));
}

TEST(Snapshot, EveryCollectorHasAStatus) {
    auto s = fixture_snapshot();
    for (auto c : kAllCollectors)
        if (c != Collector::rocm_smi && c != Collector::processes) {  // KFD nodes only; --pid only
            EXPECT_NE(s.collector(c), nullptr) << to_string(c);
        }
}

TEST(Snapshot, KernelLogTopicsAndKindsAreWrittenByName) {
    Snapshot s;
    s.kernel_log.lines.push_back({1.0, "", "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Fatal", LogTopic::sxid});
    KernelLogTally t;
    t.kind = TallyKind::aer_fatal;
    s.kernel_log.tallies.push_back(t);
    auto j = snapshot_to_json(s);
    EXPECT_EQ(j["kernel_log"]["lines"][0]["topic"], "sxid");
    EXPECT_EQ(j["kernel_log"]["tallies"][0]["kind"], "aer_fatal");

    // Another version's names are still read, as `other`.
    j["kernel_log"]["lines"][0]["topic"] = "gsp";
    j["kernel_log"]["tallies"][0]["kind"] = "gsp_timeout";
    auto back = snapshot_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->kernel_log.lines[0].topic, LogTopic::other);
    EXPECT_EQ(back->kernel_log.tallies[0].kind, TallyKind::other);
}

TEST(Snapshot, RejectsNewerSchemaAndForeignDocuments) {
    auto j = snapshot_to_json(Snapshot{});
    j["schema_version"] = kSnapshotSchemaVersion + 1;
    auto r = snapshot_from_json(j);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("newer"), std::string::npos);
    EXPECT_FALSE(snapshot_from_json(nlohmann::json{{"hello", 1}}));
    auto wrong = snapshot_to_json(Snapshot{});
    wrong["pcie"]["devices"] = "not a list";
    EXPECT_FALSE(snapshot_from_json(wrong));
}

TEST(Diagnose, EmptyNodeHasNoGpuAtThePcieBoundary) {
    Snapshot s;
    s.collectors.push_back({"pcie", CollectorState::ok, {}, {}, 0, {}});
    DiagnoseOptions o;
    auto d = diagnose(s, o);
    ASSERT_TRUE(d.boundary);
    EXPECT_EQ(*d.boundary, Layer::pcie);
    EXPECT_EQ(d.exit_code, kExitErrors);
    ASSERT_FALSE(d.findings.empty());
    EXPECT_EQ(d.findings.front().id, "pcie.no_gpu");
    // Layers above the boundary are not trusted; layers without data say why.
    for (auto& l : d.layers) {
        if (l.layer == Layer::pcie) continue;
        EXPECT_FALSE(l.trusted) << to_string(l.layer);
        EXPECT_EQ(l.state, LayerState::not_evaluated) << to_string(l.layer);
        EXPECT_NE(l.reason.find("not collected"), std::string::npos);
    }
}

TEST(Diagnose, NothingCollectedIsUnknownNotHealthy) {
    Snapshot s;
    DiagnoseOptions o;
    auto d = diagnose(s, o);
    EXPECT_EQ(d.exit_code, kExitUnknown);
    EXPECT_EQ(d.verdict, Verdict::unknown);
}

// A capture holds recorded driver answers, not a driver: `--root` never asks this machine's NVML or CUDA.
TEST(Diagnose, CaptureWithoutDriverLibDirDoesNotProbeThisMachinesDriver) {
    // What a shell command prints on stdout.
    auto output_of = [](const std::string& command) {
        std::string out;
        FILE* p = ::popen(command.c_str(), "r");
        if (!p) return out;
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        ::pclose(p);
        return out;
    };
    auto run = [&](const std::string& args) { return output_of(std::string(GPUDX_BINARY) + " " + args + " 2>/dev/null"); };
    const std::string reason =
        "a capture: driver answers replay only through --driver-lib-dir <stand-ins>; see docs/capture-format.md";
    auto snap = nlohmann::json::parse(run("snapshot --root " + kH200), nullptr, false);
    ASSERT_FALSE(snap.is_discarded());
    int driver_collectors = 0;
    for (auto& c : snap["collectors"])
        if (c["name"] == "nvml" || c["name"] == "cuda") {
            ++driver_collectors;
            EXPECT_EQ(c["state"], "no_data") << c.dump();
            EXPECT_EQ(c["message"], reason) << c.dump();
        }
    EXPECT_EQ(driver_collectors, 2);
    EXPECT_EQ(snap["nvml"]["library_path"], "");  // nothing was loaded
    EXPECT_EQ(snap["nvml"]["load_error"], "");

    auto diag = nlohmann::json::parse(run("diagnose --format json --root " + kH200), nullptr, false);
    ASSERT_FALSE(diag.is_discarded());
    bool seen = false;
    for (auto& l : diag["layers"])
        if (l["layer"] == "driver") {
            seen = true;
            EXPECT_EQ(l["state"], "not_evaluated") << l.dump();
            EXPECT_NE(l["reason"].get<std::string>().find(reason), std::string::npos) << l.dump();
        }
    EXPECT_TRUE(seen) << diag.dump();
    for (auto& f : diag["findings"]) EXPECT_NE(f["layer"], "driver") << f.dump();

    // `record` too: with GPUDX_PROBE_TRACE every probe child announces its calls on stderr, so any probe shows.
    auto traced = [&](const std::string& args) {
        return output_of("GPUDX_PROBE_TRACE=1 " + std::string(GPUDX_BINARY) + " " + args + " 2>&1 >/dev/null");
    };
    EXPECT_EQ(traced("record --file - --root " + kH200).find("gpudx probe"), std::string::npos);
    // The trace itself works: the same capture probed through a library directory announces the NVML calls.
    EXPECT_NE(traced("record --file - --root " + kH200 + " --driver-lib-dir /nonexistent").find("gpudx probe nvml"),
              std::string::npos);
}

}  // namespace GPUDX_UNITY_ID
