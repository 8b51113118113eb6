#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checks/diagnose.hpp"
#include "collect/collectors.hpp"

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
    for (auto name : {"host", "pcie", "module", "kernel_log", "libraries", "devices", "environment", "nvml", "cuda"})
        EXPECT_NE(s.collector(name), nullptr) << name;
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
    EXPECT_EQ(d.verdict, "unknown");
}
