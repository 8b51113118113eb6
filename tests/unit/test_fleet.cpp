#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../fleet/h200x2_snapshot.hpp"
#include "fleet/fleet.hpp"
#include "render/fleet.hpp"
#include "render/report.hpp"
#include "rules/engine/diagnose.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
using namespace gpudx::testdata;

namespace {

const std::string kExample = std::string(GPUDX_TEST_SOURCE_DIR) + "/../examples/matrix.toml";
const CalendarDate kToday{2026, 6, 1};

Matrix example() {
    auto m = load_matrix(kExample);
    EXPECT_TRUE(m) << m.error().message;
    return *m;
}

// The node as build_fleet_report reads it from its snapshot file: the record, then the rules run on it.
FleetNode node_from(const Snapshot& s, const std::string& file) {
    std::string text = snapshot_to_json(s).dump();
    auto n = parse_fleet_snapshot(text);
    EXPECT_TRUE(n) << n.error().message;
    n->file = file;
    auto health = health_from_snapshot(text);
    EXPECT_TRUE(health) << health.error().message;
    n->health_source = HealthSource::snapshot;
    n->health_file = file;
    n->health = *health;
    return *n;
}

// A saved `gpudx diagnose --format json` of the snapshot, as the node (or its agent's /v1/status) writes it.
std::string saved_diagnosis(const Snapshot& s) { return diagnosis_to_json(s, diagnose(s, DiagnoseOptions{})).dump(2); }

FleetDiagnosis diagnosis_from(const Snapshot& s, const std::string& file) {
    auto d = parse_fleet_diagnosis(saved_diagnosis(s));
    EXPECT_TRUE(d) << d.error().message;
    d->file = file;
    return *d;
}

bool contains(const std::vector<std::string>& ids, const std::string& id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::vector<std::string> ids_of(const std::vector<Finding>& findings) {
    std::vector<std::string> ids;
    for (auto& f : findings) ids.push_back(f.id);
    return ids;
}

Snapshot named(const std::string& host) {
    auto s = h200x2_snapshot();
    s.host.hostname = host;
    return s;
}

// 0000:00:07.0 bound to nvidia on PCIe, but the driver has no record of it (tests/scenarios/gpu-not-in-driver).
Snapshot gpu_not_in_driver(const std::string& host) {
    auto s = named(host);
    std::erase_if(s.module.nvidia_gpus, [](auto& g) { return g.address == kGpu1Pci; });
    return s;
}

// 0000:00:07.0 trained at Gen4 x8 in a Gen5 x16 slot (tests/scenarios/link-degraded).
Snapshot link_at_x8(const std::string& host) {
    auto s = named(host);
    for (auto& d : s.pcie.devices)
        if (d.address == kGpu1Pci) d.link_current = {16.0, 8, "16.0 GT/s PCIe"};
    return s;
}

void add_xid(Snapshot& s, const std::string& pci, int code) {
    XidEvent x;
    x.pci = pci;
    x.code = code;
    x.text = "NVRM: Xid (PCI:" + pci.substr(0, 12) + "): " + std::to_string(code) + ", pid=1234";
    s.kernel_log.xids.push_back(x);
}

const FleetClassReport* cls(const FleetReport& r, const std::string& name) {
    for (auto& c : r.classes)
        if (c.name == name) return &c;
    return nullptr;
}

std::filesystem::path scratch(const std::string& name) {
    auto p = std::filesystem::temp_directory_path() / ("gpudx-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
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

}  // namespace

TEST(FleetParse, FilteredParseGivesTheSameRecordAsTheFullSnapshot) {
    auto s = h200x2_snapshot();
    add_xid(s, kGpu0Pci, 79);
    auto n = parse_fleet_snapshot(snapshot_to_json(s).dump(2));
    ASSERT_TRUE(n) << n.error().message;
    EXPECT_EQ(node_record_to_json(n->record), node_record_to_json(make_node_record(s)));
    EXPECT_EQ(n->record.gpus[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
    EXPECT_EQ(n->collected_at, "2026-05-04T10:00:00Z");
    ASSERT_EQ(n->xids.size(), 1u);
    EXPECT_EQ(n->xids[0].code, 79);
    EXPECT_EQ(n->xids[0].pci, "0000:00:06.0");
}

TEST(FleetParse, TruncatedAndForeignJsonAreErrorsThatSaySo) {
    std::string whole = snapshot_to_json(h200x2_snapshot()).dump(2);
    auto cut = parse_fleet_snapshot(std::string_view(whole).substr(0, whole.size() / 2));
    ASSERT_FALSE(cut);
    EXPECT_EQ(cut.error().message.rfind("truncated, not valid JSON", 0), 0u) << cut.error().message;
    auto foreign = parse_fleet_snapshot(R"({"targets": ["a:9400"]})");
    ASSERT_FALSE(foreign);
    EXPECT_NE(foreign.error().message.find("not a gpudx snapshot"), std::string::npos);
    auto garbage = parse_fleet_snapshot("\x7f" "ELF\x02\x01");
    ASSERT_FALSE(garbage);
    EXPECT_NE(garbage.error().message.find("not valid JSON"), std::string::npos);
    auto wrong_type = parse_fleet_snapshot(R"({"schema_version": 1, "pcie": {"gpus": 5}})");
    ASSERT_FALSE(wrong_type);
    EXPECT_NE(wrong_type.error().message.find("does not match the schema"), std::string::npos);
}

TEST(FleetParse, NullLayersAndNullChosenLibraryAreAccepted) {
    auto n = parse_fleet_snapshot(
        R"({"schema_version": 1, "pcie": null, "nvml": null, "host": {"hostname": "gpu-a009", "kernel_release": null},
            "libraries": {"libraries": [{"soname": "libcuda.so.1", "chosen": null, "copies": []}]},
            "module": {"nvidia_gpus": [{"address": "0000:00:06.0", "uuid": "GPU-1", "minor": null, "fields": {"x": "y"}}]},
            "cuda": {"driver_version": 13000, "all": {"devices": [{"pci": "0000:00:07.0", "uuid": "GPU-2"}]}},
            "kernel_log": {"lines": [{"text": "NVRM: Xid"}], "xids": [{"pci": "0000:00:06.0", "code": 48, "pid": null}]},
            "collectors": [{"name": "pcie", "state": "ok"}], "future_key": {"nested": [1, 2, {"a": null}]}})");
    ASSERT_TRUE(n) << n.error().message;
    EXPECT_EQ(n->record.hostname, "gpu-a009");
    ASSERT_EQ(n->record.libraries.size(), 1u);
    EXPECT_EQ(n->record.libraries[0].path, "");
    ASSERT_EQ(n->record.gpus.size(), 2u);
    EXPECT_EQ(n->record.gpus[0].uuid, "GPU-1");
    EXPECT_EQ(n->record.gpus[1].uuid, "GPU-2");  // from cuda.all
    EXPECT_EQ(n->record.cuda_driver_version, 13000);
    ASSERT_EQ(n->xids.size(), 1u);
    EXPECT_EQ(n->xids[0].code, 48);
}

TEST(FleetParse, SchemaProblemsNameThePath) {
    auto newer = parse_fleet_snapshot(R"({"schema_version": 9, "pcie": {}})");
    ASSERT_FALSE(newer);
    EXPECT_NE(newer.error().message.find("newer than this gpudx understands"), std::string::npos);
    auto array = parse_fleet_snapshot(R"([{"schema_version": 1}])");
    ASSERT_FALSE(array);
    EXPECT_NE(array.error().message.find("not a gpudx snapshot"), std::string::npos);
    auto no_pcie = parse_fleet_snapshot(R"({"schema_version": 1, "host": {}})");
    ASSERT_FALSE(no_pcie);
    auto bad_vbios = parse_fleet_snapshot(R"({"schema_version": 1, "pcie": {}, "module": {"nvidia_gpus": [{"vbios": 7}]}})");
    ASSERT_FALSE(bad_vbios);
    EXPECT_EQ(bad_vbios.error().message, "snapshot does not match the schema: module.nvidia_gpus.vbios is not a string");
    auto devices_object = parse_fleet_snapshot(R"({"schema_version": 1, "pcie": {"devices": {}}})");
    ASSERT_FALSE(devices_object);
    EXPECT_EQ(devices_object.error().message,
              "snapshot does not match the schema: pcie.devices is an object, expected an array");
}

TEST(FleetCsv, FieldsAreEscapedPerRfc4180) {
    EXPECT_EQ(csv_field("580.159.04"), "580.159.04");
    EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
    EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
    EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
    EXPECT_EQ(csv_field(""), "");
}

TEST(FleetSummary, GroupsByClassCountsSpreadMissingAndXids) {
    auto m = example();
    std::vector<FleetNode> nodes;
    nodes.push_back(node_from(named("gpu-a001"), "a001.json"));
    auto drift = named("gpu-a002");
    drift.module.nvidia_driver_version = "580.126.09";
    add_xid(drift, kGpu1Pci, 79);
    add_xid(drift, kGpu1Pci, 79);
    add_xid(drift, kGpu0Pci, 13);
    nodes.push_back(node_from(drift, "a002.json"));
    auto lost = named("gpu-a003");
    std::erase_if(lost.module.nvidia_gpus, [](auto& g) { return g.address == kGpu1Pci; });
    std::erase_if(lost.pcie.devices, [](auto& d) { return d.address == kGpu1Pci; });
    std::erase_if(lost.pcie.gpus, [](auto& a) { return a == kGpu1Pci; });
    std::erase_if(lost.nvml.devices, [](auto& d) { return d.pci == kGpu1Pci; });
    std::erase_if(lost.cuda.caller.devices, [](auto& d) { return d.pci == kGpu1Pci; });
    add_xid(lost, kGpu0Pci, 13);
    nodes.push_back(node_from(lost, "a003.json"));
    nodes.push_back(node_from(named("lab-0001"), "lab.json"));

    auto r = summarize_fleet(m, nodes, {{"bad.json", "truncated, not valid JSON"}}, kToday);
    EXPECT_EQ(r.nodes, 4u);
    EXPECT_EQ(r.inputs, 5u);
    auto* h = cls(r, "h200x2");
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->nodes, 3u);
    EXPECT_EQ(h->conforming, 1u);
    EXPECT_EQ(h->drivers, (VersionCounts{{"580.126.09", 1}, {"580.159.04", 2}}));
    EXPECT_EQ(h->kernels, (VersionCounts{{"6.18.44-fc-v657-gpu", 3}}));
    EXPECT_EQ(h->vbios, (VersionCounts{{"96.00.a5.00.1a", 5}}));  // per GPU: 2 + 2 + 1
    ASSERT_EQ(h->missing.size(), 1u);
    EXPECT_EQ(h->missing[0].node, "gpu-a003");
    EXPECT_EQ(h->missing[0].seen, 1u);
    EXPECT_EQ(h->missing[0].expected, 2u);
    ASSERT_EQ(h->diverging.size(), 2u);
    EXPECT_EQ(h->diverging[0].node, "gpu-a002");
    EXPECT_EQ(h->diverging[0].findings[0].id, "matrix.driver_untested");
    EXPECT_EQ(h->divergence_nodes.at("matrix.gpu_count"), 1u);
    auto* u = cls(r, "(unclassified)");
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->nodes, 1u);
    EXPECT_EQ(cls(r, "h100x8-sxm")->nodes, 0u);

    EXPECT_EQ(r.xids_by_code, (std::map<int, size_t>{{13, 2}, {79, 2}}));
    EXPECT_EQ(r.xid_nodes_by_code, (std::map<int, size_t>{{13, 2}, {79, 1}}));
    ASSERT_EQ(r.xids_by_node.size(), 2u);
    EXPECT_EQ(r.xids_by_node[0].node, "gpu-a002");  // most Xids first
    EXPECT_EQ(r.xids_by_node[0].total, 3u);
    EXPECT_EQ(r.exit_code, 1);  // a node lost a card
}

TEST(FleetSummary, NewestSnapshotOfAHostCounts) {
    auto m = example();
    auto old_one = named("gpu-a001");
    old_one.collected_at = "2026-05-01T00:00:00Z";
    old_one.module.nvidia_driver_version = "570.172.08";
    auto new_one = named("gpu-a001");
    new_one.collected_at = "2026-05-02T00:00:00Z";
    auto r = summarize_fleet(m, {node_from(new_one, "new.json"), node_from(old_one, "old.json")}, {}, kToday);
    EXPECT_EQ(r.nodes, 1u);
    ASSERT_EQ(r.superseded.size(), 1u);
    EXPECT_EQ(r.superseded[0], (std::pair<std::string, std::string>{"old.json", "new.json"}));
    EXPECT_EQ(cls(r, "h200x2")->conforming, 1u);
    EXPECT_EQ(r.exit_code, 0);
}

TEST(FleetSummary, OverdueReviewMakesTheReportWarn) {
    auto m = example();
    auto r = summarize_fleet(m, {node_from(named("gpu-a001"), "a.json")}, {}, CalendarDate{2028, 1, 1});
    EXPECT_TRUE(cls(r, "h200x2")->review_overdue);
    EXPECT_EQ(cls(r, "h200x2")->conforming, 1u);  // the review is the class's business, not the node's
    EXPECT_EQ(r.exit_code, 2);
}

TEST(FleetReport, ReadsDirectoriesSkipsBadFilesAndNamesThem) {
    auto dir = scratch("fleet-read");
    std::filesystem::create_directories(dir / "rack1");
    std::ofstream(dir / "rack1" / "gpu-a001.json") << snapshot_to_json(named("gpu-a001")).dump(2);
    std::ofstream(dir / "gpu-a002.json") << snapshot_to_json(named("gpu-a002")).dump();
    std::string whole = snapshot_to_json(named("gpu-a003")).dump(2);
    std::ofstream(dir / "gpu-a003.json") << whole.substr(0, 1000);
    std::ofstream(dir / "empty.json") << "";
    std::ofstream(dir / "notes.txt") << "not read: no .json suffix";

    std::vector<FleetProblem> problems;
    auto files = expand_fleet_inputs({dir.string(), (dir / "nope.json").string()}, problems);
    EXPECT_EQ(files.size(), 4u);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].reason, "no such file or directory");

