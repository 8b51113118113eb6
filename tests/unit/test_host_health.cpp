// The host-side health checks of docs/host-health.md: PCIe AER counters read twice, InfiniBand/RoCE ports, and the
// fabric manager and IMEX services; each collector against --root trees, each rule firing and staying silent.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "collect/collectors.hpp"
#include "collect/infiniband.hpp"
#include "collect/pcie.hpp"
#include "collect/services.hpp"
#include "model/infiniband.hpp"
#include "rules/engine/check_context.hpp"

using namespace gpudx;
namespace fs = std::filesystem;

namespace gpudx {
void check_pcie(const CheckContext&, std::vector<Finding>&);
}

namespace GPUDX_UNITY_ID {
namespace {

const std::string kFixtures = GPUDX_TEST_FIXTURES;
const std::string kH200 = kFixtures + "/h200x2";
const std::string kIb = kFixtures + "/infiniband-procfs";
const std::string kGpu06 = "sys/devices/pci0000:00/0000:00:06.0";
const std::string kLater06 = "_samples/later/sys/bus/pci/devices/0000:00:06.0";

struct TreeCopy {
    fs::path dir;
    TreeCopy(const std::string& from, const std::string& name) {
        dir = fs::temp_directory_path() / ("gpudx-hosthealth-" + name + "-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::copy(from, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    }
    // An empty tree, for one built file by file.
    explicit TreeCopy(const std::string& name) {
        dir = fs::temp_directory_path() / ("gpudx-hosthealth-" + name + "-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~TreeCopy() { fs::remove_all(dir); }
    void write(const std::string& rel, const std::string& text) const {
        fs::create_directories((dir / rel).parent_path());
        std::ofstream(dir / rel, std::ios::binary) << text;
    }
};

const Finding* find(const std::vector<Finding>& fs_, std::string_view id) {
    for (auto& f : fs_)
        if (f.id == id) return &f;
    return nullptr;
}

// Runs every rule family over the snapshot, as diagnose does.
std::vector<Finding> all_findings(const Snapshot& s) {
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    for (auto& fam : check_families()) fam.run(ctx, out);
    return out;
}

Snapshot collect_host(const std::string& dir, std::chrono::milliseconds interval = std::chrono::milliseconds(1000)) {
    Root root(dir);
    CollectOptions o;
    o.counter_interval = interval;
    CollectContext ctx{root, o};
    Snapshot s;
    s.collectors.push_back(collect_pcie(ctx, s.pcie));
    s.collectors.push_back(collect_infiniband(ctx, s.infiniband));
    s.collectors.push_back(collect_services(ctx, s.pcie, s.devices, s.services));
    return s;
}

std::string correctable(int bad_tlp) {
    return "RxErr 0\nBadTLP " + std::to_string(bad_tlp) + "\nBadDLLP 0\nTOTAL_ERR_COR " + std::to_string(bad_tlp) + "\n";
}

}  // namespace

// ---- AER ----

TEST(AerCounters, RealCapturesHaveNoAerFilesAndTakeNoSecondReading) {
    for (auto dir : {kH200, kFixtures + "/h200x1-gathered"}) {
        auto s = collect_host(dir);
        EXPECT_FALSE(s.pcie.aer_sample_interval_ms) << dir;
        for (auto& d : s.pcie.devices) {
            EXPECT_TRUE(d.aer_correctable.empty()) << d.address;  // absent: not available, not zero
            EXPECT_FALSE(d.aer_later) << d.address;
        }
        auto f = all_findings(s);
        EXPECT_FALSE(find(f, "pcie.aer_history"));
        EXPECT_FALSE(find(f, "pcie.aer_correctable_growing"));
    }
}

TEST(AerCounters, GrowthBetweenReadingsIsAFindingNamingTheCounters) {
    TreeCopy t(kH200, "aer-grow");
    t.write(kGpu06 + "/aer_dev_correctable", correctable(3));
    t.write(kGpu06 + "/aer_dev_fatal", "DLP 0\nTOTAL_ERR_FATAL 0\n");
    t.write(kLater06 + "/aer_dev_correctable", correctable(9));
    t.write(kLater06 + "/aer_dev_fatal", "DLP 1\nTOTAL_ERR_FATAL 1\n");
    auto s = collect_host(t.dir.string());
    ASSERT_TRUE(s.pcie.aer_sample_interval_ms);
    EXPECT_EQ(*s.pcie.aer_sample_interval_ms, 1000);
    auto f = all_findings(s);
    auto* cor = find(f, "pcie.aer_correctable_growing");
    ASSERT_TRUE(cor);
    EXPECT_EQ(cor->severity, Severity::warning);
    EXPECT_NE(cor->message.find("BadTLP 3 -> 9"), std::string::npos) << cor->message;
    ASSERT_EQ(cor->subjects.size(), 1u);
    EXPECT_EQ(cor->subjects[0].pci, "0000:00:06.0");
    auto* uncor = find(f, "pcie.aer_uncorrectable_growing");
    ASSERT_TRUE(uncor);
    EXPECT_EQ(uncor->severity, Severity::error);
    EXPECT_NE(uncor->message.find("DLP 0 -> 1"), std::string::npos) << uncor->message;
    EXPECT_EQ(uncor->evidence.at(0).source, "/sys/bus/pci/devices/0000:00:06.0/aer_dev_fatal");
    EXPECT_FALSE(find(f, "pcie.aer_history"));
}

TEST(AerCounters, OldCountsThatDoNotGrowAreHistoryAndTheNodeStaysHealthy) {
    TreeCopy t(kH200, "aer-steady");
    t.write(kGpu06 + "/aer_dev_correctable", correctable(3));
    t.write(kLater06 + "/aer_dev_correctable", correctable(3));
    auto f = all_findings(collect_host(t.dir.string()));
    auto* h = find(f, "pcie.aer_history");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->severity, Severity::info);
    for (auto& x : f) EXPECT_EQ(x.severity, Severity::info) << x.id;
}

TEST(AerCounters, WithoutASecondReadingUncorrectableCountsKeepTheirWeight) {
    TreeCopy t(kH200, "aer-once");
    t.write(kGpu06 + "/aer_dev_nonfatal", "CmpltTO 2\nTOTAL_ERR_NONFATAL 2\n");
    t.write(kGpu06 + "/aer_dev_correctable", correctable(3));
    // --health-interval 0: one reading; and a replay without _samples/later: the same.
    for (auto interval : {0, 1000}) {
        auto s = collect_host(t.dir.string(), std::chrono::milliseconds(interval));
        EXPECT_FALSE(s.pcie.aer_sample_interval_ms);
        auto f = all_findings(s);
        ASSERT_TRUE(find(f, "pcie.aer_nonfatal"));
        EXPECT_EQ(find(f, "pcie.aer_nonfatal")->severity, Severity::warning);
        EXPECT_FALSE(find(f, "pcie.aer_history"));  // growth unknown is not "history"
        EXPECT_FALSE(find(f, "pcie.aer_correctable_growing"));
    }
}

TEST(AerCounters, RootPortTotalsAreRead) {
    TreeCopy t(kH200, "aer-rootport");
    t.write(kGpu06 + "/aer_rootport_total_err_cor", "4\n");
    t.write(kLater06 + "/aer_rootport_total_err_cor", "6\n");
    auto s = collect_host(t.dir.string());
    const PciDevice* d = nullptr;
    for (auto& x : s.pcie.devices)
        if (x.address == "0000:00:06.0") d = &x;
    ASSERT_TRUE(d);
    EXPECT_EQ(d->aer_rootport.at("total_err_cor"), 4u);
    ASSERT_TRUE(d->aer_later);
    EXPECT_EQ(d->aer_later->rootport.at("total_err_cor"), 6u);
    auto f = all_findings(s);  // find() points into it: it must outlive the pointer
    auto* cor = find(f, "pcie.aer_correctable_growing");
    ASSERT_TRUE(cor);
    EXPECT_EQ(cor->evidence.at(0).source, "/sys/bus/pci/devices/0000:00:06.0/aer_rootport_total_err_cor");
}

// The AER files as real machines print them. Two public readings:
//  - a GPU's function on a 6.x kernel, short names (github.com/hakandundar34coding/system-monitoring-center
//    issue #45, `grep . /sys/class/drm/card1/device/*`): "RxErr 0" ... "TOTAL_ERR_COR 0", "Undefined 0", "DLP 0" ...
//  - the kernel's own sample (Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, `cat aer_dev_correctable`
//    on a root port 0000:00:1c.0), with the long names of the 4.19 kernels that introduced the files, blanks and
//    all: "Receiver Error 2", "RELAY_NUM Rollover 0", "TOTAL_ERR_COR 2".
TEST(AerCounters, ParsesTheShortNamesOfCurrentKernels) {
    auto c = parse_aer_counters(
        "RxErr 0\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\n"
        "TOTAL_ERR_COR 0\n");
    EXPECT_EQ(c.size(), 9u);
    EXPECT_EQ(c.at("HeaderOF"), 0u);
    EXPECT_EQ(c.at("TOTAL_ERR_COR"), 0u);
    auto f = parse_aer_counters("Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\n"
                                "RxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\n"
                                "AtomicOpBlocked 0\nTLPBlockedErr 0\nTOTAL_ERR_FATAL 0\n");
    EXPECT_EQ(f.size(), 18u);
    EXPECT_EQ(f.at("TOTAL_ERR_FATAL"), 0u);
}

TEST(AerCounters, ParsesTheLongNamesOf419Kernels) {
    auto c = parse_aer_counters(
        "Receiver Error 2\nBad TLP 0\nBad DLLP 0\nRELAY_NUM Rollover 0\nReplay Timer Timeout 0\n"
        "Advisory Non-Fatal 0\nCorrected Internal Error 0\nHeader Log Overflow 0\nTOTAL_ERR_COR 2\n");
    ASSERT_EQ(c.size(), 9u);
    EXPECT_EQ(c.at("Receiver Error"), 2u);
    EXPECT_EQ(c.at("RELAY_NUM Rollover"), 0u);
    EXPECT_EQ(c.at("TOTAL_ERR_COR"), 2u);
    // A line without a count, or with a word for one, is no counter.
    EXPECT_TRUE(parse_aer_counters("Receiver Error\nBad TLP x\n\n").empty());
}

// A GPU behind a PCIe switch: root port 0000:00:01.0, switch upstream port 0000:01:00.0, downstream port
// 0000:02:00.0, GPU 0000:03:00.0, each with its AER files (issue #31 item 3: the whole path to the root port).
struct SwitchedGpuTree {
    TreeCopy t{"aer-path"};
    static constexpr const char* kChain[] = {"0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"};
    SwitchedGpuTree() {
        std::string dir = "sys/devices/pci0000:00";
        for (std::string addr : kChain) {
            dir += "/" + addr;
            bool gpu = addr == "0000:03:00.0";
            t.write(dir + "/uevent", gpu ? "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2335\n"
                                         : "DRIVER=pcieport\nPCI_CLASS=60400\nPCI_ID=1000:C030\n");
            t.write(dir + "/numa_node", "0\n");
            // Recorded links are files holding their target (docs/capture-format.md).
            t.write("sys/bus/pci/devices/" + addr, "../../../" + dir.substr(4) + "\n");
            for (auto which : {"", "_samples/later/"}) {
                std::string base = std::string(which) + (which[0] ? "sys/bus/pci/devices/" + addr : dir);
                t.write(base + "/aer_dev_correctable", "RxErr 0\nBadTLP 1\nTOTAL_ERR_COR 1\n");
                t.write(base + "/aer_dev_fatal", "DLP 0\nTOTAL_ERR_FATAL 0\n");
                t.write(base + "/aer_dev_nonfatal", "CmpltTO 0\nTOTAL_ERR_NONFATAL 0\n");
            }
        }
        t.write(dir_of("0000:00:01.0") + "/aer_rootport_total_err_cor", "1\n");
        t.write("_samples/later/sys/bus/pci/devices/0000:00:01.0/aer_rootport_total_err_cor", "1\n");
    }
    static std::string dir_of(std::string_view addr) {
        std::string dir = "sys/devices/pci0000:00";
        for (std::string a : kChain) {
            dir += "/" + a;
            if (a == addr) break;
        }
        return dir;
    }
    void later(std::string_view addr, const std::string& file, const std::string& text) {
        t.write("_samples/later/sys/bus/pci/devices/" + std::string(addr) + "/" + file, text);
    }
};

TEST(AerCounters, EveryPortOnTheGpusPathToTheRootPortIsReadAndGrowthNamesThePort) {
    SwitchedGpuTree tree;
    tree.later("0000:02:00.0", "aer_dev_correctable", "RxErr 0\nBadTLP 5\nTOTAL_ERR_COR 5\n");
    auto s = collect_host(tree.t.dir.string());
    ASSERT_EQ(s.pcie.gpus, std::vector<std::string>{"0000:03:00.0"});
    for (auto& d : s.pcie.devices) {
        EXPECT_EQ(d.aer_correctable.at("BadTLP"), 1u) << d.address;
        ASSERT_TRUE(d.aer_later) << d.address;  // each port of the path read twice, not only the one that grew
    }
    auto f = all_findings(s);
    std::vector<const Finding*> grown;
    for (auto& x : f)
        if (x.id == "pcie.aer_correctable_growing") grown.push_back(&x);
    ASSERT_EQ(grown.size(), 1u);
    EXPECT_NE(grown[0]->message.find("switch port 0000:02:00.0"), std::string::npos) << grown[0]->message;
    EXPECT_NE(grown[0]->message.find("BadTLP 1 -> 5"), std::string::npos) << grown[0]->message;
    ASSERT_EQ(grown[0]->subjects.size(), 1u);
    EXPECT_EQ(grown[0]->subjects[0].pci, "0000:03:00.0");  // the GPU whose traffic crosses the port
    EXPECT_EQ(grown[0]->evidence.at(0).source, "/sys/bus/pci/devices/0000:02:00.0/aer_dev_correctable");
    // The ports whose counts did not grow are history, each named.
    int history = 0;
    for (auto& x : f) history += x.id == "pcie.aer_history";
    EXPECT_EQ(history, 3);
}

TEST(AerCounters, RootPortTotalsGrowingNameTheRootPort) {
    SwitchedGpuTree tree;
    tree.later("0000:00:01.0", "aer_rootport_total_err_cor", "4\n");
    auto f = all_findings(collect_host(tree.t.dir.string()));
    auto* x = find(f, "pcie.aer_correctable_growing");
    ASSERT_TRUE(x);
    EXPECT_NE(x->message.find("root port 0000:00:01.0"), std::string::npos) << x->message;
    EXPECT_NE(x->message.find("total_err_cor 1 -> 4"), std::string::npos) << x->message;
}

TEST(AerCounters, LongNamesGrowingAreNamedAsTheKernelWroteThem) {
    SwitchedGpuTree tree;
    for (std::string addr : {"0000:03:00.0"}) {
        tree.t.write(SwitchedGpuTree::dir_of(addr) + "/aer_dev_correctable", "Receiver Error 2\nBad TLP 0\nTOTAL_ERR_COR 2\n");
        tree.later(addr, "aer_dev_correctable", "Receiver Error 9\nBad TLP 0\nTOTAL_ERR_COR 9\n");
    }
    auto f = all_findings(collect_host(tree.t.dir.string()));
    auto* x = find(f, "pcie.aer_correctable_growing");
    ASSERT_TRUE(x);
    EXPECT_NE(x->message.find("Receiver Error 2 -> 9"), std::string::npos) << x->message;
}

// ---- InfiniBand ----

TEST(InfinibandParse, StateAndRate) {
    auto s = parse_ib_state("4: ACTIVE\n");
    EXPECT_EQ(s.code, 4u);
    EXPECT_EQ(s.name, "ACTIVE");
    s = parse_ib_state("5: LinkUp");
    EXPECT_EQ(s.code, 5u);
    EXPECT_EQ(s.name, "LinkUp");
    s = parse_ib_state("Polling");
    EXPECT_FALSE(s.code);
    EXPECT_EQ(s.name, "Polling");
    EXPECT_EQ(parse_ib_rate("100 Gb/sec (4X EDR)\n"), 100.0);
    EXPECT_EQ(parse_ib_rate("2.5 Gb/sec (1X SDR)"), 2.5);
    EXPECT_FALSE(parse_ib_rate("garbage"));
    EXPECT_FALSE(parse_ib_rate(""));
}

TEST(InfinibandCollect, ReadsTheProcfsTreeOfRealHosts) {
    auto s = collect_host(kIb);
    EXPECT_EQ(s.collectors[1].state, CollectorState::ok);
    ASSERT_EQ(s.infiniband.devices.size(), 3u);
    auto& mlx4 = s.infiniband.devices[1];
    EXPECT_EQ(mlx4.name, "mlx4_0");
    ASSERT_EQ(mlx4.ports.size(), 2u);
    EXPECT_EQ(mlx4.ports[0].state, "ACTIVE");
    EXPECT_EQ(mlx4.ports[0].phys_state, "LinkUp");
    EXPECT_EQ(mlx4.ports[0].rate_gbps, 40.0);
    EXPECT_EQ(mlx4.ports[0].link_layer, "InfiniBand");
    EXPECT_EQ(mlx4.ports[0].counters.at("symbol_error"), 0u);
    EXPECT_FALSE(mlx4.ports[0].counters.count("port_rcv_data"));  // traffic counters are not kept
    EXPECT_TRUE(mlx4.ports[0].counters_later.empty());            // all zero: no second reading
    EXPECT_FALSE(s.infiniband.sample_interval_ms);
    EXPECT_TRUE(mlx4.pci.empty());  // the archive has no device links
    auto f = all_findings(s);
    for (auto& x : f) EXPECT_FALSE(x.id.starts_with("ib.")) << x.id << ": " << x.message;
}

TEST(InfinibandCollect, NoClassDirectoryIsNoData) {
    auto s = collect_host(kH200);
    EXPECT_EQ(s.collectors[1].state, CollectorState::no_data);
    EXPECT_TRUE(s.infiniband.devices.empty());
}

TEST(InfinibandRules, LinkUpButNotActiveIsAnError) {
    TreeCopy t(kIb, "ib-init");
    t.write("sys/class/infiniband/mlx5_0/ports/1/phys_state", "5: LinkUp\n");
    t.write("sys/class/infiniband/mlx5_0/ports/1/state", "2: INIT\n");
    auto f = all_findings(collect_host(t.dir.string()));
    auto* x = find(f, "ib.port_link_up_not_active");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->severity, Severity::error);
    EXPECT_NE(x->message.find("mlx5_0 port 1"), std::string::npos);
}

TEST(InfinibandRules, PhysicallyDownPortIsInfoWithoutARecord) {
    TreeCopy t(kIb, "ib-down");
    t.write("sys/class/infiniband/mlx4_0/ports/2/phys_state", "2: Polling\n");
    t.write("sys/class/infiniband/mlx4_0/ports/2/state", "1: DOWN\n");
    auto f = all_findings(collect_host(t.dir.string()));
    auto* x = find(f, "ib.port_down");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->severity, Severity::info);
    EXPECT_FALSE(find(f, "ib.port_link_up_not_active"));
}

TEST(InfinibandRules, GrowingErrorsWarnAndLinkDownedIsAnError) {
    TreeCopy t(kIb, "ib-grow");
    const std::string c = "sys/class/infiniband/mlx4_0/ports/1/counters/";
    fs::create_directories(t.dir / "_samples/later" / c);
    for (auto& e : fs::directory_iterator(t.dir / c)) fs::copy_file(e.path(), t.dir / "_samples/later" / c / e.path().filename());
    t.write(c + "symbol_error", "12\n");
    t.write("_samples/later/" + c + "symbol_error", "40\n");
    auto s = collect_host(t.dir.string());
    EXPECT_EQ(s.infiniband.sample_interval_ms, 1000.0);
    auto f = all_findings(s);
    auto* x = find(f, "ib.errors_growing");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->severity, Severity::warning);
    EXPECT_NE(x->message.find("symbol_error 12 -> 40"), std::string::npos) << x->message;

