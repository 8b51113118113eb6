// AMD GPUs (docs/amd.md): the sysfs and KFD parsers, the ROCm selectors, the collectors on the 8×MI300X fixture
// (tests/fixtures/mi300x8, built from the documented formats: no AMD hardware was available), and the amd rules.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rules/engine/diagnose.hpp"
#include "collect/amd.hpp"
#include "collect/collectors.hpp"
#include "collect/devices.hpp"
#include "collect/pcie.hpp"
#include "abi/rocm_smi.hpp"
#include "identity/join.hpp"
#include "identity/visible_devices.hpp"
#include "model/layer_json.hpp"
#include "render/report.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {

const std::string kMi300x8 = std::string(GPUDX_TEST_FIXTURES) + "/mi300x8";
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const char* kAddrs[] = {"0000:05:00.0", "0000:26:00.0", "0000:46:00.0", "0000:65:00.0",
                        "0000:85:00.0", "0000:a6:00.0", "0000:c6:00.0", "0000:e5:00.0"};

// A writable copy of a fixture, removed when the test ends.
struct Copy {
    fs::path dir;
    Copy(const std::string& from, const std::string& name) {
        dir = fs::temp_directory_path() / ("gpudx-amd-" + name + "-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::copy(from, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    }
    ~Copy() { fs::remove_all(dir); }
    void write(const std::string& rel, const std::string& text) const {
        fs::create_directories((dir / rel).parent_path());
        fs::remove(dir / rel);
        std::ofstream(dir / rel, std::ios::binary) << text;
    }
    void remove(const std::string& rel) const { fs::remove_all(dir / rel); }
    std::string str() const { return dir.string(); }
};

Snapshot snap(const std::string& root_dir, std::map<std::string, std::string> env = {}) {
    Root root(root_dir);
    CollectOptions opts;
    opts.probe_driver = false;
    opts.environment = std::move(env);
    return take_snapshot(root, opts);
}

std::vector<Finding> findings(const Snapshot& s) {
    DiagnoseOptions o;
    return diagnose(s, o).findings;
}

const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
    for (auto& f : fs)
        if (f.id == id) return &f;
    return nullptr;
}

size_t count(const std::vector<Finding>& fs, std::string_view id) {
    return std::count_if(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
}

std::string gpu_uuid(const Snapshot& s, std::string_view pci) {
    for (auto& g : s.module.amd_gpus)
        if (g.pci == pci) return g.uuid;
    return {};
}

}  // namespace

// ---- parsers

TEST(AmdParse, KfdPropertiesKeepEveryNameValueLine) {
    auto p = parse_kfd_properties("cpu_cores_count 0\nsimd_count 1216\nlocation_id 1280\ndomain 0\n"
                                  "unique_id 13835058055282163712\nbad line here\nname gfx942\n\nhive_id\n");
    EXPECT_EQ(p.size(), 5u);
    EXPECT_EQ(p["simd_count"], "1216");
    EXPECT_EQ(p["unique_id"], "13835058055282163712");  // 64 bits, kept exact as text
    EXPECT_FALSE(p.count("name"));                       // not a number: not a property line
    EXPECT_FALSE(p.count("bad"));
    EXPECT_TRUE(parse_kfd_properties("").empty());
}

TEST(AmdParse, LocationIdIsBusAndDevfn) {
    EXPECT_EQ(kfd_location_to_pci(0, 1280), "0000:05:00.0");               // 0x0500
    EXPECT_EQ(kfd_location_to_pci(0, 0xe500), "0000:e5:00.0");
    EXPECT_EQ(kfd_location_to_pci(1, (0xa6 << 8) | (0x1f << 3) | 7), "0001:a6:1f.7");
    EXPECT_EQ(kfd_location_to_pci(0, (0x08 << 3)), "0000:00:08.0");
}

TEST(AmdParse, KfdNodeOfAGpuAndOfACpu) {
    auto gpu = kfd_node_from(2,
                             parse_kfd_properties("simd_count 1216\nlocation_id 9728\ndomain 0\ndrm_render_minor 129\n"
                                                  "gfx_target_version 90402\nvendor_id 4098\ndevice_id 29857\n"
                                                  "unique_id 4611686018427387905\n"),
                             std::string("45382\n"), std::string("gfx942\n"));
    EXPECT_EQ(gpu.node, 2u);
    EXPECT_EQ(gpu.gpu_id, 45382u);
    EXPECT_EQ(gpu.pci, "0000:26:00.0");
    EXPECT_EQ(gpu.drm_render_minor, 129u);
    EXPECT_EQ(gpu.unique_id, "4000000000000001");
    EXPECT_EQ(gpu.name, "gfx942");
    EXPECT_EQ(gpu.device_id, 0x74a1u);

    auto cpu = kfd_node_from(0, parse_kfd_properties("cpu_cores_count 96\nsimd_count 0\nlocation_id 0\n"
                                                     "drm_render_minor 0\n"),
                             std::string("0\n"), std::string("\n"));
    EXPECT_EQ(cpu.gpu_id, 0u);
    EXPECT_TRUE(cpu.pci.empty());
    EXPECT_FALSE(cpu.drm_render_minor);  // 0 on a CPU node is no render node
    EXPECT_TRUE(cpu.name.empty());

    // No name file (older kernels): the name follows from gfx_target_version.
    auto old = kfd_node_from(3, parse_kfd_properties("simd_count 440\nlocation_id 2048\ngfx_target_version 90010\n"),
                             std::string("1234"), std::nullopt);
    EXPECT_EQ(old.name, "gfx90a");
    EXPECT_EQ(old.pci, "0000:08:00.0");
}

TEST(AmdParse, UniqueIdsAndUuids) {
    EXPECT_EQ(unique_id_from_hex("a5e3b7c4d2f1e09a\n"), "a5e3b7c4d2f1e09a");
    EXPECT_EQ(unique_id_from_hex("0xA5E3B7C4D2F1E09A"), "a5e3b7c4d2f1e09a");
    EXPECT_EQ(unique_id_from_hex("1f"), "000000000000001f");
    EXPECT_EQ(unique_id_from_hex("0000000000000000"), "");  // no unique id on this ASIC
    EXPECT_EQ(unique_id_from_hex("not hex"), "");
    EXPECT_EQ(unique_id_from_hex("11112222333344445"), "");  // 17 digits: more than 64 bits
    EXPECT_EQ(unique_id_from_decimal("11953599891951968410"), "a5e3b7c4d2f1e09a");
    EXPECT_EQ(unique_id_from_decimal("0"), "");
    EXPECT_EQ(amd_uuid("a5e3b7c4d2f1e09a"), "GPU-a5e3b7c4d2f1e09a");
    EXPECT_EQ(amd_uuid(""), "");
}

TEST(AmdParse, FirmwareVersionFiles) {
    EXPECT_EQ(parse_amd_fw_version("0x0000009d\n"), 0x9du);
    EXPECT_EQ(parse_amd_fw_version("0x21000075"), 0x21000075u);
    EXPECT_FALSE(parse_amd_fw_version("157"));
    EXPECT_FALSE(parse_amd_fw_version("0x"));
    EXPECT_FALSE(parse_amd_fw_version("0x1234567890"));
    EXPECT_FALSE(parse_amd_fw_version("0xzz"));
}

TEST(AmdParse, DrmNamesAndGfxTargets) {
    EXPECT_EQ(drm_index("card1", "card"), 1u);
    EXPECT_EQ(drm_index("renderD128", "renderD"), 128u);
    EXPECT_FALSE(drm_index("card1-DP-1", "card"));
    EXPECT_FALSE(drm_index("card", "card"));
    EXPECT_FALSE(drm_index("renderD128", "card"));
    EXPECT_EQ(gfx_name_from_target_version(90402), "gfx942");
    EXPECT_EQ(gfx_name_from_target_version(90010), "gfx90a");
    EXPECT_EQ(gfx_name_from_target_version(110000), "gfx1100");
    EXPECT_EQ(gfx_name_from_target_version(100300), "gfx1030");
}

TEST(AmdParse, EtcGroup) {
    auto g = parse_etc_group("root:x:0:\nvideo:x:44:alice,bob\n# comment\nrender:x:109:\nbroken\n:x:5:\nr2:x:109:\n");
    EXPECT_EQ(g.size(), 3u);
    EXPECT_EQ(g[44], "video");
    EXPECT_EQ(g[109], "render");  // the first name of a gid wins
}

TEST(AmdParse, ProcessingAcceleratorClassIsAnAmdGpu) {
    EXPECT_TRUE(is_gpu_class(0x1002, 0x120000));   // MI300X
    EXPECT_TRUE(is_gpu_class(0x1002, 0x038000));   // MI210
    EXPECT_FALSE(is_gpu_class(0x10de, 0x120000));  // only AMD's accelerators use 0x1200 here
    EXPECT_FALSE(is_gpu_class(0x1002, 0x040300));  // the audio function of a Radeon
}

TEST(AmdParse, DevnodeRecordCarriesTheOwner) {
    auto dir = fs::temp_directory_path() / ("gpudx-amd-devnode-" + std::to_string(::getpid()));
    fs::create_directories(dir / "dev/dri");
    std::ofstream(dir / "dev/kfd.devnode") << "0o20660 235:0 uid=0 gid=109";
    std::ofstream(dir / "dev/dri/renderD128.devnode") << "0o20666 226:128";
    Root root(dir);
    auto kfd = root.stat("/dev/kfd");
    ASSERT_TRUE(kfd);
    EXPECT_EQ(kfd->type, FileType::char_device);
    EXPECT_EQ(kfd->mode & 07777, 0660u);
    EXPECT_EQ(kfd->major, 235u);
    EXPECT_EQ(kfd->uid, 0u);
    EXPECT_EQ(kfd->gid, 109u);
    auto render = root.stat("/dev/dri/renderD128");
    ASSERT_TRUE(render);
    EXPECT_EQ(render->minor, 128u);
    EXPECT_FALSE(render->gid);  // an older record: owner unknown
    fs::remove_all(dir);
}

// ---- ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES

namespace {
std::vector<AmdNodeGpu> four() {
    return {{"GPU-1111111111111111", "0000:05:00.0"},
            {"GPU-2222222222222222", "0000:26:00.0"},
            {"GPU-3333333333333333", "0000:46:00.0"},
            {"", "0000:65:00.0"}};
}
std::vector<int> idx(const std::vector<std::optional<unsigned>>& v) {
    std::vector<int> out;
    for (auto& x : v) out.push_back(x ? static_cast<int>(*x) : -1);
    return out;
}
}  // namespace

TEST(AmdVisible, UnsetShowsEveryGpuInRocrOrder) {
    auto s = select_amd_gpus(four(), std::nullopt, std::nullopt, std::nullopt);
    EXPECT_EQ(idx(s.rocr_index), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(idx(s.hip_index), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(s.hip_variable, "");
    EXPECT_TRUE(s.rocr_unmatched.empty());
}

TEST(AmdVisible, RocrByIndexAndUuidThenHipIndexesTheRest) {
    // ROCr keeps GPUs 2 and 0 in that order; HIP's index 1 is then the GPU ROCr numbered 0.
    auto s = select_amd_gpus(four(), std::string("2,gpu-1111111111111111"), std::string("1"), std::nullopt);
    EXPECT_EQ(idx(s.rocr_index), (std::vector<int>{1, -1, 0, -1}));
    EXPECT_EQ(idx(s.hip_index), (std::vector<int>{0, -1, -1, -1}));
    EXPECT_EQ(s.hip_variable, "HIP_VISIBLE_DEVICES");
}

TEST(AmdVisible, HipFollowsCudaVisibleDevicesWhenItsOwnIsUnset) {
    auto s = select_amd_gpus(four(), std::nullopt, std::nullopt, std::string("1,3"));
    EXPECT_EQ(s.hip_variable, "CUDA_VISIBLE_DEVICES");
    EXPECT_EQ(idx(s.hip_index), (std::vector<int>{-1, 0, -1, 1}));
    // An NVIDIA UUID there names no AMD GPU: HIP sees none.
    auto n = select_amd_gpus(four(), std::nullopt, std::nullopt, std::string("GPU-40cd403d-66ba-4608-72b9-5be5031085dc"));
    EXPECT_EQ(idx(n.hip_index), (std::vector<int>{-1, -1, -1, -1}));
    EXPECT_EQ(n.hip_unmatched.size(), 1u);
}

TEST(AmdVisible, AnEntryThatNamesNothingEndsTheList) {
    auto s = select_amd_gpus(four(), std::string("0,GPU-deadbeefdeadbeef,2"), std::nullopt, std::nullopt);
    EXPECT_EQ(idx(s.rocr_index), (std::vector<int>{0, -1, -1, -1}));
    EXPECT_EQ(s.rocr_unmatched, (std::vector<std::string>{"GPU-deadbeefdeadbeef"}));
    auto past = select_amd_gpus(four(), std::string("7"), std::nullopt, std::nullopt);
    EXPECT_EQ(idx(past.rocr_index), (std::vector<int>{-1, -1, -1, -1}));
    EXPECT_EQ(past.rocr_unmatched, (std::vector<std::string>{"7"}));
    auto empty = select_amd_gpus(four(), std::string(""), std::nullopt, std::nullopt);
    EXPECT_EQ(idx(empty.rocr_index), (std::vector<int>{-1, -1, -1, -1}));
    EXPECT_TRUE(empty.rocr_unmatched.empty());
    auto all = select_amd_gpus(four(), std::string("all"), std::nullopt, std::nullopt);
    EXPECT_EQ(all.rocr_unmatched, (std::vector<std::string>{"all"}));
    // A GPU without a unique id cannot be named by UUID.
    auto xx = select_amd_gpus(four(), std::string("GPU-XX"), std::nullopt, std::nullopt);
    EXPECT_EQ(xx.rocr_unmatched.size(), 1u);
}

// ---- collectors on the 8×MI300X fixture

TEST(AmdCollect, EveryLayerOfTheMi300xNode) {
    auto s = snap(kMi300x8);
    ASSERT_EQ(s.pcie.gpus.size(), 8u);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(s.pcie.gpus[i], kAddrs[i]);

    const auto& m = s.module;
    EXPECT_EQ(m.amdgpu_version, "6.8.5");
    EXPECT_TRUE(m.kfd_topology_listed);
    ASSERT_EQ(m.kfd_nodes.size(), 10u);  // two CPU sockets, eight GPUs
    EXPECT_EQ(m.kfd_nodes[0].gpu_id, 0u);
    EXPECT_TRUE(m.kfd_nodes[1].pci.empty());
    ASSERT_EQ(m.amd_gpus.size(), 8u);  // the BMC's ast card0 is no AMD GPU
    for (unsigned i = 0; i < 8; ++i) {
        const auto& g = m.amd_gpus[i];
        EXPECT_EQ(g.pci, kAddrs[i]);
        EXPECT_EQ(g.card, "card" + std::to_string(i + 1));
        EXPECT_EQ(g.render_minor, 128 + i);
        EXPECT_TRUE(g.in_kfd);
        EXPECT_EQ(g.kfd_node, i + 2);
        EXPECT_EQ(g.rocr_index, i);
        EXPECT_EQ(g.gfx_target, "gfx942");
        EXPECT_EQ(g.simd_count, 1216u);
        EXPECT_EQ(g.unique_id.size(), 16u);
        EXPECT_EQ(g.uuid, "GPU-" + g.unique_id);
        EXPECT_EQ(g.vbios_version, "113-M3000100-103");
        EXPECT_EQ(g.product_name, "AMD Instinct MI300X");
        EXPECT_EQ(g.firmware.at("mec_fw_version"), "0x0000009d");
        // The unique id in sysfs (hex) and in the KFD topology (decimal) agree.
        EXPECT_EQ(m.kfd_nodes[i + 2].unique_id, g.unique_id);
    }
    EXPECT_EQ(m.amdgpu_firmware.at("0000:05:00.0/sos_fw_version"), "0x00240059");

    // /dev/kfd and the render nodes, with their group.
    auto node = [&](std::string_view path) -> const DeviceNode* {
        for (auto& n : s.devices.nodes)
            if (n.path == path) return &n;
        return nullptr;
    };
    auto* kfd = node("/dev/kfd");
    ASSERT_TRUE(kfd);
    EXPECT_EQ(kfd->type, "char");
    EXPECT_EQ(kfd->mode, 0660u);
    EXPECT_EQ(kfd->gid, 109u);
    EXPECT_EQ(kfd->group, "render");
    EXPECT_FALSE(kfd->caller_can_open);  // unknown in a capture
    for (unsigned i = 0; i < 8; ++i) EXPECT_TRUE(node("/dev/dri/renderD" + std::to_string(128 + i))) << i;

    // ROCm: the release and the libraries the loader picks from it.
    EXPECT_EQ(s.libraries.rocm_release, "6.2.0-66");
    ASSERT_EQ(s.libraries.rocm_installs.size(), 2u);  // /opt/rocm and /opt/rocm-6.2.0, one tree
    EXPECT_EQ(s.libraries.rocm_installs[0].real_path, "/opt/rocm-6.2.0");
    std::map<std::string, std::string> chosen;
    for (auto& l : s.libraries.libraries)
        if (l.chosen) chosen[l.soname] = l.chosen->version;
    EXPECT_EQ(chosen["libamdhip64.so.6"], "6.2.60200");
    EXPECT_EQ(chosen["libhsa-runtime64.so.1"], "1.14.60200");
    EXPECT_EQ(chosen["librocm_smi64.so.7"], "7.3.60200");
    EXPECT_EQ(chosen["libamd_smi.so.24"], "24.6.60200");

    // The snapshot round-trips with the new fields.
    auto j = snapshot_to_json(s);
    auto back = snapshot_from_json(j);
    ASSERT_TRUE(back);
    EXPECT_EQ(snapshot_to_json(*back), j);
    EXPECT_EQ(j["module"]["amd_gpus"][0]["uuid"], s.module.amd_gpus[0].uuid);
}

TEST(AmdCollect, NvidiaCaptureHasNoAmdData) {
    auto s = snap(kH200);
    EXPECT_TRUE(s.module.amd_gpus.empty());
    EXPECT_TRUE(s.module.kfd_nodes.empty());
    EXPECT_FALSE(s.module.kfd_topology_listed);
    EXPECT_TRUE(s.libraries.rocm_installs.empty());
}

// ---- identity

TEST(AmdIdentity, RowsJoinedByPciAddressWithRocmIndices) {
    auto s0 = snap(kMi300x8);
    std::string u3 = gpu_uuid(s0, "0000:65:00.0");
    auto s = snap(kMi300x8, {{"ROCR_VISIBLE_DEVICES", "4,5," + u3}, {"HIP_VISIBLE_DEVICES", "2,0"}});
    auto t = join_identity(s);
    EXPECT_TRUE(t.amd);
    EXPECT_TRUE(t.kfd_read);
    ASSERT_EQ(t.rows.size(), 8u);
    auto* r3 = t.by_pci("0000:65:00.0");
    ASSERT_TRUE(r3);
    EXPECT_EQ(r3->vendor, "amd");
    EXPECT_EQ(r3->uuid(), u3);
    EXPECT_EQ(r3->render_minor, 131u);
    EXPECT_EQ(r3->dev_node, "/dev/dri/renderD131");
    EXPECT_EQ(r3->rocr_index, 2u);
    EXPECT_EQ(r3->hip_index, 0u);
    EXPECT_EQ(t.by_pci("0000:85:00.0")->hip_index, 1u);
    EXPECT_FALSE(t.by_pci("0000:a6:00.0")->hip_index);
    EXPECT_FALSE(t.by_pci("0000:05:00.0")->rocr_index);
    EXPECT_EQ(t.by_uuid(u3), r3);

    auto text = render_identity_text(t);
    EXPECT_NE(text.find("VENDOR"), std::string::npos);
    EXPECT_NE(text.find("ROCR"), std::string::npos);
    EXPECT_NE(text.find("hidden"), std::string::npos);
    EXPECT_NE(text.find("ROCm indices under ROCR_VISIBLE_DEVICES=4,5,"), std::string::npos) << text;
    auto j = identity_to_json(t);
    EXPECT_EQ(j["gpus"][3]["amd"]["hip_index"], 0);
    EXPECT_EQ(j["gpus"][3]["vendor"], "amd");
    EXPECT_EQ(j["sources"]["kfd"], true);
    auto csv = render_identity_csv(t);
    EXPECT_NE(csv.find(",amd,131," + u3 + ",5,"), std::string::npos) << csv;
}

// ---- rules

TEST(AmdRules, HealthyMi300xNodeHasNoProblem) {
    auto s = snap(kMi300x8);
    DiagnoseOptions o;
    auto d = diagnose(s, o);
    for (auto& f : d.findings) EXPECT_EQ(f.severity, Severity::info) << f.id << ": " << f.message;
    EXPECT_FALSE(find(d.findings, "pcie.mixed_vendors"));
    auto text = render_diagnosis_text(s, d, {});
    EXPECT_NE(text.find("GPUs on PCIe: 8 AMD (amdgpu)\n"), std::string::npos) << text;
}

TEST(AmdRules, GpuMissingFromKfdTopology) {
    Copy c(kMi300x8, "nokfd");
    c.remove("sys/devices/virtual/kfd/kfd/topology/nodes/5");
    auto fs = findings(snap(c.str()));
    ASSERT_EQ(count(fs, "module.gpu_not_in_kfd"), 1u);
    auto* f = find(fs, "module.gpu_not_in_kfd");
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].pci, "0000:65:00.0");
    EXPECT_EQ(f->subjects[0].uuid.substr(0, 4), "GPU-");  // named by ROCm's UUID
    EXPECT_EQ(f->severity, Severity::error);
}

TEST(AmdRules, GpuOutsideItsPeersXgmiHive) {
    const std::string props = "sys/devices/virtual/kfd/kfd/topology/nodes/4/properties";  // 0000:46:00.0
    std::ifstream in(kMi300x8 + "/" + props);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto at = text.find("hive_id ");
    ASSERT_NE(at, std::string::npos);
    auto end = text.find('\n', at);
    for (std::string hive : {"0", "42"}) {
        Copy c(kMi300x8, "hive" + hive);
        c.write(props, text.substr(0, at) + "hive_id " + hive + text.substr(end));
        auto fs = findings(snap(c.str()));
        ASSERT_EQ(count(fs, "module.xgmi_hive_split"), 1u) << hive;
        auto* f = find(fs, "module.xgmi_hive_split");
        EXPECT_EQ(f->subjects[0].pci, "0000:46:00.0");
        EXPECT_NE(f->message.find(hive == "0" ? "in no XGMI hive, while one hive holds the other 7 gfx942 GPUs"
                                            : "in another XGMI hive than the other 7"),
                  std::string::npos)
            << f->message;
    }
    // Two GPUs per hive, or no hive at all: nothing to judge against.
    Copy none(kMi300x8, "nohive");
    for (int n = 2; n < 10; ++n) {
        auto p = "sys/devices/virtual/kfd/kfd/topology/nodes/" + std::to_string(n) + "/properties";
        std::ifstream pin(kMi300x8 + "/" + p);
        std::string t((std::istreambuf_iterator<char>(pin)), {});
        auto a = t.find("hive_id ");
        none.write(p, t.substr(0, a) + "hive_id 0" + t.substr(t.find('\n', a)));
    }
    EXPECT_FALSE(find(findings(snap(none.str())), "module.xgmi_hive_split"));
    EXPECT_FALSE(find(findings(snap(kMi300x8)), "module.xgmi_hive_split"));
}

TEST(AmdRules, AmdgpuNotLoaded) {
    Copy c(kMi300x8, "noamdgpu");
    c.write("proc/modules", "");
    auto fs = findings(snap(c.str()));
    auto* f = find(fs, "module.not_loaded");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->subjects.size(), 8u);
    EXPECT_NE(f->message.find("AMD"), std::string::npos);
}

