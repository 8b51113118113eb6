// What a node class expects besides its GPUs and versions (docs/baseline-matrix-fleet.md): NVLinks active on each
// GPU and InfiniBand/RoCE ports with their rate, judged by the matrix check; the families leaving those facts to it
// (one finding per fact); and the node record's NVLink remote ends, compared by `baseline diff`.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../fleet/h200x2_snapshot.hpp"
#include "fleet/fleet.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/held_to.hpp"
#include "rules/comparisons/matrix.hpp"
#include "rules/engine/diagnose.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
using namespace gpudx::testdata;

namespace {

const CalendarDate kToday{2026, 6, 1};

const std::string kHead = R"(schema_version = 1

[[class]]
name = "h200x2"
owner = "ops@example.com"
review_by = 2099-12-31

[class.match]
gpu_model = "NVIDIA H200*"
)";

Matrix matrix_with(const std::string& tail) {
    auto m = parse_matrix(kHead + tail, "m.toml");
    EXPECT_TRUE(m) << m.error().message;
    return m ? *m : Matrix{};
}

std::string error_of(const std::string& tail) {
    auto m = parse_matrix(kHead + tail, "m.toml");
    EXPECT_FALSE(m) << "parsed although it should not:\n" << tail;
    return m ? std::string() : m.error().message;
}

std::vector<std::string> ids(const std::vector<Finding>& fs) {
    std::vector<std::string> out;
    for (auto& f : fs) out.push_back(f.id);
    std::sort(out.begin(), out.end());
    return out;
}

const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
    auto it = std::find_if(fs.begin(), fs.end(), [&](auto& f) { return f.id == id; });
    return it == fs.end() ? nullptr : &*it;
}

// The captured 2xH200 node with health read (the link count NVML answers) and the remote end of every link.
Snapshot h200x2_with_links() {
    auto s = h200x2_snapshot();
    for (auto& d : s.nvml.devices) {
        d.health.nvlink_count = 18;
        for (auto& l : d.nvlinks) l.remote_type = NvlinkRemote::nvswitch;
    }
    return s;
}

IbPort ib_port(uint32_t n, bool up, double gbps, std::string layer = "InfiniBand") {
    IbPort p;
    p.port = n;
    p.state_code = up ? 4 : 1;
    p.state = up ? "ACTIVE" : "DOWN";
    p.phys_state_code = up ? 5 : 2;
    p.phys_state = up ? "LinkUp" : "Polling";
    p.rate = fmt::format("{:g} Gb/sec (4X NDR)", gbps);
    p.rate_gbps = gbps;
    p.link_layer = std::move(layer);
    return p;
}

// The node with two NDR adapters (one port each, ACTIVE at 400 Gb/sec) and a RoCE port, as collected.
Snapshot with_infiniband(Snapshot s) {
    for (int i = 0; i < 2; ++i) {
        IbDevice d;
        d.name = "mlx5_" + std::to_string(i);
        d.pci = i == 0 ? "0000:00:0c.0" : "0000:00:0d.0";
        d.ports.push_back(ib_port(1, true, 400));
        s.infiniband.devices.push_back(std::move(d));
    }
    IbDevice roce;
    roce.name = "mlx5_2";
    roce.pci = "0000:00:0e.0";
    roce.ports.push_back(ib_port(1, false, 100, "Ethernet"));
    s.infiniband.devices.push_back(std::move(roce));
    CollectorStatus c;
    c.name = "infiniband";
    c.state = CollectorState::ok;
    s.collectors.push_back(std::move(c));
    return s;
}

const std::string kNvlinks18 = "\n[class.expect]\nnvlinks_active = 18\n";
const std::string kTwoNdrPorts = "\n[[class.expect.infiniband]]\nports = 2\nrate_gbps = 400\n";

// Every rule family and the node held to the matrix, as `gpudx diagnose --matrix` runs them.
std::vector<Finding> diagnose_held_to(const Snapshot& s, const Matrix& m) {
    const std::optional<Matrix> matrix = m;  // class_held_to points into it
    auto held = hold_node_to(s, std::nullopt, matrix);
    DiagnoseOptions o;
    o.extra_findings = held.findings;
    o.node_class = held.class_held_to;
    return diagnose(s, o).findings;
}

}  // namespace

// ---- the matrix file ----