    FleetOptions o;
    o.jobs = 2;
    o.today = kToday;
    size_t last_done = 0, last_total = 0;
    o.progress = [&](size_t done, size_t total) {
        EXPECT_LE(done, total);
        last_done = done;
        last_total = total;
    };
    auto r = build_fleet_report(example(), files, problems, o);
    EXPECT_EQ(last_done, last_total);
    EXPECT_EQ(last_total, 4u);  // one pass: each file is read once, the rules run on it as it is read
    EXPECT_EQ(r.nodes, 2u);
    ASSERT_EQ(r.skipped.size(), 3u);
    std::map<std::string, std::string> why;
    for (auto& p : r.skipped) why[std::filesystem::path(p.file).filename()] = p.reason;
    EXPECT_EQ(why["gpu-a003.json"].rfind("truncated, not valid JSON", 0), 0u) << why["gpu-a003.json"];
    EXPECT_EQ(why["empty.json"], "empty file");
    EXPECT_EQ(why["nope.json"], "no such file or directory");
    EXPECT_EQ(cls(r, "h200x2")->conforming, 2u);
    EXPECT_EQ(r.exit_code, 2);  // skipped input is worth a look

    auto text = render_fleet_text(r, {});
    EXPECT_NE(text.find("Skipped 3 file(s):"), std::string::npos) << text;
    EXPECT_NE(text.find("gpu-a003.json: truncated"), std::string::npos) << text;
    EXPECT_NE(text.find("Class h200x2 (owner gpu-platform@example.com, review by 2027-06-30): 2 node(s), 2 conforming"),
              std::string::npos)
        << text;
    auto csv = render_fleet_csv(r);
    EXPECT_EQ(csv.rfind("record,class,node,file,key,value,detail\r\n", 0), 0u);
    EXPECT_NE(csv.find("spread,h200x2,,,driver,580.159.04,2\r\n"), std::string::npos) << csv;
    auto j = fleet_report_to_json(r);
    EXPECT_EQ(j["classes"][0]["spread"]["driver"]["580.159.04"], 2);
    std::filesystem::remove_all(dir);
}