    t.write(c + "link_downed", "1\n");
    t.write("_samples/later/" + c + "link_downed", "2\n");
    f = all_findings(collect_host(t.dir.string()));
    ASSERT_TRUE(find(f, "ib.link_downed_growing"));
    EXPECT_EQ(find(f, "ib.link_downed_growing")->severity, Severity::error);
}

TEST(InfinibandRules, CountsWithoutGrowthAreHistory) {
    TreeCopy t(kIb, "ib-history");
    t.write("sys/class/infiniband/mlx4_0/ports/1/counters/symbol_error", "7\n");
    auto s = collect_host(t.dir.string());  // no recorded later reading: growth unknown
    EXPECT_TRUE(s.collectors[1].problems.empty()) << s.collectors[1].problems.front().path;  // not a read problem
    auto f = all_findings(s);
    auto* x = find(f, "ib.error_history");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->severity, Severity::info);
    EXPECT_FALSE(find(f, "ib.errors_growing"));
}

// Ports as real nodes print them. `ibstatus` prints the sysfs attributes as the kernel wrote them:
//  - github.com/deepseek-ai/DeepEP issue #17 (8x H20, BlueField-3, RoCE): mlx5_1 port 1 "state: 4: ACTIVE",
//    "phys state: 5: LinkUp", "rate: 400 Gb/sec (4X NDR)", "link_layer: Ethernet";
//  - github.com/NVIDIA/nccl issue #1866: mlx5_0 port 1 "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", Ethernet.
// And `ibstat` (which names the same values in words) in github.com/Mellanox/network-operator issue #249: mlx5_7
// port 1 "State: Down", "Physical state: LinkUp", "Rate: 200", "Link layer: InfiniBand", which the kernel's
// attributes write as "1: DOWN", "5: LinkUp", "200 Gb/sec (4X HDR)".
struct IbNode {
    TreeCopy t{"ib-real"};
    void port(const std::string& dev, const std::string& state, const std::string& phys, const std::string& rate,
              const std::string& layer) const {
        std::string p = "sys/class/infiniband/" + dev + "/ports/1/";
        t.write(p + "state", state + "\n");
        t.write(p + "phys_state", phys + "\n");
        t.write(p + "rate", rate + "\n");
        t.write(p + "link_layer", layer + "\n");
        for (auto c : kIbLinkErrorCounters) t.write(p + "counters/" + std::string(c), "0\n");
    }
};

