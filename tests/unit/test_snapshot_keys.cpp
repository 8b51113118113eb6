// The snapshot's keys are declared once (model/snapshot_keys.hpp): the full reader and the fleet's streaming
// reader must then read the same value for every field the fleet reads, on real snapshots.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../fleet/fleet_fields_agree.hpp"
#include "../fleet/h200x2_snapshot.hpp"
#include "model/snapshot_keys.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
using namespace gpudx::testdata;

namespace {

namespace fs = std::filesystem;

const fs::path kGolden = fs::path(GPUDX_TEST_SOURCE_DIR) / "golden";

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<fs::path> golden_snapshots() {
    std::vector<fs::path> out;
    for (auto& e : fs::directory_iterator(kGolden))
        if (e.path().string().ends_with(".snapshot.json")) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// The fleet fixture (tests/fleet/h200x2_snapshot.hpp) with the fields the 2xH200 capture lacks: an Xid, the
// --all-devices view, a module file, a slot and an NVSwitch.
Snapshot fleet_fixture() {
    auto s = h200x2_snapshot();
    XidEvent x;
    x.pci = kGpu1Pci;
    x.code = 79;
    x.text = "NVRM: Xid (PCI:0000:00:07): 79, pid=1234, GPU has fallen off the bus.";
    s.kernel_log.xids.push_back(x);
    s.cuda.all = s.cuda.caller;
    s.cuda.all->cuda_visible_devices = "";
    ModuleFile f;
    f.name = "nvidia";
    f.path = "/lib/modules/6.18.44-fc-v657-gpu/extra/nvidia.ko";
    f.version = kDriver;
    s.module.files.push_back(f);
    s.pcie.devices.back().slot = "7";
    auto nvswitch = h200x2_pci("0000:00:08.0", 0x068000, 0x10de, 0x22a3);
    nvswitch.is_nvswitch = true;
    s.pcie.devices.push_back(nvswitch);
    // A link's remote end and an InfiniBand port: what a node class expects and a record compares.
    s.nvml.devices[0].nvlinks[0].remote_pci = "0000:00:08.0";
    s.nvml.devices[0].nvlinks[0].remote_type = NvlinkRemote::nvswitch;
    IbDevice ib{.name = "mlx5_0", .pci = "0000:00:0c.0"};
    ib.ports.push_back({.port = 1, .state_code = 4, .phys_state_code = 5, .state = "ACTIVE", .phys_state = "LinkUp",
                        .rate = "400 Gb/sec (4X NDR)", .rate_gbps = 400, .link_layer = "InfiniBand"});
    s.infiniband.devices.push_back(ib);
    s.collectors.push_back({.name = "infiniband", .state = CollectorState::ok});
    return s;
}

void expect_agreement(const ReadersAgreement& a, const std::string& what) {
    EXPECT_FALSE(a.fleet_error) << what << ": " << *a.fleet_error;
    EXPECT_FALSE(a.full_error) << what << ": " << *a.full_error;
    for (auto& d : a.differences) ADD_FAILURE() << what << ": " << d;
}

}  // namespace

TEST(SnapshotKeys, AMemberIsWrittenUnderItsSchemaKey) {
    static_assert(snapshot_key<&NvmlDevice::uuid> == "uuid");
    static_assert(snapshot_key<&Snapshot::kernel_log> == "kernel_log");
    auto j = snapshot_to_json(h200x2_snapshot());
    EXPECT_EQ(j[snapshot_key<&Snapshot::nvml>][snapshot_key<&NvmlLayer::devices>][0][snapshot_key<&NvmlDevice::uuid>],
              kGpu0Uuid);
    EXPECT_EQ(j[snapshot_key<&Snapshot::module>][snapshot_key<&ModuleLayer::nvidia_gpus>][1][snapshot_key<&NvidiaProcGpu::vbios>],
              kVbios);
}

// CUDA_VISIBLE_DEVICES unset is nullopt in the model and "<unset>" in the snapshot, as it always was; in a view
// no probe filled it is "". Both readers read back what was written.
TEST(SnapshotKeys, AnUnsetVariableIsWrittenAsItAlwaysWasAndReadBackUnset) {
    Snapshot s = h200x2_snapshot();
    s.cuda.all = CudaView{};
    s.cuda.all->cuda_device_order = "PCI_BUS_ID";
    auto j = snapshot_to_json(s);
    EXPECT_EQ(j["cuda"]["caller"]["cuda_visible_devices"], "<unset>");
    EXPECT_EQ(j["cuda"]["all"]["cuda_visible_devices"], "");
    EXPECT_EQ(j["cuda"]["all"]["cuda_device_order"], "PCI_BUS_ID");
    for (const auto& back : {snapshot_from_json(j), read_whole_snapshot(j.dump())}) {
        ASSERT_TRUE(back) << back.error().message;
        EXPECT_EQ(back->cuda.caller.cuda_visible_devices, std::nullopt);
        ASSERT_TRUE(back->cuda.all);
        EXPECT_EQ(back->cuda.all->cuda_visible_devices, "");
        EXPECT_EQ(back->cuda.all->cuda_device_order, "PCI_BUS_ID");
    }
}

TEST(FleetAndFullReaders, AgreeOnTheRealCapture) {
    auto text = slurp(kGolden / "h200x2.snapshot.json");
    ASSERT_FALSE(text.empty());
    auto a = compare_readers(text);
    expect_agreement(a, "h200x2.snapshot.json");
    EXPECT_TRUE(a.covered.contains("module.nvidia_gpus[].uuid"));
    EXPECT_TRUE(a.covered.contains("pcie.devices[].link_max.width"));
}

TEST(FleetAndFullReaders, AgreeOnEveryGoldenSnapshotAndTheFleetFixture) {
    std::set<std::string> covered;
    auto goldens = golden_snapshots();
    EXPECT_GT(goldens.size(), 50u);
    for (auto& p : goldens) {
        auto a = compare_readers(slurp(p));
        expect_agreement(a, p.filename().string());
        covered.insert(a.covered.begin(), a.covered.end());
    }
    for (int indent : {-1, 2}) {
        auto a = compare_readers(snapshot_to_json(fleet_fixture()).dump(indent));
        expect_agreement(a, "the fleet fixture");
        covered.insert(a.covered.begin(), a.covered.end());
    }
    // Every field the fleet reads was compared with a value other than its default at least once.
    for (auto& leaf : fleet_field_leaves()) EXPECT_TRUE(covered.contains(leaf)) << leaf << " never held a value";
}

TEST(FleetAndFullReaders, AFieldReadDifferentlyIsNamedWithItsPath) {
    auto full = fleet_fixture();
    auto fleet = full;
    fleet.nvml.devices[1].uuid.clear();
    fleet.cuda.all.reset();
    fleet.host.hostname = "elsewhere";
    fleet.environment.variables["IGNORED"] = "not a fleet field";
    ReadersAgreement a;
    agree_detail::compare(fleet, full, {}, a);
    ASSERT_EQ(a.differences.size(), 3u);
    EXPECT_EQ(a.differences[0], "host.hostname: fleet \"elsewhere\" full \"vm\"");
    EXPECT_EQ(a.differences[1], "nvml.devices[1].uuid: fleet \"\" full \"" + std::string(kGpu1Uuid) + "\"");
    EXPECT_EQ(a.differences[2], "cuda.all: fleet absent full present");
}

TEST(FleetAndFullReaders, BothRefuseWhatIsNotASnapshot) {
    for (const char* text : {R"({"targets": ["a:9400"]})", R"({"schema_version": 1, "pcie": {"gpus": 5}})", "[1, 2"}) {
        auto a = compare_readers(text);
        EXPECT_TRUE(a.fleet_error) << text;
        EXPECT_TRUE(a.full_error) << text;
    }
}

}  // namespace GPUDX_UNITY_ID
