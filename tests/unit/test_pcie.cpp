#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rules/engine/check_context.hpp"
#include "collect/collectors.hpp"
#include "collect/pci_ids.hpp"
#include "collect/pcie.hpp"

using namespace gpudx;
namespace fs = std::filesystem;

namespace gpudx {
void check_pcie(const CheckContext&, std::vector<Finding>&);
}

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const std::string kDevDir06 = "sys/devices/pci0000:00/0000:00:06.0";

// A writable copy of the capture, removed when the test ends.
struct FixtureCopy {
    fs::path dir;
    explicit FixtureCopy(const std::string& name) {
        dir = fs::temp_directory_path() / ("gpudx-pcie-" + name + "-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::copy(kH200, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    }
    ~FixtureCopy() { fs::remove_all(dir); }
    void write(const std::string& rel, const std::string& text) const {
        fs::create_directories((dir / rel).parent_path());
        std::ofstream(dir / rel, std::ios::binary) << text;
    }
};

PcieLayer collect(const std::string& root_dir, CollectorStatus* status = nullptr) {
    Root root(root_dir);
    CollectOptions opts;
    CollectContext ctx{root, opts};
    PcieLayer layer;
    auto st = collect_pcie(ctx, layer);
    if (status) *status = st;
    return layer;
}

const PciDevice* device(const PcieLayer& l, std::string_view addr) {
    for (auto& d : l.devices)
        if (d.address == addr) return &d;
    return nullptr;
}

std::vector<Finding> run_checks(const Snapshot& s, std::optional<unsigned> expect = {}) {
    DiagnoseOptions o;
    o.expect_gpus = expect;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    check_pcie(ctx, out);
    return out;
}

const Finding* find(const std::vector<Finding>& fs_, std::string_view id) {
    for (auto& f : fs_)
        if (f.id == id) return &f;
    return nullptr;
}

Snapshot snapshot_of(const std::string& root_dir) {
    Snapshot s;
    auto st = CollectorStatus{};
    s.pcie = collect(root_dir, &st);
    s.collectors.push_back(st);
    return s;
}
}  // namespace

TEST(PcieParse, LinkSpeedFromKernelText) {
    EXPECT_DOUBLE_EQ(*parse_link_speed("32.0 GT/s PCIe\n"), 32.0);
    EXPECT_DOUBLE_EQ(*parse_link_speed("2.5 GT/s"), 2.5);
    EXPECT_DOUBLE_EQ(*parse_link_speed("8 GT/s"), 8.0);
    EXPECT_DOUBLE_EQ(*parse_link_speed("16.0 GT/s PCIe"), 16.0);
    EXPECT_FALSE(parse_link_speed("Unknown"));
    EXPECT_FALSE(parse_link_speed("Unknown speed"));
    EXPECT_FALSE(parse_link_speed(""));
    EXPECT_FALSE(parse_link_speed("fast GT/s"));
}

TEST(PcieParse, AerCountersIncludingTotals) {
    auto c = parse_aer_counters(
        "Undefined 0\nDLP 0\nSDES 0\nTLP 2\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 1\n"
        "ECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\n"
        "PoisonTLPBlocked 0\nTOTAL_ERR_FATAL 3\n");
    EXPECT_EQ(c.at("TLP"), 2u);
    EXPECT_EQ(c.at("MalfTLP"), 1u);
    EXPECT_EQ(c.at("TOTAL_ERR_FATAL"), 3u);
    EXPECT_EQ(c.size(), 19u);
    // Bad lines are skipped, the rest kept.
    auto bad = parse_aer_counters("RxErr 5\ngarbage\nBadTLP x\nBadDLLP 7 extra\nTOTAL_ERR_COR 5\n");
    EXPECT_EQ(bad.size(), 2u);
    EXPECT_EQ(bad.at("RxErr"), 5u);
}

TEST(PcieParse, SysfsHexAndClasses) {
    EXPECT_EQ(*parse_sysfs_hex("0x10de\n"), 0x10deu);
    EXPECT_EQ(*parse_sysfs_hex("0x030200"), 0x030200u);
    EXPECT_FALSE(parse_sysfs_hex("10de"));
    EXPECT_FALSE(parse_sysfs_hex("0xzz"));
    EXPECT_TRUE(is_gpu_class(0x10de, 0x030200));
    EXPECT_TRUE(is_gpu_class(0x10de, 0x030000));
    EXPECT_TRUE(is_gpu_class(0x1002, 0x038000));
    EXPECT_FALSE(is_gpu_class(0x8086, 0x030000));  // Intel display: not a compute GPU here
    EXPECT_FALSE(is_gpu_class(0x10de, 0x068000));
    EXPECT_TRUE(is_nvswitch_class(0x10de, 0x068000));
    EXPECT_FALSE(is_nvswitch_class(0x1002, 0x068000));
}

TEST(PcieParse, UeventIdentity) {
    auto u = parse_pci_uevent("DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2335\nPCI_SUBSYS_ID=10DE:18BF\n"
                              "PCI_SLOT_NAME=0000:00:06.0\nMODALIAS=pci:v000010DEd00002335sv000010DEsd000018BFbc03sc02i00\n");
    EXPECT_EQ(u.vendor_id, 0x10deu);
    EXPECT_EQ(u.device_id, 0x2335u);
    EXPECT_EQ(u.subsystem_device_id, 0x18bfu);
    EXPECT_EQ(u.class_code, 0x030200u);
    EXPECT_EQ(u.driver, "nvidia");
    auto unbound = parse_pci_uevent("PCI_CLASS=60000\nPCI_ID=8086:0D57\nPCI_ID_BAD=x\n");
    EXPECT_EQ(unbound.driver, "");
    EXPECT_EQ(unbound.class_code, 0x060000u);
    EXPECT_FALSE(parse_pci_uevent("PCI_ID=10DE\n").vendor_id);
}

TEST(PcieParse, ParentFromCanonicalPath) {
    EXPECT_EQ(parent_from_sysfs_path("/sys/devices/pci0000:00/0000:00:06.0"), "");
    EXPECT_EQ(parent_from_sysfs_path("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"),
              "0000:02:08.0");
    EXPECT_EQ(parent_from_sysfs_path("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0"), "0000:00:01.0");
}

TEST(PcieParse, PciIdsLooksUpOnlyWhatIsAsked) {
    const char* text =
        "# comment\n"
        "#\t2335  not a device\n"
        "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n"
        "\t74a1  Aqua Vanjaram [Instinct MI300X]\n"
        "10de  NVIDIA Corporation\n"
        "\t2330  GH100 [H100 SXM5 80GB]\n"
        "\t2335  GH100 [H200 SXM 141GB]\n"
        "\t\t10de 18be  H200 SXM\n"
        "\t22a3  GH100 [H100 NVSwitch]\n"
        "1af4  Red Hat, Inc.\n"
        "\t1000  Virtio network device\n"
        "C 03  Display controller\n"
        "\t02  3D controller\n";
    auto n = parse_pci_ids(text, {{0x10de, 0x2335}, {0x1af4, 0x1000}, {0x1002, 0x2335}, {0x8086, 0x1234}});
    EXPECT_EQ(n.vendors.at(0x10de), "NVIDIA Corporation");
    EXPECT_EQ(n.devices.at({0x10de, 0x2335}), "GH100 [H200 SXM 141GB]");
    EXPECT_EQ(n.devices.at({0x1af4, 0x1000}), "Virtio network device");
    EXPECT_EQ(n.vendors.at(0x1002), "Advanced Micro Devices, Inc. [AMD/ATI]");
    EXPECT_FALSE(n.devices.count({0x1002, 0x2335}));  // 2335 belongs to NVIDIA's block, not AMD's
    EXPECT_FALSE(n.vendors.count(0x8086));
}

TEST(PcieCollect, ReadsTheH200Capture) {
    CollectorStatus st;
    auto l = collect(kH200, &st);
    EXPECT_EQ(st.state, CollectorState::ok) << st.message;
    EXPECT_TRUE(st.problems.empty()) << st.problems[0].path << ": " << st.problems[0].message;
    ASSERT_EQ(l.devices.size(), 8u);
    EXPECT_EQ(l.gpus, (std::vector<std::string>{"0000:00:06.0", "0000:00:07.0"}));
    EXPECT_TRUE(l.nvswitches.empty());
    auto* g = device(l, "0000:00:06.0");
    ASSERT_TRUE(g);
    EXPECT_EQ(g->vendor_id, 0x10deu);
    EXPECT_EQ(g->device_id, 0x2335u);
    EXPECT_EQ(g->subsystem_device_id, 0x18bfu);
    EXPECT_EQ(g->class_code, 0x030200u);
    EXPECT_EQ(g->revision, 0xa1u);
    EXPECT_EQ(g->driver, "nvidia");
    EXPECT_EQ(g->numa_node, -1);
    EXPECT_EQ(g->link_current.speed_gts, 32.0);
    EXPECT_EQ(g->link_current.speed_text, "32.0 GT/s PCIe");
    EXPECT_EQ(g->link_max.width, 16u);
    EXPECT_EQ(g->parent, "");
    EXPECT_FALSE(g->config_unreadable);
    EXPECT_TRUE(g->is_gpu);
    // A virtio device without PCIe link attributes is still listed, without a link.
    auto* v = device(l, "0000:00:01.0");
    ASSERT_TRUE(v);
    EXPECT_FALSE(v->is_gpu);
    EXPECT_FALSE(v->link_current.width);
    EXPECT_EQ(v->vendor_id, 0x1af4u);
}

TEST(PcieCollect, FaultsFromAModifiedCapture) {
    FixtureCopy fx("faults");
    fx.write(kDevDir06 + "/config", std::string("\xff\xff\xff\xff", 4));
    fx.write("sys/devices/pci0000:00/0000:00:07.0/current_link_width", "8\n");
    fx.write("sys/devices/pci0000:00/0000:00:07.0/aer_dev_fatal", "DLP 1\nTOTAL_ERR_FATAL 1\n");
    fx.write("sys/devices/pci0000:00/0000:00:07.0/aer_dev_nonfatal", "CmpltTO 4\nTOTAL_ERR_NONFATAL 4\n");
    fx.write("sys/bus/pci/slots/17/address", "0000:00:07\n");
    // An attribute that cannot be read: a directory where a file should be.
    fs::remove(fx.dir / kDevDir06 / "revision");
    fs::create_directory(fx.dir / kDevDir06 / "revision");
    // A uevent without ids: the separate attribute files are read instead.
    fx.write("sys/devices/pci0000:00/0000:00:05.0/uevent", "garbage\n");

    CollectorStatus st;
    auto l = collect(fx.dir, &st);
    EXPECT_EQ(st.state, CollectorState::ok);
    ASSERT_EQ(l.devices.size(), 8u);
    EXPECT_TRUE(device(l, "0000:00:06.0")->config_unreadable);
    auto* g7 = device(l, "0000:00:07.0");
    EXPECT_EQ(g7->slot, "17");
    EXPECT_EQ(g7->aer_fatal.at("TOTAL_ERR_FATAL"), 1u);
    EXPECT_EQ(g7->link_current.width, 8u);
    ASSERT_EQ(st.problems.size(), 1u);
    EXPECT_EQ(st.problems[0].path, "/sys/bus/pci/devices/0000:00:06.0/revision");
    EXPECT_FALSE(device(l, "0000:00:06.0")->revision);  // still listed, without it
    EXPECT_EQ(device(l, "0000:00:05.0")->vendor_id, 0x1af4u);
    EXPECT_EQ(device(l, "0000:00:05.0")->driver, "virtio-pci");

    Snapshot s;
    s.pcie = l;
    s.collectors.push_back(st);
    auto f = run_checks(s);
    auto* off = find(f, "pcie.fell_off_bus");
    ASSERT_TRUE(off);
    EXPECT_EQ(off->severity, Severity::error);
    ASSERT_EQ(off->subjects.size(), 1u);
    EXPECT_EQ(off->subjects[0].pci, "0000:00:06.0");
    auto* link = find(f, "pcie.link_degraded");
    ASSERT_TRUE(link);
    EXPECT_EQ(link->severity, Severity::warning);
    EXPECT_EQ(link->subjects[0].pci, "0000:00:07.0");
    EXPECT_EQ(find(f, "pcie.aer_fatal")->severity, Severity::error);
    EXPECT_EQ(find(f, "pcie.aer_nonfatal")->severity, Severity::warning);
    EXPECT_FALSE(find(f, "pcie.no_gpu"));
}

TEST(PcieChecks, HealthyCaptureHasNoFindings) {
    auto s = snapshot_of(kH200);
    EXPECT_TRUE(run_checks(s, 2u).empty());
}

TEST(PcieChecks, MissingGpuNamedFromTheDriverRecord) {
    auto s = snapshot_of(kH200);
    s.pcie.gpus = {"0000:00:06.0"};
    NvidiaProcGpu g;
    g.address = "0000:00:07.0";
    g.uuid = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";
    s.module.nvidia_gpus.push_back(g);
    auto f = run_checks(s, 2u);
    auto* m = find(f, "pcie.gpu_missing");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->severity, Severity::error);
    ASSERT_EQ(m->subjects.size(), 1u);
    EXPECT_EQ(m->subjects[0].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    EXPECT_NE(m->message.find("1 of 2"), std::string::npos);
    // Without any record of the card, only the count.
    s.module.nvidia_gpus.clear();
    f = run_checks(s, 2u);
    ASSERT_TRUE(find(f, "pcie.gpu_missing"));
    EXPECT_TRUE(find(f, "pcie.gpu_missing")->subjects.empty());
    EXPECT_FALSE(find(run_checks(s), "pcie.gpu_missing"));  // no --expect-gpus: no count rule
}

TEST(PcieChecks, BindingRules) {
    auto s = snapshot_of(kH200);
    for (auto& d : s.pcie.devices) {
        if (d.address == "0000:00:06.0") d.driver = "nouveau";
        if (d.address == "0000:00:07.0") d.driver = "";
    }
    CollectorStatus mod = status_ok(Collector::module);
    s.collectors.push_back(mod);
    s.module.loaded.push_back({"nvidia", 1, "Live", "(O)", "580.159.04"});
    auto f = run_checks(s);
    ASSERT_TRUE(find(f, "pcie.nouveau_bound"));
    EXPECT_EQ(find(f, "pcie.nouveau_bound")->subjects[0].pci, "0000:00:06.0");
    ASSERT_TRUE(find(f, "pcie.gpu_no_driver"));
    EXPECT_EQ(find(f, "pcie.gpu_no_driver")->subjects[0].pci, "0000:00:07.0");
    // nvidia not loaded: the unbound card is the module layer's finding, not a PCIe one.
    s.module.loaded.clear();
    EXPECT_FALSE(find(run_checks(s), "pcie.gpu_no_driver"));
}

TEST(PcieChecks, NoDataIsNotAnEmptyBus) {
    Snapshot s;
    s.collectors.push_back(status_no_data(Collector::pcie, "no PCI bus in this root"));
    EXPECT_TRUE(run_checks(s).empty());
}

}  // namespace GPUDX_UNITY_ID