TEST(AmdRules, RenderNodeMissing) {
    Copy c(kMi300x8, "norender");
    c.remove("dev/dri/renderD130.devnode");
    auto fs = findings(snap(c.str()));
    auto* f = find(fs, "devices.render_node_missing");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->subjects[0].pci, "0000:46:00.0");
}

TEST(AmdRules, RocrVisibleDevicesNamingNoGpu) {
    auto fs = findings(snap(kMi300x8, {{"ROCR_VISIBLE_DEVICES", "1,GPU-0123456789abcdef"}}));
    auto* f = find(fs, "allocation.rocm_visible_devices_invalid");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->subjects.size(), 1u);  // what is left visible: the GPU index 1 named
    EXPECT_EQ(f->subjects[0].pci, "0000:26:00.0");
    EXPECT_FALSE(find(findings(snap(kMi300x8, {{"ROCR_VISIBLE_DEVICES", "0,1"}})), "allocation.rocm_visible_devices_invalid"));
}

TEST(AmdRules, LibrariesFromTwoRocmReleases) {
    Copy c(kMi300x8, "tworocm");
    c.write("opt/rocm-6.1.0/.info/version", "6.1.0-82\n");
    c.write("opt/rocm-6.1.0/lib/libhsa-runtime64.so.1.13.60100", "");
    fs::create_symlink("libhsa-runtime64.so.1.13.60100", c.dir / "opt/rocm-6.1.0/lib/libhsa-runtime64.so.1");
    auto fs1 = findings(snap(c.str(), {{"LD_LIBRARY_PATH", "/opt/rocm-6.1.0/lib"}}));
    auto* f = find(fs1, "libs.rocm_mixed_releases");
    ASSERT_TRUE(f);
    EXPECT_NE(f->message.find("6.1.0-82"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("6.2.0-66"), std::string::npos) << f->message;
    EXPECT_FALSE(find(findings(snap(c.str())), "libs.rocm_mixed_releases"));
}

TEST(AmdRules, MixedVendorHostAndACudaContainerThatSeesAmdGpus) {
    Copy c(kH200, "mixed");
    std::string cmd = "python3 " + std::string(GPUDX_TEST_FIXTURES) + "/make_mi300x8.py --add-to " + c.str() +
                      " --gpus 0000:00:08.0,0000:00:09.0 --rocm 6.2.0";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    auto s = snap(c.str());
    EXPECT_EQ(s.pcie.gpus.size(), 4u);
    EXPECT_EQ(s.module.amd_gpus.size(), 2u);
    DiagnoseOptions o;
    auto d = diagnose(s, o);
    auto* mixed = find(d.findings, "pcie.mixed_vendors");
    ASSERT_TRUE(mixed);
    EXPECT_EQ(mixed->severity, Severity::info);
    EXPECT_NE(mixed->message.find("2 AMD, 2 NVIDIA"), std::string::npos) << mixed->message;
    auto text = render_diagnosis_text(s, d, {});
    EXPECT_NE(text.find("GPUs on PCIe: 2 AMD (amdgpu), 2 NVIDIA (nvidia) — mixed-vendor host"), std::string::npos)
        << text;
    EXPECT_FALSE(find(d.findings, "container.amd_devices_exposed"));  // the host itself: nothing to isolate

    // A CUDA container given GPU 0 that can also open /dev/kfd and an AMD render node.
    c.write("proc/1/cgroup", "0::/system.slice/docker-4f9a1c2b3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8.scope\n");
    c.remove("dev/nvidia1.devnode");
    c.remove("dev/dri/renderD129.devnode");
    auto in = snap(c.str(), {{"NVIDIA_VISIBLE_DEVICES", "GPU-992cb470-9027-88f4-48a9-a9a329d6978d"}});
    auto fs2 = findings(in);
    auto* f = find(fs2, "container.amd_devices_exposed");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Severity::warning);
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].pci, "0000:00:08.0");
    EXPECT_EQ(f->subjects[0].uuid, gpu_uuid(in, "0000:00:08.0"));
    // Given AMD GPUs too (ROCR_VISIBLE_DEVICES): not a leak.
    auto both = snap(c.str(), {{"NVIDIA_VISIBLE_DEVICES", "GPU-992cb470-9027-88f4-48a9-a9a329d6978d"},
                               {"ROCR_VISIBLE_DEVICES", "0"}});
    EXPECT_FALSE(find(findings(both), "container.amd_devices_exposed"));
}

