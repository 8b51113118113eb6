// The HTML pages (render/html.hpp): escaping of everything from a node, every GPU named by UUID and PCI address, the
// fields an older saved JSON lacks, the acceptance drawings and the fleet page's bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/endpoints.hpp"
#include "agent/events.hpp"
#include "collect/kernel_log_parse.hpp"
#include "identity/page_identity.hpp"
#include "model/node_page.hpp"
#include "render/html.hpp"
#include "render/html_parts.hpp"
#include "rules/engine/diagnose.hpp"
#include "rules/reference/signatures.hpp"
#include "test_support.hpp"

namespace gpudx {
namespace GPUDX_UNITY_ID {

using test::read_all;

nlohmann::json golden_json(const std::string& name) {
    return nlohmann::json::parse(read_all(std::string(GPUDX_TEST_SOURCE_DIR) + "/golden/" + name));
}

Snapshot golden_snapshot(const std::string& name) {
    auto s = snapshot_from_json(golden_json(name));
    EXPECT_TRUE(s.has_value());
    return s ? *s : Snapshot{};
}

bool contains_ci(std::string hay, std::string needle) {
    std::transform(hay.begin(), hay.end(), hay.begin(), ::tolower);
    std::transform(needle.begin(), needle.end(), needle.begin(), ::tolower);
    return hay.find(needle) != std::string::npos;
}

TEST(HtmlEscape, EscapesMarkupQuotesAndControls) {
    EXPECT_EQ(html_escape("<script>alert('x')</script>"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
    EXPECT_EQ(html_escape("a & \"b\""), "a &amp; &quot;b&quot;");
    EXPECT_EQ(html_escape("bell\a esc\x1b[31m"), "bell? esc?[31m");  // as every text output shows them
    // Invalid UTF-8 never reaches the page as raw bytes.
    auto bad = html_escape("x\xff y");
    EXPECT_EQ(bad.find('\xff'), std::string::npos);
}

TEST(NodePageHtml, EscapesScriptInHostnameAndProcessName) {
    Snapshot s = golden_snapshot("h200x2.snapshot.json");
    s.host.hostname = "<script>alert('host')</script>node1";
    DeviceHolder h;
    h.pid = 4242;
    h.name = "<script>alert(1)</script>";
    h.devices = {"/dev/nvidia0"};
    s.devices.holders.push_back(h);
    Diagnosis d = diagnose(s, {});
    Finding f;
    f.id = "devices.stuck_holder";
    f.layer = Layer::devices;
    f.severity = Severity::error;
    f.message = "process <script>alert(1)</script> holds the GPU";
    f.evidence.push_back({"/proc/4242/comm", "<script>alert(1)</script>"});
    f.process = ProcessRef{4242, "<script>alert(1)</script>", "<b>alice</b>", "", ""};
    d.findings.push_back(f);
    NodePage page = node_page_of(s, d);
    page.source = "<script>src</script>";
    std::string out = render_node_page_html(page);
    EXPECT_FALSE(contains_ci(out, "<script")) << "an unescaped script tag reached the page";
    EXPECT_FALSE(contains_ci(out, "<b>alice"));
    EXPECT_NE(out.find("&lt;script&gt;alert(&#39;host&#39;)&lt;/script&gt;node1"), std::string::npos);
    EXPECT_NE(out.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
    // Nothing may load: the page's own policy forbids it, and it names no external resource.
    EXPECT_NE(out.find("default-src 'none'"), std::string::npos);
    EXPECT_FALSE(contains_ci(out, "http://") && !contains_ci(out, "xmlns=\"http://www.w3.org/2000/svg\""));
    EXPECT_FALSE(contains_ci(out, "https://"));
    EXPECT_FALSE(contains_ci(out, "src="));
}

TEST(NodePageHtml, NamesEveryGpuByUuidAndAddressAndEveryErrorFinding) {
    for (const char* name : {"h200x2.snapshot.json", "gpu-missing.snapshot.json", "fell-off-bus.snapshot.json"}) {
        SCOPED_TRACE(name);
        Snapshot s = golden_snapshot(name);
        Diagnosis d = diagnose(s, {});
        NodePage page = node_page_of(s, d);
        std::string out = render_node_page_html(page);
        ASSERT_FALSE(s.pcie.gpus.empty());
        for (auto& pci : s.pcie.gpus) EXPECT_NE(out.find(pci), std::string::npos) << pci;
        for (auto& g : s.module.nvidia_gpus) {
            EXPECT_NE(out.find(g.address), std::string::npos) << g.address;
            if (!g.uuid.empty()) {
                EXPECT_NE(out.find(html_escape(g.uuid)), std::string::npos) << g.uuid;
            }
        }
        for (auto& f : d.findings) {
            if (f.severity == Severity::error) {
                EXPECT_NE(out.find("data-finding=\"" + html_escape(f.id) + "\""), std::string::npos) << f.id;
            }
        }
        if (d.boundary) {
            EXPECT_NE(out.find("failure boundary"), std::string::npos);
        }
    }
}

TEST(NodePageHtml, ListsTheFieldsAnOlderSnapshotLacks) {
    auto doc = golden_json("h200x2.snapshot.json");
    for (auto& dev : doc["pcie"]["devices"]) dev.erase("slot");
    doc.erase("environment");
    auto s = snapshot_from_json(doc);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    auto missing = missing_json_fields(snapshot_to_json(*s), doc);
    EXPECT_NE(std::find(missing.begin(), missing.end(), "pcie.devices[].slot"), missing.end());
    EXPECT_NE(std::find(missing.begin(), missing.end(), "environment"), missing.end());
    // A field present is never listed.
    EXPECT_EQ(std::find(missing.begin(), missing.end(), "pcie.devices[].address"), missing.end());
    NodePage page = node_page_of(*s, diagnose(*s, {}));
    page.missing = missing;
    auto out = render_node_page_html(page);
    EXPECT_NE(out.find("pcie.devices[].slot"), std::string::npos);
    EXPECT_NE(out.find("id=\"missing\""), std::string::npos);
    // The rest is still drawn.
    for (auto& pci : s->pcie.gpus) EXPECT_NE(out.find(pci), std::string::npos);
}

TEST(NodePageHtml, ReadsBackASavedDiagnosis) {
    Snapshot s = golden_snapshot("gpu-missing.snapshot.json");
    Diagnosis d = diagnose(s, {});
    auto j = diagnosis_to_json(s, d);
    auto back = diagnosis_from_json(j);
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(back->diagnosis.verdict, d.verdict);
    EXPECT_EQ(back->diagnosis.exit_code, d.exit_code);
    EXPECT_EQ(back->diagnosis.boundary, d.boundary);
    ASSERT_EQ(back->diagnosis.findings.size(), d.findings.size());
    ASSERT_EQ(back->diagnosis.layers.size(), d.layers.size());
    for (size_t i = 0; i < d.layers.size(); ++i) EXPECT_EQ(back->diagnosis.layers[i].state, d.layers[i].state);
    // Not a diagnosis: said, not guessed.
    EXPECT_FALSE(diagnosis_from_json(nlohmann::json::parse(R"({"pcie": {}})")).has_value());
    auto wrong = diagnosis_from_json(nlohmann::json::parse(R"({"verdict": "healthy", "findings": [{"id": 3}]})"));
    ASSERT_FALSE(wrong.has_value());
    EXPECT_NE(wrong.error().message.find("findings[0]"), std::string::npos);
    // An exit code left out is no verdict of health.
    auto no_code = diagnosis_from_json(nlohmann::json::parse(R"({"verdict": "healthy", "findings": []})"));
    ASSERT_TRUE(no_code.has_value());
    EXPECT_EQ(no_code->diagnosis.exit_code, kExitUnknown);
}

TEST(NodePageHtml, MarksIdentityDisagreements) {
    Snapshot s = golden_snapshot("h200x2.snapshot.json");
    ASSERT_GE(s.module.nvidia_gpus.size(), 2u);
    s.nvml.devices.clear();
    NvmlDevice dev;
    dev.index = 0;
    dev.uuid = "GPU-00000000-1111-2222-3333-444444444444";
    dev.bus_id = "00000000:00:06.0";
    dev.pci = "0000:00:06.0";
    s.nvml.devices.push_back(dev);
    s.nvml.device_count = 1;
    auto d = diagnose(s, {});
    auto ids = page_identity(s, FindingsView(d.findings));
    auto row = std::find_if(ids.rows.begin(), ids.rows.end(), [](auto& r) { return r.pci == "0000:00:06.0"; });
    ASSERT_NE(row, ids.rows.end());
    ASSERT_FALSE(row->disagreements.empty());
    EXPECT_NE(row->disagreements.front().find("GPU-00000000"), std::string::npos);
}

AcceptReport synthetic_accept(size_t n) {
    AcceptReport r;
    r.node = "node<1>";
    r.verdict = "fail";
    r.thresholds.min_d2d_gbps = 3000;
    for (size_t i = 0; i < n; ++i) {
        AcceptGpu g;
        g.ordinal = static_cast<int>(i);
        g.uuid = fmt::format("GPU-{:08x}-0000-0000-0000-000000000000", i + 1);
        g.pci = fmt::format("0000:{:02x}:00.0", i + 0x10);
        r.gpus.push_back(g);
        SubTest d2d;
        d2d.id = "gpu.d2d";
        d2d.subjects = {g.uuid};
        d2d.pci = {g.pci};
        d2d.status = i == 1 ? TestStatus::fail : TestStatus::pass;
        d2d.figures["d2d_gbps"] = i == 1 ? 1234.5 : 4300 + static_cast<double>(i);
        r.tests.push_back(d2d);
        SubTest mem;
        mem.id = "gpu.memory";
        mem.subjects = {g.uuid};
        mem.pci = {g.pci};
        mem.status = TestStatus::pass;
        mem.figures = {{"tested_gib", 128}, {"errors", 0}, {"patterns", 3}};
        r.tests.push_back(mem);
    }
    for (size_t a = 0; a < n; ++a)
        for (size_t b = a + 1; b < n; ++b) {
            SubTest t;
            t.id = "pair.copy";
            t.subjects = {r.gpus[a].uuid, r.gpus[b].uuid};
            t.pci = {r.gpus[a].pci, r.gpus[b].pci};
            t.status = TestStatus::pass;
            t.figures = {{"a_to_b_gbps", 100.0 + static_cast<double>(a * n + b)}, {"b_to_a_gbps", 200.0 + static_cast<double>(b * n + a)}};
            r.tests.push_back(t);
        }
    return r;
}

TEST(NodePageHtml, DrawsTheAcceptanceRunForAnyNumberOfGpus) {
    for (size_t n : {1u, 2u, 8u, 72u}) {
        SCOPED_TRACE(n);
        AcceptReport r = synthetic_accept(n);
        NodePage page;
        page.node = "node1";
        page.accept = &r;
        page.accept_source = "accept.json";
        auto out = render_node_page_html(page);
        for (auto& g : r.gpus) {
            EXPECT_NE(out.find(g.uuid), std::string::npos);
            EXPECT_NE(out.find(g.pci), std::string::npos);
        }
        EXPECT_NE(out.find("node&lt;1&gt;"), std::string::npos);
        if (n >= 2) {
            // Every pair's figure in the heat map's table, both ways.
            EXPECT_NE(out.find(">" + html::number(100.0 + 1) + "<"), std::string::npos);
            EXPECT_NE(out.find(">" + html::number(200.0 + static_cast<double>(n)) + "<"), std::string::npos);
            EXPECT_NE(out.find("GPU to GPU copy rates"), std::string::npos);
            EXPECT_NE(out.find("1234"), std::string::npos);  // the failing GPU's figure
        }
        // The rectangle count of the heat map grows with N squared.
        size_t rects = 0;
        for (size_t pos = 0; (pos = out.find("→", pos)) != std::string::npos; ++pos) ++rects;
        if (n >= 2) {
            EXPECT_EQ(rects, n * n);
        }
    }
}

TEST(NodePageHtml, DrawsAnAcceptanceRunAgainstAnEarlierOne) {
    AcceptReport now = synthetic_accept(4), before = synthetic_accept(4);
    for (auto& t : before.tests)
        if (t.id == "gpu.d2d") t.figures["d2d_gbps"] = 4400;
    NodePage page;
    page.accept = &now;
    page.accept_reference = &before;
    page.accept_reference_source = "before<1>.json";
    auto out = render_node_page_html(page);
    EXPECT_NE(out.find("before&lt;1&gt;.json"), std::string::npos);
    EXPECT_NE(out.find("reference run: 4400 GB/s"), std::string::npos);
    // GPU 1 (1234.5 GB/s) fell 72 % from 4400; the others (about 4300) by less than 5 %: not called out.
    EXPECT_NE(out.find("72% below the reference run"), std::string::npos);
    size_t called = 0;
    for (size_t pos = 0; (pos = out.find("below the reference run", pos)) != std::string::npos; ++pos) ++called;
    EXPECT_EQ(called, 1u);
    page.accept_reference = nullptr;
    EXPECT_EQ(render_node_page_html(page).find("reference run:"), std::string::npos);
}

TEST(NodePageHtml, DrawsEventsPerGpuAndTheNode) {
    Snapshot s = golden_snapshot("h200x2.snapshot.json");
    NodePage page = node_page_of(s, diagnose(s, {}));
    std::vector<PageEvent> events;
    events.push_back({1764634443000, AgentEventKind::appeared, "kernel_log.xid", "error", s.module.nvidia_gpus[0].uuid,
                      s.module.nvidia_gpus[0].address, "Xid 79 <script>x</script>"});
    events.push_back({1764634500000, AgentEventKind::drained, "kernel_log.xid", "", "", "", "drained: gpudx: kernel_log.xid"});
    events.push_back({1764638000000, AgentEventKind::cleared, "kernel_log.xid", "error", s.module.nvidia_gpus[0].uuid,
                      s.module.nvidia_gpus[0].address, "cleared"});
    page.events = events;
    auto out = render_node_page_html(page);
    EXPECT_FALSE(contains_ci(out, "<script"));
    EXPECT_NE(out.find("Xid 79 &lt;script&gt;"), std::string::npos);
    EXPECT_NE(out.find("node (no GPU)"), std::string::npos);
    EXPECT_NE(out.find("2025-12-02 00:14:03Z"), std::string::npos);
}

TEST(NodePageHtml, MarksALinkTrainedBelowItsMaximum) {
    Snapshot s = golden_snapshot("h200x2.snapshot.json");
    std::string slow;
    for (auto& d : s.pcie.devices)
        if (d.is_gpu && slow.empty()) {
            d.link_current.width = 8;
            d.link_current.speed_gts = 16.0;
            slow = d.address;
        }
    ASSERT_FALSE(slow.empty());
    auto out = render_node_page_html(node_page_of(s, diagnose(s, {})));
    EXPECT_NE(out.find("x8 16.0 GT/s (max x16 32.0 GT/s)"), std::string::npos);
    EXPECT_NE(out.find("stroke-dasharray"), std::string::npos);
    // Its row of the topology table is marked too.
    auto row = out.find("<tr data-pci=\"" + slow + "\"");
    ASSERT_NE(row, std::string::npos);
    EXPECT_NE(out.substr(row, 600).find("class=\"bad\">x8 16.0 GT/s"), std::string::npos);
    // The healthy capture has none.
    Snapshot healthy = golden_snapshot("h200x2.snapshot.json");
    EXPECT_EQ(render_node_page_html(node_page_of(healthy, diagnose(healthy, {}))).find("stroke-dasharray=\"6 4\""),
              std::string::npos);
}

TEST(NodePageHtml, MarksAGpuWithAnNvlinkDown) {
    Snapshot s = golden_snapshot("fabric-registration-failed.snapshot.json");
    ASSERT_FALSE(s.nvml.devices.empty());
    auto& dev = s.nvml.devices.front();
    ASSERT_GE(dev.nvlinks.size(), 2u);
    size_t total = dev.nvlinks.size();
    auto before = render_node_page_html(node_page_of(s, diagnose(s, {})));
    EXPECT_NE(before.find(fmt::format("NVLink {0}/{0} up", total)), std::string::npos);
    dev.nvlinks[1].active = false;
    auto out = render_node_page_html(node_page_of(s, diagnose(s, {})));
    EXPECT_NE(out.find(fmt::format("class=\"bad\">NVLink {}/{} up", total - 1, total)), std::string::npos);
}

// An answer's whole text: its body, then every piece it sends as it is made.
std::string answer_text(HttpResponse res) {
    std::string out = std::move(res.body);
    if (res.more)
        while (auto piece = res.more()) out += *piece;
    return out;
}

TEST(AgentPage, ServesTheLatestDiagnosisWithItsEvents) {
    auto dir = test::scratch("agent-page");
    Recorder recorder(EventStoreOptions{(dir / "events.db").string()});
    recorder.open();
    Publication publication;
    Endpoints endpoints(publication, recorder, [] { return AgentStatus{}; });
    // Before the first diagnosis: a page that says so, never one that looks healthy.
    auto early = endpoints.handle(HttpRequest{"/", {}});
    EXPECT_EQ(early.status, 200);
    EXPECT_EQ(early.content_type, "text/html; charset=utf-8");
    EXPECT_NE(early.body.find("has not finished its first one"), std::string::npos);
    EXPECT_EQ(early.body.find("no problem found"), std::string::npos);

    Snapshot s = golden_snapshot("gpu-missing.snapshot.json");
    auto p = std::make_shared<Published>();
    p->snapshot = s;
    p->hold(diagnose(s, {}));
    p->time_ms = now_ms();
    publication.publish(p);
    AgentEvent e = agent_note("Xid <script>79</script> on the GPU", now_ms());
    recorder.record({e});
    for (const char* path : {"/", "/report.html"}) {
        auto res = endpoints.handle(HttpRequest{path, {}});
        res.body = answer_text(res);
        EXPECT_EQ(res.status, 200) << path;
        EXPECT_EQ(res.content_type, "text/html; charset=utf-8");
        bool csp = false;
        for (auto& [k, v] : res.headers) csp = csp || (k == "Content-Security-Policy" && v.find("default-src 'none'") == 0);
        EXPECT_TRUE(csp) << path;
        for (auto& pci : s.pcie.gpus) EXPECT_NE(res.body.find(pci), std::string::npos) << pci;
        for (auto& f : p->findings().unpack()) {
            if (f.severity == Severity::error) {
                EXPECT_NE(res.body.find("data-finding=\"" + f.id + "\""), std::string::npos) << f.id;
            }
        }
        EXPECT_NE(res.body.find("Xid &lt;script&gt;79&lt;/script&gt; on the GPU"), std::string::npos);
        EXPECT_NE(res.body.find("http-equiv=\"refresh\""), std::string::npos);
    }
    std::filesystem::remove_all(dir);
}

// Without an event store (none could be opened), the page lists the events the agent holds in memory.
TEST(AgentPage, ListsTheEventsHeldInMemoryWithoutAStore) {
    Recorder recorder(EventStoreOptions{});  // never opened: the events stay in memory
    Publication publication;
    Endpoints endpoints(publication, recorder, [] { return AgentStatus{}; });
    recorder.record({agent_note("held in memory: Xid 79 on GPU-5bd41b7c-8a07-7c1a-30c4-3c5f4cc3b8a1", now_ms())});
    EXPECT_NE(answer_text(endpoints.handle(HttpRequest{"/", {}})).find("held in memory: Xid 79"), std::string::npos);
    auto p = std::make_shared<Published>();
    p->snapshot = golden_snapshot("gpu-missing.snapshot.json");
    p->hold(diagnose(p->snapshot, {}));
    p->time_ms = now_ms();
    publication.publish(p);
    EXPECT_NE(answer_text(endpoints.handle(HttpRequest{"/", {}})).find("held in memory: Xid 79"), std::string::npos);
}

// The agent publishes its snapshot with the kernel log digested to what its answers read: every answer, in every
// format, is the one the whole log gives. The log: an Xid storm with a recovery action on two GPUs, AER, an NVRM line
// a signature reads, and an SXid.
TEST(AgentPage, TheDigestedKernelLogAnswersAsTheWholeOne) {
    auto dir = test::scratch("agent-digest");
    Recorder recorder(EventStoreOptions{(dir / "events.db").string()});
    recorder.open();
    Snapshot s = golden_snapshot("h200x2.snapshot.json");
    std::string text;
    for (int i = 0; i < 50; ++i)
        for (auto gpu : {"0000:00:06", "0000:00:07"})
            text += fmt::format("[{}.{:03}] NVRM: Xid (PCI:{}): 79, pid={}, name=python3, GPU has fallen off the bus.\n",
                                100 + i, i, gpu, 1000 + i);
    text += "[200.0] NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot "
            "Required)\n"
            "[201.0] pcieport 0000:00:02.0: AER: Corrected error message received from 0000:00:06.0\n"
            "[202.0] NVRM: GPU 0000:00:07.0: RmInitAdapter failed! (0x62:0x65:1792)\n"
            "[203.0] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 28 egress non-posted PRIV error\n";
    KernelLogScanOptions o;
    o.extra_words = kernel_log_text_words(builtin_signature_catalogue());
    s.kernel_log = *scan_kernel_log(text, o, "/dev/kmsg");
    ASSERT_FALSE(s.kernel_log.tallies.empty());
    auto answers = [&](bool digest) {
        Publication publication;
        Endpoints endpoints(publication, recorder, [] { return AgentStatus{}; });
        auto p = std::make_shared<Published>();
        p->snapshot = s;
        p->hold(diagnose(s, {}));
        p->time_ms = 1'700'000'000'000;
        if (digest) {
            p->xid_counts = digest_kernel_log(p->snapshot.kernel_log);
            // What it drops is freed, not only emptied: the agent holds this snapshot until the next diagnosis.
            const KernelLog& held = p->snapshot.kernel_log;
            EXPECT_EQ(held.lines.capacity(), 0u);
            EXPECT_EQ(held.xids.capacity(), 0u);
            EXPECT_EQ(held.tallies.capacity(), 0u);
        }
        publication.publish(p);
        std::vector<std::string> out;
        for (std::string path : {"/", "/report.html", "/metrics", "/v1/status"})
            out.push_back(path + "\n" + answer_text(endpoints.handle(HttpRequest{path, {}})));
        for (std::string format : {"text", "prom", "slurm", "npd", "nagios"})
            out.push_back(format + "\n" + answer_text(endpoints.handle(HttpRequest{"/v1/status", {{"format", format}}})));
        return std::make_pair(out, p);
    };
    auto [whole, whole_published] = answers(false);
    auto [digested, digested_published] = answers(true);
    const KernelLog &whole_log = whole_published->snapshot.kernel_log, &digested_log = digested_published->snapshot.kernel_log;
    ASSERT_EQ(whole.size(), digested.size());
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(digested[i], whole[i]);
    // It is smaller: no lines, no events, no tallies; the Xid counts by code and GPU instead.
    EXPECT_FALSE(whole_log.lines.empty());
    EXPECT_TRUE(digested_log.lines.empty());
    EXPECT_TRUE(digested_log.xids.empty());
    EXPECT_TRUE(digested_log.tallies.empty());
    EXPECT_FALSE(whole_log.tallies.empty());
    EXPECT_FALSE(whole_published->xid_counts.has_value());
    ASSERT_TRUE(digested_published->xid_counts.has_value());
    ASSERT_EQ(digested_published->xid_counts->size(), 3u);  // 79 on each GPU, 154 on one
    EXPECT_EQ(digested_published->xid_counts->at(0).code, 79);
    EXPECT_EQ(digested_published->xid_counts->at(0).count, 50u);
    // What is answered names the storm and the recovery action.
    EXPECT_NE(whole[2].find("gpudx_xid_events_total{code=\"79\""), std::string::npos) << whole[2];
    std::filesystem::remove_all(dir);
}

TEST(FleetHtml, EmptyFleetSaysSo) {
    FleetReport r;
    auto out = render_fleet_html(r, {});
    EXPECT_NE(out.find("The fleet is empty"), std::string::npos);
    EXPECT_NE(out.find("default-src 'none'"), std::string::npos);
}

TEST(FleetHtml, TenThousandNodesStayBounded) {
    FleetReport r;
    r.nodes = 10000;
    FleetClassReport c;
    c.name = "h200<x8>";
    c.nodes = 10000;
    for (size_t i = 0; i < 10000; ++i) {
        FleetUnhealthyNode u;
        u.node = fmt::format("node{:05}", i);
        u.source = HealthSource::snapshot;
        Finding f;
        f.id = i % 3 ? "pcie.link_degraded" : "kernel_log.xid";
        f.severity = i % 3 ? Severity::warning : Severity::error;
        f.message = "<script>x</script>";
        u.findings.push_back(f);
        c.unhealthy.push_back(u);
        c.finding_nodes[f.id].nodes++;
        c.finding_nodes[f.id].severity = f.severity;
        c.drivers[i % 2 ? "580.95.05" : "580.159.04"]++;
    }
    r.classes.push_back(c);
    FleetHtmlOptions o;
    o.node_rows = 200;
    auto out = render_fleet_html(r, o);
    EXPECT_LT(out.size(), 5u << 20);
    EXPECT_FALSE(contains_ci(out, "<script"));
    EXPECT_NE(out.find("h200&lt;x8&gt;"), std::string::npos);
    EXPECT_NE(out.find("node00000"), std::string::npos);
    EXPECT_EQ(out.find("node09999"), std::string::npos) << "a node past the bound was listed";
    EXPECT_NE(out.find("9800 more not listed"), std::string::npos);
    EXPECT_NE(out.find("580.95.05"), std::string::npos);
}

}  // namespace GPUDX_UNITY_ID
}  // namespace gpudx