TEST(FleetCli, TruncatedFileIsNamedAndTheRestReported) {
    auto dir = scratch("fleet-cli");
    std::ofstream(dir / "gpu-a001.json") << snapshot_to_json(named("gpu-a001")).dump(2);
    std::string whole = snapshot_to_json(named("gpu-a002")).dump(2);
    std::ofstream(dir / "gpu-a002.json") << whole.substr(0, whole.size() - 10);
    auto r = cli("fleet report --today 2026-06-01 --matrix " + kExample + " " + dir.string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find((dir / "gpu-a002.json").string() + ": truncated, not valid JSON"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1 node(s), 1 conforming"), std::string::npos) << r.out;

    auto none = cli("fleet report --matrix " + kExample + " " + (dir / "missing").string());
    EXPECT_EQ(none.status, 64) << none.out;
    EXPECT_NE(none.out.find("no snapshot files found"), std::string::npos) << none.out;

    std::ofstream(dir / "bad.toml") << "[[class]]\nname = \"x\"\nowner = \"o\"\nreview_by = 2030-01-01\nmatch = { gpus = 2 }\n";
    auto bad = cli("fleet report --matrix " + (dir / "bad.toml").string() + " " + dir.string());
    EXPECT_EQ(bad.status, 64) << bad.out;
    EXPECT_NE(bad.out.find("bad.toml:5: unknown key 'gpus'"), std::string::npos) << bad.out;
    std::filesystem::remove_all(dir);
}

TEST(FleetHealth, TheStreamingReaderReadsTheWholeSnapshotAsTheFullReaderDoes) {
    // The rules judge what read_whole_snapshot gives: it must be the snapshot snapshot_from_json gives, field
    // for field (compared as the JSON each writes back), or the report's findings would not be diagnose's.
    std::vector<Snapshot> cases{h200x2_snapshot(), gpu_not_in_driver("gpu-a002"), named("gpu-a003")};
    for (auto& s : cases) {
        std::string text = snapshot_to_json(s).dump(2);
        auto whole = read_whole_snapshot(text);
        ASSERT_TRUE(whole) << whole.error().message;
        auto full = snapshot_from_json(nlohmann::json::parse(text));
        ASSERT_TRUE(full) << full.error().message;
        EXPECT_EQ(snapshot_to_json(*whole), snapshot_to_json(*full));
        auto judged = judge_fleet_snapshot(text);
        ASSERT_TRUE(judged) << judged.error().message;
        EXPECT_EQ(judged->health_source, HealthSource::snapshot);
        EXPECT_EQ(ids_of(judged->health), ids_of(*health_from_snapshot(text)));
    }
    // A field only the rules read that is not what the schema says: the record is still made, health unknown.
    auto bad = judge_fleet_snapshot(R"({"schema_version": 1, "pcie": {}, "devices": {"nodes": 3}})");
    ASSERT_TRUE(bad) << bad.error().message;
    EXPECT_EQ(bad->health_source, HealthSource::none);
    EXPECT_TRUE(bad->health_error.starts_with("the rules could not run on the snapshot")) << bad->health_error;
}

TEST(FleetHealth, TheCapturedNodeIsHealthyByTheRules) {
    // Every other health test leans on this: the captured node, diagnosed from its snapshot, has no warning or
    // error finding (a false alarm on a healthy node would make every node of the fleet unhealthy).
    auto health = health_from_snapshot(snapshot_to_json(h200x2_snapshot()).dump());
    ASSERT_TRUE(health) << health.error().message;
    EXPECT_EQ(ids_of(*health), std::vector<std::string>{});
}

TEST(FleetHealth, AnErrorOrWarningFindingMakesANodeNonConforming) {
    // Both faulty nodes run exactly the tested versions: comparing versions alone called them conforming.
    auto m = example();
    auto r = summarize_fleet(m,
                             {node_from(named("gpu-a001"), "a001.json"), node_from(gpu_not_in_driver("gpu-a002"), "a002.json"),
                              node_from(link_at_x8("gpu-a003"), "a003.json")},
                             {}, kToday);
    auto* h = cls(r, "h200x2");
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->nodes, 3u);
    // The card the driver lost is known by its PCIe name only, which is not the class's model: a divergence
    // too. The node at x8 runs exactly the tested set.
    ASSERT_EQ(h->diverging.size(), 1u) << fleet_report_to_json(r)["classes"][0]["diverging"].dump(1);
    EXPECT_EQ(h->diverging[0].node, "gpu-a002");
    EXPECT_EQ(h->conforming, 1u);
    EXPECT_EQ(h->healthy, 1u);
    ASSERT_EQ(h->unhealthy.size(), 2u);
    EXPECT_EQ(h->unhealthy[0].node, "gpu-a002");
    EXPECT_EQ(h->unhealthy[0].source, HealthSource::snapshot);
    EXPECT_TRUE(contains(ids_of(h->unhealthy[0].findings), "module.gpu_not_in_driver"));
    EXPECT_EQ(h->unhealthy[1].node, "gpu-a003");
    EXPECT_EQ(ids_of(h->unhealthy[1].findings), std::vector<std::string>{"pcie.link_degraded"});
    ASSERT_TRUE(h->finding_nodes.contains("module.gpu_not_in_driver"));
    EXPECT_EQ(h->finding_nodes.at("module.gpu_not_in_driver").nodes, 1u);
    EXPECT_EQ(h->finding_nodes.at("module.gpu_not_in_driver").severity, Severity::error);
    EXPECT_EQ(h->finding_nodes.at("pcie.link_degraded").severity, Severity::warning);
    EXPECT_EQ(r.health_computed, 3u);
    EXPECT_EQ(r.exit_code, 1);  // an error finding
    // The report keeps what the fleet groups by, not each node's evidence.
    EXPECT_TRUE(h->unhealthy[0].findings[0].evidence.empty());
    EXPECT_EQ(h->unhealthy[0].findings[0].subjects.at(0).pci, kGpu1Pci);

    auto text = render_fleet_text(r, {});
    EXPECT_NE(text.find("3 node(s), 1 conforming, 1 diverging, 2 unhealthy"), std::string::npos) << text;
    EXPECT_NE(text.find("  Findings (nodes):\n    error   module.gpu_not_in_driver"), std::string::npos) << text;
    EXPECT_NE(text.find("      - error module.gpu_not_in_driver: "), std::string::npos) << text;
    auto csv = render_fleet_csv(r);
    EXPECT_NE(csv.find("finding,h200x2,gpu-a002,a002.json,module.gpu_not_in_driver,error,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("finding,h200x2,gpu-a003,a003.json,pcie.link_degraded,warning,"), std::string::npos) << csv;
    auto j = fleet_report_to_json(r);
    EXPECT_EQ(j["classes"][0]["finding_nodes"]["pcie.link_degraded"]["nodes"], 1);
    EXPECT_EQ(j["classes"][0]["unhealthy"][0]["health"], "snapshot");
    EXPECT_EQ(j["health"]["snapshot"], 3);
}

TEST(FleetHealth, AWarningFindingAloneMakesTheReportWarn) {
    auto r = summarize_fleet(example(), {node_from(link_at_x8("gpu-a001"), "a.json")}, {}, kToday);
    EXPECT_EQ(cls(r, "h200x2")->conforming, 0u);
    EXPECT_EQ(r.exit_code, 2);
}

TEST(FleetHealth, HealthUnknownIsNotConforming) {
    auto n = node_from(named("gpu-a001"), "a.json");
    n.health_source = HealthSource::none;
    n.health.clear();
    n.health_error = "the rules could not run on the snapshot: not valid JSON";
    auto r = summarize_fleet(example(), {n}, {}, kToday);
    auto* h = cls(r, "h200x2");
    EXPECT_EQ(h->conforming, 0u);
    EXPECT_EQ(h->health_unknown, 1u);
    ASSERT_EQ(h->unhealthy.size(), 1u);
    EXPECT_EQ(h->unhealthy[0].error, n.health_error);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(render_fleet_text(r, {}).find("- health unknown: the rules could not run"), std::string::npos);
}

TEST(FleetHealth, ASavedDiagnosisSpeaksForItsNode) {
    // The snapshot looks healthy; the node's own diagnosis, as new as it, says otherwise: the diagnosis counts
    // (it saw what the snapshot file does not carry, e.g. the driver layers of a --no-driver snapshot).
    auto snap = node_from(named("gpu-a001"), "a001.json");
    snap.health_source = HealthSource::none;
    snap.health.clear();
    auto diag = diagnosis_from(gpu_not_in_driver("gpu-a001"), "a001.diagnosis.json");
    diag.collected_at = snap.collected_at;
    std::vector<FleetNode> nodes{snap};
    auto left_out = attach_diagnoses(nodes, {diag});
    EXPECT_TRUE(left_out.empty());
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].health_source, HealthSource::diagnosis);
    EXPECT_EQ(nodes[0].health_file, "a001.diagnosis.json");
    EXPECT_TRUE(contains(ids_of(nodes[0].health), "module.gpu_not_in_driver"));
}

TEST(FleetHealth, AnOlderDiagnosisGivesWayToTheSnapshot) {
    std::vector<FleetNode> nodes{node_from(named("gpu-a001"), "a001.json")};
    nodes[0].health_source = HealthSource::none;
    auto diag = diagnosis_from(gpu_not_in_driver("gpu-a001"), "old.diagnosis.json");
    diag.collected_at = "2026-05-01T00:00:00Z";  // the snapshot is of 2026-05-04
    auto oldest = diagnosis_from(gpu_not_in_driver("gpu-a001"), "older-still.diagnosis.json");
    oldest.collected_at = "2026-04-01T00:00:00Z";
    auto left_out = attach_diagnoses(nodes, {oldest, diag});
    EXPECT_EQ(nodes[0].health_source, HealthSource::none);  // the rules will run on the snapshot
    EXPECT_EQ(left_out, (std::vector<std::pair<std::string, std::string>>{
                            {"older-still.diagnosis.json", "old.diagnosis.json"}, {"old.diagnosis.json", "a001.json"}}));
}

TEST(FleetHealth, ADiagnosisWithoutASnapshotIsANodeOfItsClassByHostname) {
    std::vector<FleetNode> nodes{node_from(named("gpu-a001"), "a001.json")};
    attach_diagnoses(nodes, {diagnosis_from(gpu_not_in_driver("gpu-a009"), "a009.diagnosis.json")});
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_FALSE(nodes[1].has_snapshot);
    auto r = summarize_fleet(example(), nodes, {}, kToday);
    auto* h = cls(r, "h200x2");
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->nodes, 2u);
    EXPECT_EQ(h->health_only, 1u);
    EXPECT_TRUE(h->diverging.empty());  // no versions to hold to the tested set: not a gpu_count divergence
    EXPECT_TRUE(h->missing.empty());
    EXPECT_EQ(h->drivers, (VersionCounts{{"580.159.04", 1}, {"unknown", 1}}));
    ASSERT_EQ(h->unhealthy.size(), 1u);
    EXPECT_EQ(h->unhealthy[0].node, "gpu-a009");
    EXPECT_EQ(h->unhealthy[0].source, HealthSource::diagnosis);
    EXPECT_EQ(r.health_saved, 1u);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(render_fleet_text(r, {}).find("1 node(s) known only from a saved diagnosis"), std::string::npos);
}

