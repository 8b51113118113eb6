// health.* rules over hand-built NVML answers shaped like the h200x2 stand-in scenario: each rule fires on its
// fault and stays silent on the healthy GPU, on a spike seen in one sample of two, and on history that did not grow.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "model/layer_json.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/engine/families.hpp"

using namespace gpudx;

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

namespace {

GpuHealthSample healthy_sample(unsigned after_ms = 0) {
    GpuHealthSample s;
    s.after_ms = after_ms;
    s.clock_event_reasons = 0x1;  // idle
    s.temperature_c = 32;
    s.memory_temperature_c = 37;
    s.power_mw = 78780;
    s.pcie_replays = 2;
    for (unsigned l = 0; l < 18; ++l) {
        NvlinkErrorCounters c;
        c.link = l;
        c.replay = c.recovery = c.crc_flit = c.crc_data = c.ecc_data = 0;
        s.nvlink_errors.push_back(c);
    }
    return s;
}

// One H200 as the h200x2 scenario answers: 18 active NVLink 4 links to NVSwitches, idle and cool.
NvmlDevice healthy_h200() {
    NvmlDevice d;
    d.index = 0;
    d.uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
    d.pci = "0000:00:06.0";
    d.bus_id = "00000000:00:06.0";
    for (unsigned l = 0; l < 18; ++l) d.nvlinks.push_back({l, true, 4u, 26562u, "", NvlinkRemote::nvswitch});
    d.health.temperature_slowdown_c = 89;
    d.health.temperature_shutdown_c = 92;
    d.health.power_limit_mw = 700000;
    d.health.row_remap_histogram = RowRemapHistogram{3072, 0, 0, 0, 0};
    d.health.nvlink_count = 18;
    d.health.samples.push_back(healthy_sample());
    return d;
}

std::vector<Finding> judge(const NvmlDevice& d) {
    Snapshot s;
    s.nvml.devices.push_back(d);
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    kGpuHealthFamily.run(ctx, out);
    return out;
}

const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
    auto it = std::find_if(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
    return it == fs.end() ? nullptr : &*it;
}
// A pointer into a temporary would dangle once the statement ends: keep the findings in a variable first.
const Finding* find(std::vector<Finding>&& fs, std::string_view id) = delete;

bool has(const std::vector<Finding>& fs, std::string_view id) {
    return std::any_of(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
}

}  // namespace

TEST(GpuHealth, HealthyH200HasNoFinding) {
    EXPECT_TRUE(judge(healthy_h200()).empty());
}

TEST(GpuHealth, OlderSnapshotWithoutHealthIsNotJudged) {
    NvmlDevice d;
    d.pci = "0000:00:06.0";
    for (unsigned l = 0; l < 18; ++l) d.nvlinks.push_back({l, true});
    EXPECT_TRUE(judge(d).empty());
}

TEST(GpuHealth, OneLinkDownAmongActiveOnesIsAWarning) {
    auto d = healthy_h200();
    d.nvlinks[5].active = false;
    auto fs = judge(d);
    auto* f = find(fs, "health.nvlink_down");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_NE(f->message.find("NVLink 5 of 18 down"), std::string::npos) << f->message;
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].pci, "0000:00:06.0");
}

TEST(GpuHealth, NoActiveLinkAtAllIsHealthy) {
    auto d = healthy_h200();
    for (auto& l : d.nvlinks) l.active = false;
    EXPECT_FALSE(has(judge(d), "health.nvlink_down"));
    d.nvlinks.clear();  // a PCIe card: NVML answers no link
    EXPECT_FALSE(has(judge(d), "health.nvlink_down"));
}

TEST(GpuHealth, NvlinkCounterGrowthIsAWarningNamingLinkAndCounter) {
    auto d = healthy_h200();
    d.health.samples[0].nvlink_errors[3].replay = 10;
    auto second = healthy_sample(1000);
    second.nvlink_errors[3].replay = 14;
    d.health.samples.push_back(second);
    auto fs = judge(d);
    auto* f = find(fs, "health.nvlink_errors_growing");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("link 3 replay: 10 -> 14 (+4)"), std::string::npos) << f->message;
    EXPECT_EQ(find(fs, "health.nvlink_errors_seen"), nullptr);
}

TEST(GpuHealth, NvlinkCounterThatDidNotGrowIsInfoOnly) {
    auto d = healthy_h200();
    d.health.samples[0].nvlink_errors[3].crc_flit = 7;
    auto second = healthy_sample(1000);
    second.nvlink_errors[3].crc_flit = 7;
    d.health.samples.push_back(second);
    auto fs = judge(d);
    EXPECT_EQ(find(fs, "health.nvlink_errors_growing"), nullptr);
    auto* f = find(fs, "health.nvlink_errors_seen");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::info);
}