TEST(ClassExpectations, KeysParse) {
    auto m = matrix_with(kNvlinks18 + kTwoNdrPorts +
                         "\n[[class.expect.infiniband]]\nports = 1\nlink_layer = \"ethernet\"\ndevices = \"mlx5_2\"\n");
    ASSERT_EQ(m.classes.size(), 1u);
    auto& e = m.classes[0].expect;
    EXPECT_EQ(e.nvlinks_active, 18u);
    EXPECT_EQ(e.nvlinks_line, 12u);
    ASSERT_EQ(e.infiniband.size(), 2u);
    EXPECT_EQ(e.infiniband[0].ports, 2u);
    EXPECT_EQ(e.infiniband[0].rate_gbps, 400.0);
    EXPECT_EQ(e.infiniband[0].link_layer, "InfiniBand");
    EXPECT_EQ(e.infiniband[0].line, 14u);
    EXPECT_EQ(e.infiniband[1].link_layer, "Ethernet");
    EXPECT_EQ(e.infiniband[1].devices, std::vector<std::string>{"mlx5_2"});
    EXPECT_FALSE(e.infiniband[1].rate_gbps);

    // One entry may be a plain table.
    m = matrix_with("\n[class.expect.infiniband]\nports = 8\n");
    ASSERT_EQ(m.classes[0].expect.infiniband.size(), 1u);
    EXPECT_EQ(m.classes[0].expect.infiniband[0].ports, 8u);
    // A class without [class.expect] expects nothing.
    m = matrix_with("");
    EXPECT_FALSE(m.classes[0].expect.nvlinks_active);
    EXPECT_TRUE(m.classes[0].expect.infiniband.empty());
}

TEST(ClassExpectations, MistakesNameFileAndLine) {
    auto e = error_of("\n[class.expect]\nnvlinks_active = \"18\"\n");
    EXPECT_EQ(e.rfind("m.toml:12:", 0), 0u) << e;
    EXPECT_NE(e.find("nvlinks_active must be an integer"), std::string::npos) << e;
    e = error_of("\n[class.expect]\nnvlinks_active = -1\n");
    EXPECT_EQ(e.rfind("m.toml:12:", 0), 0u) << e;
    e = error_of("\n[class.expect]\nnvlink_active = 18\n");
    EXPECT_EQ(e.rfind("m.toml:12:", 0), 0u) << e;
    EXPECT_NE(e.find("unknown key 'nvlink_active' in class 'h200x2' expect"), std::string::npos) << e;
    e = error_of("\n[[class.expect.infiniband]]\nrate_gbps = 400\n");
    EXPECT_EQ(e.rfind("m.toml:11:", 0), 0u) << e;
    EXPECT_NE(e.find("has no 'ports'"), std::string::npos) << e;
    e = error_of("\n[[class.expect.infiniband]]\nports = 8\nrate = 400\n");
    EXPECT_EQ(e.rfind("m.toml:13:", 0), 0u) << e;
    EXPECT_NE(e.find("unknown key 'rate'"), std::string::npos) << e;
    e = error_of("\n[[class.expect.infiniband]]\nports = 8\nlink_layer = \"omnipath\"\n");
    EXPECT_EQ(e.rfind("m.toml:13:", 0), 0u) << e;
    EXPECT_NE(e.find("link_layer must be \"InfiniBand\" or \"Ethernet\""), std::string::npos) << e;
    e = error_of("\n[[class.expect.infiniband]]\nports = 8\nrate_gbps = \"400 Gb/sec\"\n");
    EXPECT_EQ(e.rfind("m.toml:13:", 0), 0u) << e;
    EXPECT_NE(e.find("rate_gbps must be a positive number"), std::string::npos) << e;
    e = error_of("\n[class.expect]\ninfiniband = 8\n");
    EXPECT_EQ(e.rfind("m.toml:12:", 0), 0u) << e;
}

// ---- NVLinks ----

TEST(ClassExpectations, AllLinksActiveConform) {
    auto c = check_against_matrix(matrix_with(kNvlinks18), h200x2_with_links(), kToday);
    EXPECT_TRUE(c.findings.empty()) << c.findings.front().message;
    EXPECT_EQ(c.exit_code, 0);
}