const IbPort& port_of(const Snapshot& s, std::string_view dev) {
    for (auto& d : s.infiniband.devices)
        if (d.name == dev) return d.ports.at(0);
    throw std::runtime_error("no device " + std::string(dev));
}

TEST(InfinibandCollect, ReadsThePortsOfRealNodesAsIbstatusShowsThem) {
    IbNode n;
    n.port("mlx5_1", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "Ethernet");
    n.t.write("sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0", "eth1\n");
    n.port("mlx5_0", "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet");
    n.port("mlx5_7", "1: DOWN", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand");
    auto s = collect_host(n.t.dir.string());
    auto& ndr = port_of(s, "mlx5_1");
    EXPECT_EQ(ndr.state_code, 4u);
    EXPECT_EQ(ndr.state, "ACTIVE");
    EXPECT_EQ(ndr.phys_state_code, 5u);
    EXPECT_EQ(ndr.phys_state, "LinkUp");
    EXPECT_EQ(ndr.rate, "400 Gb/sec (4X NDR)");
    EXPECT_EQ(ndr.rate_gbps, 400.0);
    EXPECT_EQ(ndr.netdev, "eth1");
    EXPECT_TRUE(ndr.counters_unread.empty()) << ndr.counters_unread;
    EXPECT_EQ(port_of(s, "mlx5_0").rate_gbps, 100.0);
    auto& down = port_of(s, "mlx5_7");
    EXPECT_EQ(down.state, "DOWN");
    EXPECT_EQ(down.rate_gbps, 200.0);
    EXPECT_TRUE(down.netdev.empty());  // an InfiniBand port has no network interface of its own
    auto f = all_findings(s);
    auto* x = find(f, "ib.port_link_up_not_active");
    ASSERT_TRUE(x);
    EXPECT_NE(x->message.find("mlx5_7 port 1"), std::string::npos) << x->message;
    for (auto& y : f)
        if (y.id != "ib.port_link_up_not_active") EXPECT_FALSE(y.id.starts_with("ib.")) << y.id << ": " << y.message;
}

TEST(InfinibandCollect, RoceNetdevFallsBackToTheFunctionsOnlyInterface) {
    IbNode n;
    n.port("mlx5_0", "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet");
    // No gid_attrs (an older kernel): the PCI function's one network interface is the port's.
    n.t.write("sys/devices/pci0000:00/0000:00:0c.0/net/enp0s12np0/ifindex", "4\n");
    n.t.write("sys/class/infiniband/mlx5_0/device", "../../../devices/pci0000:00/0000:00:0c.0\n");
    EXPECT_EQ(port_of(collect_host(n.t.dir.string()), "mlx5_0").netdev, "enp0s12np0");
}

TEST(InfinibandCollect, CongestionCountersAloneCallForNoSecondReading) {
    TreeCopy t(kIb, "ib-discards");
    const std::string c = "sys/class/infiniband/mlx4_0/ports/1/counters/";
    t.write(c + "port_xmit_discards", "4242\n");  // a busy fabric's congestion, not a link fault
    t.write("_samples/later/" + c + "port_xmit_discards", "4300\n");
    auto s = collect_host(t.dir.string());
    EXPECT_FALSE(s.infiniband.sample_interval_ms);
    EXPECT_EQ(port_of(s, "mlx4_0").counters.at("port_xmit_discards"), 4242u);  // kept as evidence
    for (auto& f : all_findings(s)) EXPECT_FALSE(f.id.starts_with("ib.")) << f.id << ": " << f.message;
}

TEST(InfinibandRules, APortWithoutCountersIsNotEvaluatedNotHealthy) {
    IbNode n;
    n.port("rxe0", "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet");
    fs::remove_all(n.t.dir / "sys/class/infiniband/rxe0/ports/1/counters");
    auto s = collect_host(n.t.dir.string());
    EXPECT_NE(port_of(s, "rxe0").counters_unread.find("no counters/ directory"), std::string::npos);
    auto f = all_findings(s);
    auto* x = find(f, "ib.counters_not_read");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->severity, Severity::info);  // a driver that offers none is no fault
    EXPECT_NE(x->message.find("could not be evaluated"), std::string::npos) << x->message;
    EXPECT_FALSE(find(f, "ib.counters_unreadable"));
}