TEST(AmdRules, KfdMissingInAJobGivenRenderNodes) {
    Copy c(kMi300x8, "jobnokfd");
    c.write("proc/1/cgroup", "0::/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n");
    c.remove("dev/kfd.devnode");
    for (int m = 130; m < 136; ++m) c.remove("dev/dri/renderD" + std::to_string(m) + ".devnode");
    auto fs = findings(snap(c.str()));
    EXPECT_TRUE(find(fs, "devices.kfd_missing"));
    EXPECT_FALSE(find(fs, "devices.render_node_missing"));  // a container has only the nodes it was given
}

// ---- the runtime layer through ROCm SMI (librocm_smi64); the stand-in library's end-to-end cases are in
// tests/driver and the scenarios mi300x8-rocm-smi*.

TEST(AmdRocmSmi, BdfidCarriesDomainBusDeviceFunctionAndPartition) {
    // rocm_smi.h: domain [63:32], partition [31:28], bus [15:8], device [7:3], function [2:0].
    auto b = rsmi::decode_bdfid((uint64_t{0x0001} << 32) | (uint64_t{3} << 28) | (0xc6u << 8) | (0x1fu << 3) | 5);
    EXPECT_EQ(b.domain, 1u);
    EXPECT_EQ(b.partition, 3u);
    EXPECT_EQ(b.bus, 0xc6u);
    EXPECT_EQ(b.device, 0x1fu);
    EXPECT_EQ(b.function, 5u);
    EXPECT_STREQ(rsmi::status_name(rsmi::NOT_SUPPORTED), "RSMI_STATUS_NOT_SUPPORTED");
    EXPECT_STREQ(rsmi::status_name(rsmi::REFCOUNT_OVERFLOW), "RSMI_STATUS_REFCOUNT_OVERFLOW");
    EXPECT_STREQ(rsmi::status_name(rsmi::UNKNOWN_ERROR), "RSMI_STATUS_UNKNOWN_ERROR");
    EXPECT_STREQ(rsmi::status_name(99), "RSMI_STATUS_UNKNOWN_ERROR");
}