TEST(FleetHealth, SavedDiagnosisFormatErrorsNameTheField) {
    auto good = nlohmann::json::parse(saved_diagnosis(gpu_not_in_driver("gpu-a001")));
    auto d = parse_fleet_diagnosis(good.dump());
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_EQ(d->host, "gpu-a001");
    auto bad_severity = good;
    bad_severity["findings"][0]["severity"] = "fatal";
    auto e = parse_fleet_diagnosis(bad_severity.dump());
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().message,
              "saved diagnosis does not match its format: findings[0].severity \"fatal\" is not info, warning or error");
    auto bad_layer = good;
    bad_layer["findings"][0]["layer"] = 3;
    e = parse_fleet_diagnosis(bad_layer.dump());
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().message, "saved diagnosis does not match its format: findings[0].layer 3 is not a layer");
    auto newer = good;
    newer["schema_version"] = 7;
    e = parse_fleet_diagnosis(newer.dump());
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("newer than this gpudx understands"), std::string::npos);
    EXPECT_FALSE(parse_fleet_diagnosis(R"({"verdict": "healthy"})"));
}

TEST(FleetHealth, ReadFleetInputTellsASnapshotFromADiagnosis) {
    auto dir = scratch("fleet-input");
    std::ofstream(dir / "gpu-a001.json") << snapshot_to_json(named("gpu-a001")).dump(2);
    std::ofstream(dir / "gpu-a002.json") << saved_diagnosis(gpu_not_in_driver("gpu-a002"));
    std::ofstream(dir / "other.json") << R"({"verdict": "ok", "targets": []})";
    std::string buffer;
    auto snap = read_fleet_input((dir / "gpu-a001.json").string(), buffer);
    ASSERT_TRUE(snap) << snap.error().message;
    EXPECT_TRUE(std::holds_alternative<FleetNode>(*snap));
    auto diag = read_fleet_input((dir / "gpu-a002.json").string(), buffer);
    ASSERT_TRUE(diag) << diag.error().message;
    ASSERT_TRUE(std::holds_alternative<FleetDiagnosis>(*diag));
    EXPECT_EQ(std::get<FleetDiagnosis>(*diag).host, "gpu-a002");
    auto other = read_fleet_input((dir / "other.json").string(), buffer);
    ASSERT_FALSE(other);
    EXPECT_NE(other.error().message.find("not a gpudx snapshot"), std::string::npos) << other.error().message;

    // The whole report: the snapshot is judged by the rules, the diagnosis speaks for its node.
    FleetOptions o;
    o.today = kToday;
    auto r = build_fleet_report(example(), {(dir / "gpu-a001.json").string(), (dir / "gpu-a002.json").string()}, {}, o);
    EXPECT_EQ(r.nodes, 2u);
    EXPECT_EQ(r.health_computed, 1u);
    EXPECT_EQ(r.health_saved, 1u);
    EXPECT_EQ(cls(r, "h200x2")->conforming, 1u);
    EXPECT_EQ(r.exit_code, 1);
    std::filesystem::remove_all(dir);
}

}  // namespace GPUDX_UNITY_ID