TEST(InfinibandRules, UnreadableCountersOfAnActivePortWarn) {
    IbNode n;
    n.port("mlx4_0", "4: ACTIVE", "5: LinkUp", "40 Gb/sec (4X QDR)", "InfiniBand");
    // What kernels before 5.x answered when the adapter's performance agent did not.
    n.t.write("sys/class/infiniband/mlx4_0/ports/1/counters/symbol_error", "N/A (no PMA)\n");
    auto s = collect_host(n.t.dir.string());
    EXPECT_EQ(port_of(s, "mlx4_0").counters_unread, "counters/symbol_error: not a counter: 'N/A (no PMA)'");
    auto f = all_findings(s);
    auto* x = find(f, "ib.counters_unreadable");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->severity, Severity::warning);
    EXPECT_FALSE(find(f, "ib.counters_not_read"));

    // The same port down: nothing crosses it, so not reading it is only noted.
    n.t.write("sys/class/infiniband/mlx4_0/ports/1/state", "1: DOWN\n");
    n.t.write("sys/class/infiniband/mlx4_0/ports/1/phys_state", "2: Polling\n");
    f = all_findings(collect_host(n.t.dir.string()));
    EXPECT_FALSE(find(f, "ib.counters_unreadable"));
    ASSERT_TRUE(find(f, "ib.counters_not_read"));
}