namespace {

// What ROCm SMI answers on a healthy node: every KFD GPU, under the identity sysfs gives it.
Snapshot with_healthy_rocm_smi(Snapshot s) {
    auto& r = s.rocm_smi;
    r.probed = true;
    r.library_path = "/opt/rocm-6.2.0/lib/librocm_smi64.so.7";
    r.init_result = 0;
    unsigned i = 0;
    for (auto& g : s.module.amd_gpus) {
        RocmSmiDevice d;
        d.index = i++;
        d.pci = g.pci;
        d.unique_id = g.unique_id;
        d.render_minor = g.render_minor;
        d.ecc = {{"UMC", 0, 0}, {"GFX", 0, 0}};
        r.devices.push_back(d);
    }
    r.device_count = i;
    s.collectors.push_back({"rocm_smi", CollectorState::ok});
    return s;
}

}  // namespace

TEST(AmdRocmSmi, HealthyAnswersRaiseNothing) {
    auto s = with_healthy_rocm_smi(snap(kMi300x8));
    ASSERT_EQ(s.rocm_smi.devices.size(), 8u);
    DiagnoseOptions o;
    auto d = diagnose(s, o);
    for (auto& f : d.findings) EXPECT_EQ(f.severity, Severity::info) << f.id << ": " << f.message;
    EXPECT_FALSE(d.boundary);
}