TEST(GpuHealth, Nvlink5FailedRecoveryGrowthIsAWarning) {
    auto d = healthy_h200();
    for (auto& l : d.nvlinks) l.version = 5;
    GpuHealthSample a, b;
    b.after_ms = 1000;
    NvlinkErrorCounters c;
    c.link = 2;
    c.recovery_failed = 0;
    a.nvlink_errors.push_back(c);
    c.recovery_failed = 1;
    b.nvlink_errors.push_back(c);
    d.health.samples = {a, b};
    EXPECT_TRUE(has(judge(d), "health.nvlink_errors_growing"));
}

TEST(GpuHealth, HardwareSlowdownInBothSamplesIsAnError) {
    auto d = healthy_h200();
    d.health.samples[0].clock_event_reasons = kClockReasonHwSlowdown | kClockReasonHwThermalSlowdown;
    auto second = healthy_sample(1000);
    second.clock_event_reasons = kClockReasonHwSlowdown | kClockReasonHwThermalSlowdown;
    d.health.samples.push_back(second);
    const auto findings = judge(d);
    auto* f = find(findings, "health.clock_hw_slowdown");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->message.find("HW thermal slowdown"), std::string::npos) << f->message;
}

TEST(GpuHealth, HardwareSlowdownInOneSampleOnlyIsAWarning) {
    auto d = healthy_h200();
    d.health.samples[0].clock_event_reasons = kClockReasonHwPowerBrake;
    const auto findings = judge(d);
    auto* f = find(findings, "health.clock_hw_slowdown");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_NE(f->next_step.find("power"), std::string::npos);
}

TEST(GpuHealth, HardwareSlowdownThatClearedIsASpikeNotAFinding) {
    auto d = healthy_h200();
    d.health.samples[0].clock_event_reasons = kClockReasonHwSlowdown;
    d.health.samples.push_back(healthy_sample(1000));
    EXPECT_TRUE(judge(d).empty());
}

TEST(GpuHealth, NormalClockReasonsAreNotFindings) {
    auto d = healthy_h200();
    // SW power cap, sync boost, application clocks, idle, display: a GPU under load or at rest.
    d.health.samples[0].clock_event_reasons = 0x1 | 0x2 | 0x4 | 0x10 | 0x100;
    EXPECT_TRUE(judge(d).empty());
}

TEST(GpuHealth, SoftwareThermalSlowdownIsAWarning) {
    auto d = healthy_h200();
    d.health.samples[0].clock_event_reasons = kClockReasonSwThermalSlowdown;
    const auto findings = judge(d);
    auto* f = find(findings, "health.clock_sw_thermal");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
}

TEST(GpuHealth, TemperatureNearAndOverSlowdown) {
    auto d = healthy_h200();
    d.health.samples[0].temperature_c = 85;  // within 5 °C of 89
    const auto near_findings = judge(d);
    auto* near = find(near_findings, "health.temperature_high");
    ASSERT_NE(near, nullptr);
    EXPECT_EQ(near->severity, Severity::warning);
    d.health.samples[0].temperature_c = 90;
    auto fs = judge(d);
    auto* over = find(fs, "health.temperature_high");
    ASSERT_NE(over, nullptr);
    EXPECT_EQ(over->severity, Severity::error);
    d.health.samples[0].temperature_c = 83;  // 6 °C under: normal under load
    EXPECT_FALSE(has(judge(d), "health.temperature_high"));
    d.health.samples[0].temperature_c = 88;
    d.health.temperature_slowdown_c.reset();  // no threshold: nothing to judge against
    EXPECT_FALSE(has(judge(d), "health.temperature_high"));
}

TEST(GpuHealth, PowerOverTheLimitInEverySample) {
    auto d = healthy_h200();
    d.health.samples[0].power_mw = 760000;
    EXPECT_TRUE(has(judge(d), "health.power_over_limit"));
    auto second = healthy_sample(1000);
    second.power_mw = 700000;  // at the limit: SW power cap, normal
    d.health.samples.push_back(second);
    EXPECT_FALSE(has(judge(d), "health.power_over_limit"));
}