TEST(InfinibandRules, ACounterAtItsMaximumSaysItCannotShowGrowth) {
    IbNode n;
    n.port("mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand");
    n.t.write("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "65535\n");  // 16 bits, stopped
    auto f = all_findings(collect_host(n.t.dir.string()));
    auto* x = find(f, "ib.error_history");
    ASSERT_TRUE(x);
    EXPECT_NE(x->message.find("symbol_error at the counter's maximum"), std::string::npos) << x->message;
    EXPECT_EQ(ib_counter_max("local_link_integrity_errors"), 15u);
    EXPECT_EQ(ib_counter_max("link_downed"), 255u);
    EXPECT_FALSE(ib_counter_max("port_xmit_data"));

    n.t.write("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "65534\n");
    f = all_findings(collect_host(n.t.dir.string()));
    x = find(f, "ib.error_history");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->message.find("maximum"), std::string::npos) << x->message;
}

TEST(PciePlace, SwitchRootPortRootComplexAndSockets) {
    PcieLayer l;
    auto add = [&](std::string addr, std::string parent, int numa, bool gpu = false) {
        PciDevice d;
        d.address = addr;
        d.parent = parent;
        d.numa_node = numa;
        d.is_gpu = gpu;
        l.devices.push_back(d);
        if (gpu) l.gpus.push_back(addr);
    };
    add("0000:00:01.0", "", 0);                          // root port
    add("0000:01:00.0", "0000:00:01.0", 0);              // switch upstream port
    add("0000:02:00.0", "0000:01:00.0", 0);              // switch downstream ports
    add("0000:02:01.0", "0000:01:00.0", 0);
    add("0000:03:00.0", "0000:02:00.0", 0, true);        // GPU behind the switch
    add("0000:04:00.0", "0000:02:01.0", 0);              // NIC behind the same switch
    add("0000:00:02.0", "", 0);                          // another root port, same root complex
    add("0000:05:00.0", "0000:00:02.0", 0, true);
    add("0000:40:01.0", "", 0);                          // another root complex, same NUMA node
    add("0000:41:00.0", "0000:40:01.0", 0, true);
    add("0000:80:01.0", "", 1);                          // the other socket
    add("0000:81:00.0", "0000:80:01.0", 1, true);
    EXPECT_EQ(pcie_place(l, "0000:04:00.0", "0000:03:00.0"), PciePlace::same_switch);
    EXPECT_EQ(pcie_place(l, "0000:04:00.0", "0000:05:00.0"), PciePlace::same_root_complex);
    EXPECT_EQ(pcie_place(l, "0000:04:00.0", "0000:41:00.0"), PciePlace::same_numa_node);
    EXPECT_EQ(pcie_place(l, "0000:04:00.0", "0000:81:00.0"), PciePlace::across_sockets);
    EXPECT_EQ(pcie_place(l, "0000:04:00.0", "0000:99:00.0"), PciePlace::unknown);
    add("0000:06:00.0", "0000:00:02.0", 0);  // directly under a root port beside a GPU
    EXPECT_EQ(pcie_place(l, "0000:06:00.0", "0000:05:00.0"), PciePlace::same_root_port);
    auto near = gpus_by_distance(l, "0000:04:00.0");
    ASSERT_EQ(near.size(), 4u);
    EXPECT_EQ(near[0].gpu, "0000:03:00.0");
    EXPECT_EQ(near[3].gpu, "0000:81:00.0");
}

// ---- Fabric manager and IMEX ----

const char* kFailedFm =
    "ActiveState=failed\nExecMainStatus=1\nId=nvidia-fabricmanager.service\nLoadState=loaded\nResult=exit-code\n"
    "SubState=failed\nUnitFileState=enabled\n\nId=nvidia-imex.service\nLoadState=not-found\nActiveState=inactive\n";

TEST(ServicesParse, SystemctlShowBlocksByUnit) {
    auto units = parse_systemctl_show(kFailedFm);
    ASSERT_EQ(units.size(), 2u);
    EXPECT_EQ(units[0].name, "nvidia-fabricmanager.service");
    EXPECT_EQ(units[0].property("Result"), "exit-code");
    EXPECT_EQ(units[1].property("LoadState"), "not-found");
    EXPECT_EQ(units[0].property("Missing"), "");
    EXPECT_EQ(parse_systemctl_show(format_systemctl_show(units))[0].properties, units[0].properties);
    EXPECT_TRUE(parse_systemctl_show("no equals sign\n\n=x\n").empty());
}

struct NvswitchTree : TreeCopy {
    explicit NvswitchTree(const std::string& name) : TreeCopy(kH200, name) {
        const std::string a = "0000:00:08.0", dev = "sys/devices/pci0000:00/" + a;
        write(dev + "/uevent", "DRIVER=nvidia-nvswitch\nPCI_CLASS=68000\nPCI_ID=10DE:22A3\nPCI_SUBSYS_ID=10DE:1796\n");
        write("sys/bus/pci/devices/" + a, "../../../devices/pci0000:00/" + a);
    }
};

TEST(ServicesRules, NodeWithoutNvswitchIsNeverAskedNorWarned) {
    TreeCopy t(kH200, "fm-none");
    t.write("_commands/systemctl-show.txt", kFailedFm);  // even a failed unit in the record
    auto s = collect_host(t.dir.string());
    EXPECT_EQ(s.collectors[2].state, CollectorState::no_data);
    EXPECT_TRUE(s.services.units.empty());
    for (auto& x : all_findings(s)) EXPECT_FALSE(x.id.starts_with("services.")) << x.id;
}

TEST(ServicesRules, FailedFabricManagerOnAnNvswitchNodeIsAnError) {
    NvswitchTree t("fm-failed");
    t.write("_commands/systemctl-show.txt", kFailedFm);
    auto s = collect_host(t.dir.string());
    ASSERT_EQ(s.pcie.nvswitches.size(), 1u);
    EXPECT_EQ(s.collectors[2].state, CollectorState::ok);
    auto f = all_findings(s);
    auto* x = find(f, "services.fabric_manager_not_active");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->severity, Severity::error);
    EXPECT_NE(x->message.find("Result=exit-code"), std::string::npos) << x->message;
    EXPECT_NE(x->message.find("802"), std::string::npos);
    EXPECT_FALSE(find(f, "services.imex_not_active"));  // not installed: not expected
}

TEST(ServicesRules, RunningFabricManagerIsSilentAndUnknownIsAWarning) {
    NvswitchTree t("fm-running");
    auto f = all_findings(collect_host(t.dir.string()));  // no record: could not evaluate
    ASSERT_TRUE(find(f, "services.fabric_manager_unknown"));
    EXPECT_EQ(find(f, "services.fabric_manager_unknown")->severity, Severity::warning);
    t.write("_commands/systemctl-show.txt",
            "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=active\nSubState=running\n\n"
            "Id=nvidia-imex.service\nLoadState=loaded\nUnitFileState=enabled\nActiveState=failed\nResult=exit-code\n");
    f = all_findings(collect_host(t.dir.string()));
    EXPECT_FALSE(find(f, "services.fabric_manager_not_active"));
    EXPECT_FALSE(find(f, "services.fabric_manager_unknown"));
    ASSERT_TRUE(find(f, "services.imex_not_active"));
    EXPECT_EQ(find(f, "services.imex_not_active")->severity, Severity::warning);
}

}  // namespace GPUDX_UNITY_ID
