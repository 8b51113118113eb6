#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../fleet/h200x2_snapshot.hpp"
#include "rules/comparisons/baseline.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
using namespace gpudx::testdata;

namespace {

std::vector<std::string> ids(const std::vector<Finding>& fs) {
    std::vector<std::string> out;
    for (auto& f : fs) out.push_back(f.id);
    return out;
}

const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
    for (auto& f : fs)
        if (f.id == id) return &f;
    return nullptr;
}

void remove_gpu(Snapshot& s, const std::string& pci) {
    std::erase_if(s.pcie.devices, [&](auto& d) { return d.address == pci; });
    std::erase_if(s.pcie.gpus, [&](auto& a) { return a == pci; });
    std::erase_if(s.module.nvidia_gpus, [&](auto& g) { return g.address == pci; });
    std::erase_if(s.nvml.devices, [&](auto& d) { return d.pci == pci; });
    std::erase_if(s.cuda.caller.devices, [&](auto& d) { return d.pci == pci; });
}

// Moves the card with `uuid` to `to` in every layer.
void move_gpu(Snapshot& s, const std::string& from, const std::string& to) {
    for (auto& d : s.pcie.devices)
        if (d.address == from) d.address = to;
    for (auto& a : s.pcie.gpus)
        if (a == from) a = to;
    for (auto& g : s.module.nvidia_gpus)
        if (g.address == from) g.address = to;
    for (auto& d : s.nvml.devices)
        if (d.pci == from) d.pci = to;
    for (auto& d : s.cuda.caller.devices)
        if (d.pci == from) d.pci = to;
}

void set_uuid(Snapshot& s, const std::string& pci, const std::string& uuid) {
    for (auto& g : s.module.nvidia_gpus)
        if (g.address == pci) g.uuid = uuid;
    for (auto& d : s.nvml.devices)
        if (d.pci == pci) d.uuid = uuid;
    for (auto& d : s.cuda.caller.devices)
        if (d.pci == pci) d.uuid = uuid;
}