TEST(GpuHealth, PcieReplayGrowthIsAWarningAndHistoryIsInfo) {
    auto d = healthy_h200();
    auto second = healthy_sample(1000);
    second.pcie_replays = 9;
    d.health.samples.push_back(second);
    const auto grew_findings = judge(d);
    auto* grew = find(grew_findings, "health.pcie_replays_growing");
    ASSERT_NE(grew, nullptr);
    EXPECT_EQ(grew->layer, Layer::pcie);
    EXPECT_NE(grew->message.find("7 more"), std::string::npos) << grew->message;

    auto quiet = healthy_h200();
    quiet.health.samples[0].pcie_replays = 500;
    auto again = healthy_sample(1000);
    again.pcie_replays = 500;
    quiet.health.samples.push_back(again);
    auto fs = judge(quiet);
    EXPECT_EQ(find(fs, "health.pcie_replays_growing"), nullptr);
    ASSERT_NE(find(fs, "health.pcie_replays_seen"), nullptr);
    EXPECT_EQ(find(fs, "health.pcie_replays_seen")->severity, Severity::info);
}

TEST(GpuHealth, BanksNearTheirLastSpareRowAreAWarningUnlessRemappingAlreadyFailed) {
    auto d = healthy_h200();
    d.health.row_remap_histogram = RowRemapHistogram{3060, 8, 2, 2, 0};
    const auto findings = judge(d);
    auto* f = find(findings, "health.row_remap_low");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    d.remapped_rows_failure = true;  // driver.remapped_rows_failure says it, as an error
    EXPECT_FALSE(has(judge(d), "health.row_remap_low"));
    d.remapped_rows_failure = false;
    d.health.row_remap_histogram = RowRemapHistogram{3060, 10, 2, 0, 0};  // partial is not yet low
    EXPECT_FALSE(has(judge(d), "health.row_remap_low"));
}

TEST(GpuHealth, SecondSampleWantedOnlyForWhatOneSampleCannotJudge) {
    auto d = healthy_h200();
    EXPECT_FALSE(second_sample_wanted(d));  // the real H200's 2 PCIe replays are history
    d.health.samples[0].pcie_replays = 101;
    EXPECT_TRUE(second_sample_wanted(d));
    d = healthy_h200();
    d.health.samples[0].nvlink_errors[0].recovery = 1;
    EXPECT_TRUE(second_sample_wanted(d));
    d = healthy_h200();
    d.health.samples[0].temperature_c = 84;
    EXPECT_TRUE(second_sample_wanted(d));
    d = healthy_h200();
    d.health.samples[0].clock_event_reasons = 0x4;  // SW power cap: normal
    EXPECT_FALSE(second_sample_wanted(d));
}

TEST(GpuHealth, HealthRoundTripsAndAnOlderSnapshotLoadsWithoutIt) {
    NvmlLayer layer;
    auto d = healthy_h200();
    d.health.ecc.push_back({EccLocation::device_memory, 1, 0, 3, 0});
    d.fabric_clique_id = 4;
    layer.devices.push_back(d);
    nlohmann::json j;
    layer_to_json(j, layer);
    NvmlLayer back;
    layer_from_json(j, back);
    ASSERT_EQ(back.devices.size(), 1u);
    const auto& h = back.devices[0].health;
    EXPECT_EQ(h.samples.size(), 1u);
    EXPECT_EQ(h.samples[0].nvlink_errors.size(), 18u);
    EXPECT_EQ(h.row_remap_histogram->max, 3072u);
    EXPECT_EQ(h.ecc[0].location, EccLocation::device_memory);
    EXPECT_EQ(back.devices[0].nvlinks[0].remote_type, NvlinkRemote::nvswitch);
    EXPECT_EQ(back.devices[0].fabric_clique_id, 4u);

    // Without the new keys (a snapshot of an older gpudx): not read, never zero.
    auto& dev = j["devices"][0];
    dev.erase("health");
    for (auto& l : dev["nvlinks"]) {
        l.erase("version");
        l.erase("remote_type");
    }
    layer_from_json(j, back);
    EXPECT_TRUE(back.devices[0].health.samples.empty());
    EXPECT_FALSE(back.devices[0].health.temperature_slowdown_c);
    EXPECT_FALSE(back.devices[0].nvlinks[0].version);
    EXPECT_EQ(back.devices[0].nvlinks[0].remote_type, NvlinkRemote::not_read);
    // A remote type a newer gpudx names reads as unknown.
    j["devices"][0]["nvlinks"][0]["remote_type"] = "c2c";
    layer_from_json(j, back);
    EXPECT_EQ(back.devices[0].nvlinks[0].remote_type, NvlinkRemote::unknown);
}

}  // namespace GPUDX_UNITY_ID
