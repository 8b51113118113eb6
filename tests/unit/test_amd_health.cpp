// health.amd_* and health.xgmi_* rules over hand-built ROCm SMI answers shaped like the mi300x8 fixture: each rule
// fires on its fault and stays silent on the healthy GPUs, on a spike seen in one sample of two, on a power cap, on
// history that did not grow, and on a fact the GPU does not report (which only health.amd_not_judged names).
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

constexpr const char* kAddresses[] = {"0000:05:00.0", "0000:26:00.0", "0000:46:00.0", "0000:65:00.0"};
constexpr const char* kHive = "5d0dc0f14559831a";

// Bits of indep_throttle_status (the kernel's SMU_THROTTLER_*_BIT).
constexpr unsigned long long kPpt0 = 1ull << 0, kTempHotspot = 1ull << 36, kProchotGfx = 1ull << 47;

RocmSmiHealthSample healthy_sample(unsigned after_ms = 0) {
    RocmSmiHealthSample s;
    s.after_ms = after_ms;
    s.temperatures = {{RocmTemperatureSensor::junction, 42000}, {RocmTemperatureSensor::memory, 35000}};
    s.throttle_status = 0;
    s.indep_throttle_status = 0;
    return s;
}

// One MI300X of a 4-GPU all-to-all hive, idle and cool, as the mi300x8 fixture answers (with a throttle status).
RocmSmiDevice healthy_mi300x(unsigned index) {
    RocmSmiDevice d;
    d.index = index;
    d.pci = kAddresses[index];
    d.xgmi_hive_id = kHive;
    d.ecc = {{"UMC", 0, 0}, {"XGMI_WAFL", 0, 0}};
    d.health.temperature_limits = {{RocmTemperatureSensor::edge, 100000, 110000},
                                   {RocmTemperatureSensor::junction, 100000, 110000},
                                   {RocmTemperatureSensor::memory, 105000, 115000}};
    d.health.gpu_metrics_version = "1.3";
    d.health.xgmi_error_status = RocmXgmiStatus::no_errors;
    for (unsigned j = 0; j < std::size(kAddresses); ++j)
        if (j != index) d.health.links.push_back({j, kAddresses[j], RocmLinkType::xgmi, 1});
    auto s = healthy_sample();
    s.temperatures.push_back({RocmTemperatureSensor::edge, 38000});
    d.health.samples.push_back(s);
    return d;
}

Snapshot node(std::vector<RocmSmiDevice> devices, std::string_view gfx = "gfx942") {
    Snapshot s;
    s.rocm_smi.probed = true;
    s.rocm_smi.device_count = static_cast<unsigned>(devices.size());
    for (auto& d : devices) {
        AmdGpu g;
        g.pci = d.pci;
        g.gfx_target = std::string(gfx);
        g.in_kfd = true;
        s.module.amd_gpus.push_back(g);
    }
    s.rocm_smi.devices = std::move(devices);
    return s;
}

std::vector<RocmSmiDevice> healthy_hive() {
    std::vector<RocmSmiDevice> v;
    for (unsigned i = 0; i < std::size(kAddresses); ++i) v.push_back(healthy_mi300x(i));
    return v;
}

std::vector<Finding> judge(const Snapshot& s) {
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    kAmdHealthFamily.run(ctx, out);
    return out;
}

std::vector<Finding> judge(const RocmSmiDevice& d) { return judge(node({d})); }

const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
    auto it = std::find_if(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
    return it == fs.end() ? nullptr : &*it;
}
// A pointer into a temporary would dangle once the statement ends: keep the findings in a variable first.
const Finding* find(std::vector<Finding>&& fs, std::string_view id) = delete;