struct CliRun {
    int status = -1;
    std::string out;
};
CliRun cli(const std::string& args) {
    CliRun r;
    FILE* p = ::popen((std::string(GPUDX_BINARY) + " " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

std::filesystem::path scratch(const std::string& name) {
    auto p = std::filesystem::temp_directory_path() / ("gpudx-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

}  // namespace

TEST(NodeRecord, JoinsEveryLayerByPciAddress) {
    auto r = make_node_record(h200x2_snapshot());
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.gpus[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
    EXPECT_EQ(r.gpus[0].pci, "0000:00:06.0");
    EXPECT_EQ(r.gpus[1].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    EXPECT_EQ(r.gpus[1].pci, "0000:00:07.0");
    EXPECT_EQ(r.gpus[0].model, "NVIDIA H200");
    EXPECT_EQ(r.gpus[0].vbios, "96.00.a5.00.1a");
    EXPECT_EQ(r.gpus[0].link_max.speed_gts, 32.0);
    EXPECT_EQ(r.gpus[0].link_current.width, 16u);
    EXPECT_EQ(r.gpus[0].numa_node, -1);
    EXPECT_EQ(r.gpus[1].minor, 1u);
    EXPECT_EQ(r.driver_version, "580.159.04");
    EXPECT_EQ(r.driver_branch, "580");
    EXPECT_EQ(r.kernel_release, "6.18.44-fc-v657-gpu");
    EXPECT_EQ(r.hostname, "vm");
    EXPECT_EQ(r.cuda_driver_version, 13000);
    EXPECT_EQ(cuda_version_text(r.cuda_driver_version), "13.0");
    ASSERT_EQ(r.libraries.size(), 2u);
    EXPECT_EQ(r.libraries[0].soname, "libcuda.so.1");
    EXPECT_EQ(r.libraries[0].path, "/usr/local/nvidia/lib64/libcuda.so.1");
    EXPECT_EQ(r.libraries[0].version, "580.159.04");
    EXPECT_EQ(dominant_gpu_model(r), "NVIDIA H200");
}

TEST(NodeRecord, WithoutTheDriverKeepsPcieFactsAndNoUuid) {
    auto s = h200x2_snapshot();
    s.module.nvidia_gpus.clear();
    s.module.nvidia_driver_version.reset();
    s.nvml = {};
    s.cuda = {};
    auto r = make_node_record(s);
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_TRUE(r.gpus[0].uuid.empty());
    EXPECT_EQ(r.gpus[0].model, "GH100 [H200 NVL]");  // from the PCI name database
    EXPECT_EQ(r.driver_version, "580.159.04");       // /sys/module/nvidia/version via the loaded module
    EXPECT_FALSE(r.cuda_driver_version);
}

TEST(NodeRecord, NvmlBusIdsAreNormalisedBeforeJoining) {
    auto s = h200x2_snapshot();
    s.pcie = {};
    s.module.nvidia_gpus.clear();
    s.cuda = {};
    s.nvml.devices[0].pci = "00000000:00:06.0";
    auto r = make_node_record(s);
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.gpus[0].pci, "0000:00:06.0");
    EXPECT_EQ(r.gpus[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
}

TEST(NodeRecord, RoundTripsThroughJson) {
    auto r = make_node_record(h200x2_snapshot());
    r.recorded_at = "2026-05-04T10:00:00Z";
    auto j = node_record_to_json(r);
    EXPECT_EQ(j["kind"], "gpudx-node-record");
    EXPECT_EQ(j["cuda_version"], "13.0");
    auto back = node_record_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(node_record_to_json(*back), j);
    EXPECT_EQ(back->gpus[1].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
}

TEST(NodeRecord, RejectsSomethingElseAndNewerSchemas) {
    auto snapshot_json = snapshot_to_json(h200x2_snapshot());
    auto r = node_record_from_json(snapshot_json);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("not a gpudx node record"), std::string::npos);
    auto j = node_record_to_json(make_node_record(h200x2_snapshot()));
    j["schema_version"] = 99;
    r = node_record_from_json(j);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("newer"), std::string::npos);
    j["schema_version"] = 1;
    j["gpus"] = "two";
    EXPECT_FALSE(node_record_from_json(j));
}

TEST(NodeRecord, DriverBranchIsTheFirstComponent) {
    EXPECT_EQ(driver_branch_of("580.159.04"), "580");
    EXPECT_EQ(driver_branch_of("570"), "570");
    EXPECT_EQ(driver_branch_of(""), "");
}

TEST(BaselineDiff, UnchangedNodeHasNoFindings) {
    auto base = make_node_record(h200x2_snapshot());
    auto fs = diff_against_baseline(base, h200x2_snapshot());
    EXPECT_TRUE(fs.empty()) << ids(fs).front();
    EXPECT_EQ(exit_code_for(fs), 0);
}

TEST(BaselineDiff, MissingCardIsAnErrorNamingItsUuidAndAddress) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    remove_gpu(now, kGpu1Pci);
    auto fs = diff_against_baseline(base, now);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.gpu_missing"});
    EXPECT_EQ(fs[0].severity, Severity::error);
    EXPECT_EQ(fs[0].layer, Layer::pcie);
    ASSERT_EQ(fs[0].subjects.size(), 1u);
    EXPECT_EQ(fs[0].subjects[0].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    EXPECT_EQ(fs[0].subjects[0].pci, "0000:00:07.0");
    EXPECT_NE(fs[0].evidence[1].value.find("0000:00:06.0"), std::string::npos);
    EXPECT_EQ(exit_code_for(fs), 1);
}

TEST(BaselineDiff, CardAtAnotherAddressIsMovedNotMissing) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    move_gpu(now, kGpu1Pci, "0000:00:08.0");
    auto fs = diff_against_baseline(base, now);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.gpu_moved"});
    EXPECT_EQ(fs[0].subjects[0].pci, "0000:00:08.0");
    EXPECT_NE(fs[0].message.find("from 0000:00:07.0 to 0000:00:08.0"), std::string::npos) << fs[0].message;
}

TEST(BaselineDiff, TwoCardsSwappedAreTwoMoves) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    move_gpu(now, kGpu0Pci, "tmp");
    move_gpu(now, kGpu1Pci, kGpu0Pci);
    move_gpu(now, "tmp", kGpu1Pci);
    auto fs = diff_against_baseline(base, now);
    EXPECT_EQ(ids(fs), (std::vector<std::string>{"baseline.gpu_moved", "baseline.gpu_moved"}));
}

TEST(BaselineDiff, NewUuidInAKnownSlotIsAReplacement) {
    auto base_snapshot = h200x2_snapshot();
    for (auto& d : base_snapshot.pcie.devices)
        if (d.address == kGpu1Pci) d.slot = "SXM2";
    auto base = make_node_record(base_snapshot);
    auto now = base_snapshot;
    set_uuid(now, kGpu1Pci, "GPU-11111111-2222-3333-4444-555555555555");
    auto fs = diff_against_baseline(base, now);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.gpu_replaced"});
    EXPECT_EQ(fs[0].subjects[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
    EXPECT_NE(fs[0].message.find("GPU-40cd403d-66ba-4608-72b9-5be5031085dc"), std::string::npos);
    EXPECT_NE(fs[0].message.find("slot SXM2"), std::string::npos) << fs[0].message;
    EXPECT_EQ(exit_code_for(fs), 2);
}

TEST(BaselineDiff, AdditionalCardIsExtra) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    auto extra = now.module.nvidia_gpus[0];
    extra.address = "0000:00:08.0";
    extra.uuid = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    now.module.nvidia_gpus.push_back(extra);
    auto fs = diff_against_baseline(base, now);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.gpu_extra"});
    EXPECT_EQ(fs[0].subjects[0].pci, "0000:00:08.0");
}

TEST(BaselineDiff, LinkTrainedLowerThanRecorded) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    for (auto& d : now.pcie.devices)
        if (d.address == kGpu0Pci) d.link_current = {16.0, 8, "16.0 GT/s PCIe"};
    auto fs = diff_against_baseline(base, now);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.link_lower"});
    EXPECT_EQ(fs[0].subjects[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
    EXPECT_NE(fs[0].message.find("now 16 GT/s x8"), std::string::npos) << fs[0].message;
    EXPECT_NE(fs[0].message.find("recorded 32 GT/s x16"), std::string::npos) << fs[0].message;
    // A link that trains higher than before is no finding.
    auto better = h200x2_snapshot();
    auto lower_base_snapshot = now;
    EXPECT_TRUE(diff_against_baseline(make_node_record(lower_base_snapshot), better).empty());
}

TEST(BaselineDiff, DriverKernelVbiosAndLibraryChanges) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    now.module.nvidia_driver_version = "580.126.09";
    now.host.kernel_release = "6.18.40-fc-v650-gpu";
    now.module.nvidia_gpus[1].vbios = "96.00.A5.00.19";
    now.libraries.libraries[0].chosen->path = "/opt/old/libcuda.so.1";
    now.cuda.driver_version = 12080;
    auto fs = diff_against_baseline(base, now);
    auto got = ids(fs);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<std::string>{"baseline.cuda_changed", "baseline.driver_changed",
                                             "baseline.kernel_changed", "baseline.library_changed",
                                             "baseline.vbios_changed"}));
    auto* vb = find(fs, "baseline.vbios_changed");
    ASSERT_NE(vb, nullptr);
    EXPECT_EQ(vb->subjects[0].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    auto* drv = find(fs, "baseline.driver_changed");
    EXPECT_EQ(drv->message, "NVIDIA driver changed from 580.159.04 to 580.126.09");
    EXPECT_EQ(find(fs, "baseline.cuda_changed")->message, "CUDA driver version changed from 13.0 to 12.8");
}

TEST(BaselineDiff, VbiosCaseDifferenceIsNoChange) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    now.module.nvidia_gpus[0].vbios = "96.00.A5.00.1A";  // as nvidia-smi writes it
    EXPECT_TRUE(diff_against_baseline(base, now).empty());
}

TEST(BaselineDiff, WithoutUuidsNowOnlyPresenceIsChecked) {
    auto base = make_node_record(h200x2_snapshot());
    auto now = h200x2_snapshot();
    now.module.nvidia_gpus.clear();
    now.nvml = {};
    now.cuda = {};
    auto fs = diff_against_baseline(base, now);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.identity_unverified"});
    EXPECT_EQ(fs[0].severity, Severity::info);
    EXPECT_EQ(fs[0].subjects.size(), 2u);
    EXPECT_EQ(exit_code_for(fs), 0);
}

TEST(BaselineCli, SaveThenDiffReportsAMissingCardWithExitOne) {
    auto dir = scratch("baseline-cli");
    write(dir / "before.json", snapshot_to_json(h200x2_snapshot()).dump());
    auto now = h200x2_snapshot();
    remove_gpu(now, kGpu0Pci);
    write(dir / "after.json", snapshot_to_json(now).dump());

    auto save = cli("baseline save " + (dir / "node.json").string() + " --from " + (dir / "before.json").string());
    ASSERT_EQ(save.status, 0) << save.out;
    auto rec = load_node_record((dir / "node.json").string());
    ASSERT_TRUE(rec) << rec.error().message;
    EXPECT_EQ(rec->gpus.size(), 2u);
    EXPECT_FALSE(rec->recorded_at.empty());

    auto same = cli("baseline diff " + (dir / "node.json").string() + " --from " + (dir / "before.json").string());
    EXPECT_EQ(same.status, 0) << same.out;
    EXPECT_NE(same.out.find("No change from the baseline"), std::string::npos) << same.out;

    auto diff = cli("baseline diff " + (dir / "node.json").string() + " --from " + (dir / "after.json").string());
    EXPECT_EQ(diff.status, 1) << diff.out;
    EXPECT_NE(diff.out.find("[baseline.gpu_missing]"), std::string::npos) << diff.out;
    EXPECT_NE(diff.out.find("GPU-992cb470-9027-88f4-48a9-a9a329d6978d"), std::string::npos) << diff.out;

    auto js = cli("baseline diff " + (dir / "node.json").string() + " --from " + (dir / "after.json").string() +
                  " --format json");
    EXPECT_EQ(js.status, 1);
    auto j = nlohmann::json::parse(js.out);
    EXPECT_EQ(j["findings"][0]["id"], "baseline.gpu_missing");
    std::filesystem::remove_all(dir);
}

TEST(BaselineCli, UnreadableRecordIsAUsageError) {
    auto dir = scratch("baseline-cli-bad");
    write(dir / "snap.json", snapshot_to_json(h200x2_snapshot()).dump());
    auto missing = cli("baseline diff " + (dir / "nope.json").string() + " --from " + (dir / "snap.json").string());
    EXPECT_EQ(missing.status, 64) << missing.out;
    EXPECT_NE(missing.out.find("nope.json"), std::string::npos) << missing.out;
    auto wrong = cli("baseline diff " + (dir / "snap.json").string() + " --from " + (dir / "snap.json").string());
    EXPECT_EQ(wrong.status, 64) << wrong.out;
    EXPECT_NE(wrong.out.find("not a gpudx node record"), std::string::npos) << wrong.out;
    auto nosub = cli("baseline");
    EXPECT_EQ(nosub.status, 64) << nosub.out;
    std::filesystem::remove_all(dir);
}

}  // namespace GPUDX_UNITY_ID