TEST(AmdRocmSmi, AGpuKfdHasButRocmSmiDoesNotIsNamed) {
    auto s = with_healthy_rocm_smi(snap(kMi300x8));
    auto gone = s.rocm_smi.devices[3].pci;
    s.rocm_smi.devices.erase(s.rocm_smi.devices.begin() + 3);
    s.rocm_smi.device_count = 7;
    auto fs = findings(s);
    ASSERT_EQ(count(fs, "driver.rocm_smi_missing_gpu"), 1u);
    auto* f = find(fs, "driver.rocm_smi_missing_gpu");
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].pci, gone);
    EXPECT_EQ(f->subjects[0].uuid, gpu_uuid(s, gone));
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_EQ(f->layer, Layer::driver);

    // A partitioned GPU is several ROCm SMI devices at one address: the missing GPU is still named.
    auto partitioned = s;
    auto second = partitioned.rocm_smi.devices[0];
    second.index = 7;
    second.partition = 1;
    partitioned.rocm_smi.devices.push_back(second);
    EXPECT_EQ(count(findings(partitioned), "driver.rocm_smi_missing_gpu"), 1u);

    // A device that never answered its address may be the missing GPU: no finding then.
    s.rocm_smi.devices[0].pci.clear();
    EXPECT_FALSE(find(findings(s), "driver.rocm_smi_missing_gpu"));
}