bool has(const std::vector<Finding>& fs, std::string_view id) {
    return std::any_of(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
}

size_t count(const std::vector<Finding>& fs, std::string_view id) {
    return std::count_if(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
}

void set_temperature(RocmSmiHealthSample& s, RocmTemperatureSensor sensor, long long mc) {
    for (auto& t : s.temperatures)
        if (t.sensor == sensor) t.current_mc = mc;
}

}  // namespace

TEST(AmdHealth, HealthyHiveHasNoFinding) {
    EXPECT_TRUE(judge(node(healthy_hive())).empty());
}

TEST(AmdHealth, SnapshotWithoutHealthIsNotJudgedButSaysSo) {
    RocmSmiDevice d;
    d.pci = kAddresses[0];
    d.xgmi_hive_id = kHive;
    auto fs = judge(d);
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_EQ(fs[0].id, "health.amd_not_judged");
    EXPECT_EQ(fs[0].severity, Severity::info);
}

TEST(AmdHealth, JunctionNearCriticalInBothSamplesWarns) {
    auto d = healthy_mi300x(0);
    set_temperature(d.health.samples[0], RocmTemperatureSensor::junction, 96000);
    d.health.samples.push_back(d.health.samples[0]);
    d.health.samples[1].after_ms = 1000;
    auto fs = judge(d);
    auto* f = find(fs, "health.amd_temperature_high");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_NE(f->message.find("junction temperature 96.0 °C"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("critical limit of 100.0 °C"), std::string::npos) << f->message;
}

TEST(AmdHealth, MemoryOverCriticalIsAnError) {
    auto d = healthy_mi300x(0);
    set_temperature(d.health.samples[0], RocmTemperatureSensor::memory, 106000);
    d.health.samples.push_back(d.health.samples[0]);
    d.health.samples[1].after_ms = 1000;
    auto fs1 = judge(d);
    auto* f = find(fs1, "health.amd_temperature_high");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->message.find("memory"), std::string::npos);
}

TEST(AmdHealth, TemperatureSpikeInOneSampleOfTwoIsSilent) {
    auto d = healthy_mi300x(0);
    set_temperature(d.health.samples[0], RocmTemperatureSensor::junction, 99000);
    d.health.samples.push_back(healthy_sample(1000));
    EXPECT_FALSE(has(judge(d), "health.amd_temperature_high"));
}

TEST(AmdHealth, SensorWithoutLimitIsNotJudged) {
    auto d = healthy_mi300x(0);
    d.health.temperature_limits[1] = {RocmTemperatureSensor::junction, std::nullopt, std::nullopt};
    set_temperature(d.health.samples[0], RocmTemperatureSensor::junction, 120000);
    auto fs = judge(d);
    EXPECT_EQ(find(fs, "health.amd_temperature_high"), nullptr);
    auto* f = find(fs, "health.amd_not_judged");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("junction temperature (no critical or emergency limit)"), std::string::npos) << f->message;
}

TEST(AmdHealth, EmergencyLimitStandsInForAMissingCritical) {
    auto d = healthy_mi300x(0);
    d.health.temperature_limits[1].critical_mc.reset();
    set_temperature(d.health.samples[0], RocmTemperatureSensor::junction, 107000);
    auto fs2 = judge(d);
    auto* f = find(fs2, "health.amd_temperature_high");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("emergency limit of 110.0 °C"), std::string::npos) << f->message;
}

TEST(AmdHealth, ThermalThrottleInEverySampleWarns) {
    auto d = healthy_mi300x(0);
    d.health.samples[0].indep_throttle_status = kTempHotspot | kPpt0;
    d.health.samples.push_back(d.health.samples[0]);
    d.health.samples[1].after_ms = 1000;
    auto fs3 = judge(d);
    auto* f = find(fs3, "health.amd_throttle_thermal");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_NE(f->message.find("TEMP_HOTSPOT"), std::string::npos) << f->message;
    EXPECT_EQ(f->message.find("PPT0"), std::string::npos) << "the power cap is not the fault: " << f->message;
    EXPECT_NE(f->evidence[0].value.find("PPT0, TEMP_HOTSPOT"), std::string::npos) << f->evidence[0].value;
}