TEST(ClassExpectations, FewerActiveLinksThanTheClassIsAnErrorNamingGpuAndLinks) {
    auto s = h200x2_with_links();
    s.nvml.devices[1].nvlinks[7].active = false;
    s.nvml.devices[1].nvlinks[12].active = false;
    auto c = check_against_matrix(matrix_with(kNvlinks18), s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.nvlinks_below"});
    auto& f = c.findings[0];
    EXPECT_EQ(f.severity, Severity::error);
    EXPECT_EQ(c.exit_code, 1);
    ASSERT_EQ(f.subjects.size(), 1u);
    EXPECT_EQ(f.subjects[0].uuid, kGpu1Uuid);
    EXPECT_EQ(f.subjects[0].pci, kGpu1Pci);
    EXPECT_NE(f.message.find("16 of the 18 NVLinks class 'h200x2' expects are active; down: 7, 12"), std::string::npos)
        << f.message;
    EXPECT_EQ(f.evidence.back().source, "m.toml:12 class h200x2");
    EXPECT_EQ(f.evidence.back().value, "nvlinks_active = 18");
}

TEST(ClassExpectations, GpuWithoutNvlinkInAClassThatExpectsThemIsAnError) {
    auto s = h200x2_with_links();
    s.nvml.devices[0].nvlinks.clear();
    s.nvml.devices[0].unsupported.push_back("nvmlDeviceGetNvLinkState");
    s.nvml.devices[0].health.nvlink_count.reset();
    auto c = check_against_matrix(matrix_with(kNvlinks18), s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.nvlinks_below"});
    EXPECT_NE(c.findings[0].message.find("no NVLink, class 'h200x2' expects 18"), std::string::npos)
        << c.findings[0].message;
    EXPECT_EQ(c.findings[0].subjects[0].uuid, kGpu0Uuid);
}

TEST(ClassExpectations, LinksNotReadAreUnknownNotShort) {
    auto s = h200x2_with_links();
    s.nvml.devices[0].nvlinks.clear();  // an older snapshot, or NVML did not answer: no word on the links
    auto c = check_against_matrix(matrix_with(kNvlinks18), s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.value_unknown"});
    EXPECT_NE(c.findings[0].message.find(kGpu0Pci), std::string::npos) << c.findings[0].message;
    EXPECT_EQ(c.exit_code, 0);

    // Two links not read and none down: they may be the two missing ones.
    s = h200x2_with_links();
    s.nvml.devices[0].nvlinks.resize(16);
    c = check_against_matrix(matrix_with(kNvlinks18), s, kToday);
    EXPECT_EQ(ids(c.findings), std::vector<std::string>{"matrix.value_unknown"});
    // One of the sixteen read is down: short whatever the two unread say.
    s.nvml.devices[0].nvlinks[3].active = false;
    c = check_against_matrix(matrix_with(kNvlinks18), s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.nvlinks_below"});
    EXPECT_NE(c.findings[0].message.find("2 not read"), std::string::npos) << c.findings[0].message;
}

TEST(ClassExpectations, OneGpuVmWithoutLinksStaysHealthy) {
    auto s = h200x2_with_links();
    s.nvml.devices.resize(1);
    s.nvml.devices[0].nvlinks.clear();
    s.nvml.devices[0].health.nvlink_count = 0;
    for (auto& m : {std::string("\n[class.expect]\nnvlinks_active = 0\n"), std::string()}) {
        auto mx = matrix_with(m);
        auto c = check_against_matrix(mx, s, kToday);
        EXPECT_EQ(find(c.findings, "matrix.nvlinks_below"), nullptr) << m;
        EXPECT_EQ(find(c.findings, "matrix.value_unknown"), nullptr) << m;
        auto all = diagnose_held_to(s, mx);
        EXPECT_EQ(find(all, "health.nvlink_down"), nullptr) << m;
        EXPECT_EQ(find(all, "matrix.nvlinks_below"), nullptr) << m;
    }
}

TEST(ClassExpectations, TheClassReportsALinkDownOnceAndWithoutOneTheHealthRuleDoes) {
    auto s = h200x2_with_links();
    s.nvml.devices[0].nvlinks[5].active = false;
    auto held = diagnose_held_to(s, matrix_with(kNvlinks18));
    EXPECT_NE(find(held, "matrix.nvlinks_below"), nullptr);
    EXPECT_EQ(find(held, "health.nvlink_down"), nullptr);  // one finding per fact

    auto without = diagnose_held_to(s, matrix_with(""));
    EXPECT_EQ(find(without, "matrix.nvlinks_below"), nullptr);
    EXPECT_NE(find(without, "health.nvlink_down"), nullptr);

    // A class that expects fewer than the GPU has active: the class is satisfied, the link down is still news.
    auto fewer = diagnose_held_to(s, matrix_with("\n[class.expect]\nnvlinks_active = 12\n"));
    EXPECT_EQ(find(fewer, "matrix.nvlinks_below"), nullptr);
    EXPECT_NE(find(fewer, "health.nvlink_down"), nullptr);
}

TEST(ClassExpectations, FleetHealthLeavesTheClassesFactsToItsDivergences) {
    auto s = h200x2_with_links();
    s.nvml.devices[0].nvlinks[5].active = false;
    const std::string text = snapshot_to_json(s).dump();
    auto m = matrix_with(kNvlinks18);
    auto held = judge_fleet_snapshot(text, &m);
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_EQ(find(held->health, "health.nvlink_down"), nullptr);
    EXPECT_EQ(ids(check_node_against_matrix(m, held->record, kToday).findings),
              std::vector<std::string>{"matrix.nvlinks_below"});
    auto alone = judge_fleet_snapshot(text);
    ASSERT_TRUE(alone) << alone.error().message;
    EXPECT_NE(find(alone->health, "health.nvlink_down"), nullptr);
}

// ---- InfiniBand ----

TEST(ClassExpectations, PortsAsTheClassExpectsConform) {
    auto s = with_infiniband(h200x2_with_links());
    auto m = matrix_with(kNvlinks18 + kTwoNdrPorts);
    auto c = check_against_matrix(m, s, kToday);
    EXPECT_TRUE(c.findings.empty()) << c.findings.front().message;
    // The RoCE port is down, but no entry covers Ethernet: today's rule (info) stands for it.
    auto all = diagnose_held_to(s, m);
    auto* down = find(all, "ib.port_down");
    ASSERT_NE(down, nullptr);
    EXPECT_NE(down->message.find("mlx5_2"), std::string::npos);
}

TEST(ClassExpectations, PortDownIsAnErrorOnceInsteadOfTheInfo) {
    auto s = with_infiniband(h200x2_with_links());
    s.infiniband.devices[1].ports[0] = ib_port(1, false, 400);
    auto m = matrix_with(kTwoNdrPorts);
    auto c = check_against_matrix(m, s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.ib_port_not_active"});
    auto& f = c.findings[0];
    EXPECT_EQ(f.severity, Severity::error);
    EXPECT_NE(f.message.find("mlx5_1 port 1 (InfiniBand, 0000:00:0d.0) is DOWN (Polling)"), std::string::npos)
        << f.message;
    EXPECT_NE(f.message.find("expects 2 InfiniBand port(s) at 400 Gb/sec ACTIVE"), std::string::npos) << f.message;
    EXPECT_EQ(f.evidence.front().source, "/sys/class/infiniband/mlx5_1/ports/1/state");

    auto all = diagnose_held_to(s, m);
    EXPECT_NE(find(all, "matrix.ib_port_not_active"), nullptr);
    for (auto& x : all) {
        if (x.id == "ib.port_down") {
            EXPECT_EQ(x.message.find("mlx5_1"), std::string::npos) << x.message;
        }
    }

    // Up on the wire but INIT: the same one finding, not ib.port_link_up_not_active beside it.
    s.infiniband.devices[1].ports[0].phys_state_code = 5;
    s.infiniband.devices[1].ports[0].phys_state = "LinkUp";
    s.infiniband.devices[1].ports[0].state_code = 2;
    s.infiniband.devices[1].ports[0].state = "INIT";
    all = diagnose_held_to(s, m);
    EXPECT_NE(find(all, "matrix.ib_port_not_active"), nullptr);
    EXPECT_EQ(find(all, "ib.port_link_up_not_active"), nullptr);
    // Without an expectation, today's rule stands.
    EXPECT_NE(find(diagnose_held_to(s, matrix_with("")), "ib.port_link_up_not_active"), nullptr);
}

TEST(ClassExpectations, LowerRateIsAWarning) {
    auto s = with_infiniband(h200x2_with_links());
    s.infiniband.devices[0].ports[0] = ib_port(1, true, 200);
    auto c = check_against_matrix(matrix_with(kTwoNdrPorts), s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.ib_rate_lower"});
    EXPECT_EQ(c.findings[0].severity, Severity::warning);
    EXPECT_NE(c.findings[0].message.find("mlx5_0 port 1 (InfiniBand, 0000:00:0c.0) runs at 200 Gb/sec (4X NDR), below "
                                         "the 400 Gb/sec"),
              std::string::npos)
        << c.findings[0].message;
    EXPECT_EQ(c.exit_code, 2);
    // A faster port is not a divergence.
    s.infiniband.devices[0].ports[0] = ib_port(1, true, 800);
    EXPECT_TRUE(check_against_matrix(matrix_with(kTwoNdrPorts), s, kToday).findings.empty());
}

TEST(ClassExpectations, MissingPortsAreAnError) {
    auto s = with_infiniband(h200x2_with_links());
    auto eight = matrix_with("\n[[class.expect.infiniband]]\nports = 8\nrate_gbps = 400\n");
    auto c = check_against_matrix(eight, s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.ib_port_missing"});
    EXPECT_NE(c.findings[0].message.find("2 InfiniBand port(s) found (mlx5_0 port 1, mlx5_1 port 1), class 'h200x2' "
                                         "expects 8"),
              std::string::npos)
        << c.findings[0].message;
    // devices narrows the entry to the adapters named.
    auto one = matrix_with("\n[[class.expect.infiniband]]\nports = 1\ndevices = \"mlx5_1\"\n");
    c = check_against_matrix(one, s, kToday);
    EXPECT_TRUE(c.findings.empty());
    c = check_against_matrix(matrix_with("\n[[class.expect.infiniband]]\nports = 1\nlink_layer = \"Ethernet\"\n"), s,
                             kToday);
    EXPECT_EQ(ids(c.findings), std::vector<std::string>{"matrix.ib_port_not_active"});
}

TEST(ClassExpectations, PortsNotReadAreUnknown) {
    auto s = h200x2_with_links();  // no infiniband collector ran: an older snapshot
    auto c = check_against_matrix(matrix_with(kTwoNdrPorts), s, kToday);
    ASSERT_EQ(ids(c.findings), std::vector<std::string>{"matrix.value_unknown"});
    EXPECT_NE(c.findings[0].message.find("InfiniBand ports were not read"), std::string::npos);
    // Read, and there are none: missing.
    CollectorStatus ib;
    ib.name = "infiniband";
    ib.state = CollectorState::ok;
    s.collectors.push_back(ib);
    c = check_against_matrix(matrix_with(kTwoNdrPorts), s, kToday);
    EXPECT_EQ(ids(c.findings), std::vector<std::string>{"matrix.ib_port_missing"});
    // No /sys/class/infiniband at all (no RDMA driver loaded): no port, not an unread one.
    s.collectors.back().state = CollectorState::no_data;
    c = check_against_matrix(matrix_with(kTwoNdrPorts), s, kToday);
    EXPECT_EQ(ids(c.findings), std::vector<std::string>{"matrix.ib_port_missing"});
    // A collector that failed did not read them.
    s.collectors.back().state = CollectorState::error;
    c = check_against_matrix(matrix_with(kTwoNdrPorts), s, kToday);
    EXPECT_EQ(ids(c.findings), std::vector<std::string>{"matrix.value_unknown"});
    // A rate not read on an ACTIVE port is unknown, not lower.
    s = with_infiniband(h200x2_with_links());
    s.infiniband.devices[0].ports[0].rate_gbps.reset();
    c = check_against_matrix(matrix_with(kTwoNdrPorts), s, kToday);
    EXPECT_EQ(ids(c.findings), std::vector<std::string>{"matrix.value_unknown"});
}

// ---- the node record's remote ends ----

TEST(RecordedNvlinks, RecordHoldsRemoteEndsAndReadsBack) {
    auto s = with_infiniband(h200x2_with_links());
    s.nvml.devices[0].nvlinks[2].remote_pci = "0000:0a:00.0";
    auto r = make_node_record(s);
    ASSERT_TRUE(r.gpus[0].nvlinks);
    ASSERT_EQ(r.gpus[0].nvlinks->size(), 18u);
    EXPECT_EQ((*r.gpus[0].nvlinks)[2].remote_pci, "0000:0a:00.0");
    EXPECT_EQ((*r.gpus[0].nvlinks)[2].remote_type, "nvswitch");
    EXPECT_EQ(r.gpus[0].nvlink_count, 18u);
    ASSERT_TRUE(r.ib_ports);
    EXPECT_EQ(r.ib_ports->size(), 3u);

    auto j = node_record_to_json(r);
    EXPECT_EQ(j["gpus"][0]["nvlinks"][2]["remote_type"], "nvswitch");
    EXPECT_EQ(j["ib_ports"][0]["rate_gbps"], 400.0);
    auto back = node_record_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(node_record_to_json(*back), j);

    // An older record has neither: not read, never "no links" or "no ports".
    j["gpus"][0].erase("nvlinks");
    j.erase("ib_ports");
    back = node_record_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_FALSE(back->gpus[0].nvlinks);
    EXPECT_FALSE(back->ib_ports);
    EXPECT_TRUE(diff_against_baseline(*back, s).empty());
}

TEST(RecordedNvlinks, SameEndsAreNoChange) {
    auto s = h200x2_with_links();
    EXPECT_TRUE(diff_against_baseline(make_node_record(s), s).empty());
}

TEST(RecordedNvlinks, LinkLeadingElsewhereIsAWarningNamingGpuLinkWasAndNow) {
    auto s = h200x2_with_links();
    s.nvml.devices[0].nvlinks[4].remote_pci = "0000:0a:00.0";
    auto base = make_node_record(s);
    s.nvml.devices[0].nvlinks[4].remote_pci = "0000:0b:00.0";
    s.nvml.devices[0].nvlinks[9].remote_type = NvlinkRemote::gpu;
    auto fs = diff_against_baseline(base, s);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.nvlink_remote_changed"});
    auto& f = fs[0];
    EXPECT_EQ(f.severity, Severity::warning);
    EXPECT_EQ(f.subjects[0].uuid, kGpu0Uuid);
    EXPECT_NE(f.message.find("2 NVLink(s) lead elsewhere than recorded: link 4: was nvswitch 0000:0a:00.0, now "
                             "nvswitch 0000:0b:00.0; link 9: was nvswitch, now gpu"),
              std::string::npos)
        << f.message;
}

TEST(RecordedNvlinks, UnreadEndsAndLinksDownAreNotRemoteChanges) {
    auto s = h200x2_with_links();
    s.nvml.devices[0].nvlinks[4].remote_pci = "0000:0a:00.0";
    auto base = make_node_record(s);
    s.nvml.devices[0].nvlinks[4].remote_pci.clear();  // Not Supported now
    s.nvml.devices[0].nvlinks[5].remote_type = NvlinkRemote::not_read;
    EXPECT_TRUE(diff_against_baseline(base, s).empty());
    s.nvml.devices[0].nvlinks[6].active = false;  // one link down among active ones: health.nvlink_down's
    EXPECT_TRUE(diff_against_baseline(base, s).empty());
}

TEST(RecordedNvlinks, PeerThatMovedWithItsUuidIsTheSamePeer) {
    auto s = h200x2_with_links();
    s.nvml.devices[0].nvlinks[0].remote_type = NvlinkRemote::gpu;
    s.nvml.devices[0].nvlinks[0].remote_pci = kGpu1Pci;
    auto base = make_node_record(s);
    // GPU 1 now answers at another address (moved): GPU 0's link still leads to it.
    const std::string moved = "0000:00:09.0";
    s.nvml.devices[0].nvlinks[0].remote_pci = moved;
    for (auto& d : s.nvml.devices)
        if (d.pci == kGpu1Pci) d.pci = moved;
    for (auto& g : s.module.nvidia_gpus)
        if (g.address == kGpu1Pci) g.address = moved;
    for (auto& d : s.pcie.devices)
        if (d.address == kGpu1Pci) d.address = moved;
    for (auto& a : s.pcie.gpus)
        if (a == kGpu1Pci) a = moved;
    for (auto& d : s.cuda.caller.devices)
        if (d.pci == kGpu1Pci) d.pci = moved;
    auto fs = diff_against_baseline(base, s);
    EXPECT_EQ(find(fs, "baseline.nvlink_remote_changed"), nullptr);
    EXPECT_NE(find(fs, "baseline.gpu_moved"), nullptr);
}

TEST(RecordedNvlinks, GpuThatLostEveryLinkIsAnErrorOnce) {
    auto s = h200x2_with_links();
    auto base = make_node_record(s);
    for (auto& l : s.nvml.devices[1].nvlinks) l.active = false;
    auto fs = diff_against_baseline(base, s);
    ASSERT_EQ(ids(fs), std::vector<std::string>{"baseline.nvlink_lost"});
    EXPECT_EQ(fs[0].severity, Severity::error);
    EXPECT_EQ(fs[0].subjects[0].uuid, kGpu1Uuid);
    EXPECT_NE(fs[0].message.find("no NVLink is active now; the record has 18 active (link 0 to nvswitch)"),
              std::string::npos)
        << fs[0].message;

    // With a class that expects the links too, the class's finding says it; the record's is not repeated.
    const std::optional<Matrix> m = matrix_with(kNvlinks18);
    auto held = hold_node_to(s, base, m);
    EXPECT_EQ(ids(held.findings), std::vector<std::string>{"matrix.nvlinks_below"});
}

}  // namespace GPUDX_UNITY_ID