TEST(AmdRocmSmi, UniqueIdOrRenderNodeOtherThanSysfsIsAnIdentityError) {
    auto s = with_healthy_rocm_smi(snap(kMi300x8));
    s.rocm_smi.devices[1].unique_id = s.rocm_smi.devices[4].unique_id;
    auto fs = findings(s);
    auto* f = find(fs, "driver.rocm_smi_identity_mismatch");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->subjects[0].pci, s.rocm_smi.devices[1].pci);
    ASSERT_EQ(f->evidence.size(), 2u);
    EXPECT_EQ(f->evidence[0].value, s.rocm_smi.devices[4].unique_id);
    EXPECT_EQ(f->evidence[1].value, s.module.amd_gpus[1].unique_id);

    auto t = with_healthy_rocm_smi(snap(kMi300x8));
    t.rocm_smi.devices[2].render_minor = 200;
    EXPECT_EQ(count(findings(t), "driver.rocm_smi_identity_mismatch"), 1u);
}

TEST(AmdRocmSmi, UncorrectableEccIsAnErrorOnThatGpuCorrectableIsNot) {
    auto s = with_healthy_rocm_smi(snap(kMi300x8));
    s.rocm_smi.devices[5].ecc = {{"UMC", 40, 0}, {"GFX", 7, 0}};
    EXPECT_FALSE(find(findings(s), "driver.ecc_uncorrected"));
    s.rocm_smi.devices[5].ecc = {{"UMC", 40, 2}, {"XGMI_WAFL", 0, 1}};
    auto fs = findings(s);
    auto* f = find(fs, "driver.ecc_uncorrected");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->subjects[0].pci, s.rocm_smi.devices[5].pci);
    EXPECT_NE(f->message.find("3 uncorrectable"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("UMC 2, XGMI_WAFL 1"), std::string::npos) << f->message;
}