TEST(AmdHealth, ProchotIsAHardwareThrottle) {
    auto d = healthy_mi300x(0);
    d.health.samples[0].indep_throttle_status = kProchotGfx;
    auto fs4 = judge(d);
    auto* f = find(fs4, "health.amd_throttle_thermal");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("PROCHOT_GFX"), std::string::npos);
    EXPECT_NE(f->next_step.find("BMC"), std::string::npos);
}

TEST(AmdHealth, PowerCapUnderLoadIsNormal) {
    auto d = healthy_mi300x(0);
    d.health.samples[0].indep_throttle_status = kPpt0 | (1ull << 16);  // PPT0 and TDC_GFX: a busy GPU at its cap
    EXPECT_TRUE(judge(d).empty());
}

TEST(AmdHealth, ThrottleInOneSampleOfTwoIsSilent) {
    auto d = healthy_mi300x(0);
    d.health.samples[0].indep_throttle_status = kTempHotspot;
    d.health.samples.push_back(healthy_sample(1000));
    EXPECT_FALSE(has(judge(d), "health.amd_throttle_thermal"));
}

TEST(AmdHealth, ThrottleStatusNotReportedIsNotJudged) {
    auto d = healthy_mi300x(0);
    d.health.samples[0].indep_throttle_status.reset();
    auto fs = judge(d);
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_EQ(fs[0].id, "health.amd_not_judged");
    EXPECT_NE(fs[0].message.find("throttle reasons"), std::string::npos);
}

TEST(AmdHealth, ThrottleReasonsDecodeByKind) {
    auto r = rocm_throttle_reasons(kPpt0 | kTempHotspot | kProchotGfx | (1ull << 60));
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(r[0].name, "PPT0");
    EXPECT_FALSE(rocm_throttle_is_fault(r[0]));
    EXPECT_EQ(r[1].name, "TEMP_HOTSPOT");
    EXPECT_TRUE(rocm_throttle_is_fault(r[1]));
    EXPECT_EQ(r[2].kind, ThrottleKind::hardware);
    EXPECT_EQ(r[3].name, "bit 60");
    EXPECT_FALSE(rocm_throttle_is_fault(r[3]));
}

TEST(AmdHealth, HivePeerOverPcieIsReportedOncePerPair) {
    auto hive = healthy_hive();
    for (auto& l : hive[1].health.links)
        if (l.peer == 3) l.type = RocmLinkType::pcie, l.hops = 2;
    for (auto& l : hive[3].health.links)
        if (l.peer == 1) l.type = RocmLinkType::pcie, l.hops = 2;
    auto fs = judge(node(hive));
    ASSERT_EQ(count(fs, "health.xgmi_link_pcie"), 1u);
    auto* f = find(fs, "health.xgmi_link_pcie");
    EXPECT_EQ(f->subjects.size(), 2u);
    EXPECT_EQ(f->subjects[0].pci, kAddresses[1]);
    EXPECT_EQ(f->subjects[1].pci, kAddresses[3]);
    EXPECT_EQ(f->evidence[0].value, "PCIE, 2 hops");
}

TEST(AmdHealth, PcieBetweenDifferentHivesIsSilent) {
    auto hive = healthy_hive();
    hive[3].xgmi_hive_id = "00000000000000aa";
    for (auto& d : hive)
        for (auto& l : d.health.links)
            if (l.peer == 3 || d.index == 3) l.type = RocmLinkType::pcie;
    EXPECT_FALSE(has(judge(node(hive)), "health.xgmi_link_pcie"));
}

// MI250's GCDs of one hive are not all directly linked: ROCm SMI reports PCIe between some of them by design.
TEST(AmdHealth, PartiallyConnectedHiveJudgesOnlyAGpuWithNoXgmiLink) {
    auto hive = healthy_hive();
    for (auto& l : hive[0].health.links)
        if (l.peer == 2) l.type = RocmLinkType::pcie;
    for (auto& l : hive[2].health.links)
        if (l.peer == 0) l.type = RocmLinkType::pcie;
    EXPECT_FALSE(has(judge(node(hive, "gfx90a")), "health.xgmi_link_pcie"));

    for (auto& l : hive[3].health.links) l.type = RocmLinkType::pcie;
    for (auto& d : hive)
        for (auto& l : d.health.links)
            if (l.peer == 3) l.type = RocmLinkType::pcie;
    auto fs = judge(node(hive, "gfx90a"));
    ASSERT_EQ(count(fs, "health.xgmi_link_pcie"), 1u);
    EXPECT_EQ(find(fs, "health.xgmi_link_pcie")->subjects[0].pci, kAddresses[3]);
}

TEST(AmdHealth, XgmiErrorStatusWarns) {
    auto d = healthy_mi300x(0);
    d.health.xgmi_error_status = RocmXgmiStatus::multiple_errors;
    auto fs5 = judge(d);
    auto* f = find(fs5, "health.xgmi_errors");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->evidence[0].value, "RSMI_XGMI_STATUS_MULTIPLE_ERRORS");
}

TEST(AmdHealth, CorrectableEccGrowingWarnsAndHistoryIsInfo) {
    auto d = healthy_mi300x(0);
    d.ecc = {{"UMC", 112, 0}, {"XGMI_WAFL", 5, 0}};
    auto second = healthy_sample(1000);
    second.ecc = {{"UMC", 130, 0}, {"XGMI_WAFL", 5, 0}};
    d.health.samples.push_back(second);
    auto fs = judge(d);
    auto* grow = find(fs, "health.amd_ecc_correctable_growing");
    ASSERT_NE(grow, nullptr);
    EXPECT_EQ(grow->severity, Severity::warning);
    EXPECT_NE(grow->message.find("UMC 112 -> 130"), std::string::npos) << grow->message;
    auto* seen = find(fs, "health.amd_ecc_correctable_seen");
    ASSERT_NE(seen, nullptr);
    EXPECT_EQ(seen->severity, Severity::info);
    EXPECT_NE(seen->message.find("XGMI_WAFL 5"), std::string::npos);
}

TEST(AmdHealth, CorrectableEccThatDidNotGrowIsOnlyInfo) {
    auto d = healthy_mi300x(0);
    d.ecc = {{"UMC", 7, 0}};
    auto fs = judge(d);
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_EQ(fs[0].id, "health.amd_ecc_correctable_seen");
}

TEST(AmdHealth, PartitionsOfOneGpuAreJudgedOnce) {
    auto d = healthy_mi300x(0);
    set_temperature(d.health.samples[0], RocmTemperatureSensor::junction, 101000);
    auto partition = d;
    partition.index = 1;
    partition.partition = 1;
    EXPECT_EQ(count(judge(node({d, partition})), "health.amd_temperature_high"), 1u);
}

TEST(AmdHealth, HealthRoundTripsThroughTheSnapshotJson) {
    RocmSmiLayer layer;
    layer.probed = true;
    layer.devices.push_back(healthy_mi300x(0));
    layer.devices[0].health.samples[0].indep_throttle_status = kTempHotspot;
    nlohmann::json j;
    layer_to_json(j, layer);
    EXPECT_EQ(j["devices"][0]["health"]["links"][0]["type"], "xgmi");
    EXPECT_EQ(j["devices"][0]["health"]["xgmi_error_status"], "no_errors");
    EXPECT_EQ(j["devices"][0]["health"]["temperature_limits"][1]["sensor"], "junction");
    RocmSmiLayer back;
    layer_from_json(j, back);
    ASSERT_EQ(back.devices.size(), 1u);
    const auto& h = back.devices[0].health;
    EXPECT_EQ(h.links.size(), 3u);
    EXPECT_EQ(h.samples[0].indep_throttle_status, kTempHotspot);
    EXPECT_EQ(h.temperature_limits[2].critical_mc, 105000);

    // An older snapshot: no health at all reads as not read.
    j["devices"][0].erase("health");
    RocmSmiLayer old;
    layer_from_json(j, old);
    EXPECT_TRUE(old.devices[0].health.samples.empty());
    EXPECT_EQ(old.devices[0].health.xgmi_error_status, RocmXgmiStatus::not_read);
}

}  // namespace GPUDX_UNITY_ID