TEST(AmdRocmSmi, InitFailureAndALibraryThatDidNotLoad) {
    auto s = with_healthy_rocm_smi(snap(kMi300x8));
    s.rocm_smi.devices.clear();
    s.rocm_smi.device_count.reset();
    s.rocm_smi.init_result = rsmi::PERMISSION;
    s.rocm_smi.init_error = "RSMI_STATUS_PERMISSION (4)";
    auto fs = findings(s);
    auto* f = find(fs, "driver.rocm_smi_init_failed");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->evidence[0].value.find("RSMI_STATUS_PERMISSION"), std::string::npos);
    EXPECT_FALSE(find(fs, "driver.rocm_smi_missing_gpu"));

    // Not loadable while ROCm is installed: a warning; on a node without ROCm nothing should have answered.
    auto t = with_healthy_rocm_smi(snap(kMi300x8));
    t.rocm_smi = {};
    t.rocm_smi.probed = true;
    t.rocm_smi.load_error = "librocm_smi64.so.7: cannot open shared object file";
    ASSERT_FALSE(t.libraries.rocm_installs.empty());
    EXPECT_TRUE(find(findings(t), "driver.rocm_smi_not_loaded"));
    t.libraries.rocm_installs.clear();
    EXPECT_FALSE(find(findings(t), "driver.rocm_smi_not_loaded"));
}

TEST(AmdRocmSmi, InASnapshotOnlyWhenAsked) {
    auto s = snap(kMi300x8);
    EXPECT_FALSE(snapshot_to_json(s).contains("rocm_smi"));
    auto asked = with_healthy_rocm_smi(s);
    auto j = snapshot_to_json(asked);
    ASSERT_TRUE(j.contains("rocm_smi"));
    EXPECT_EQ(j["rocm_smi"]["devices"].size(), 8u);
    auto back = snapshot_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_TRUE(back->rocm_smi.probed);
    EXPECT_EQ(back->rocm_smi.devices[7].unique_id, asked.rocm_smi.devices[7].unique_id);
    EXPECT_FALSE(snapshot_from_json(snapshot_to_json(s))->rocm_smi.probed);
}

}  // namespace GPUDX_UNITY_ID
