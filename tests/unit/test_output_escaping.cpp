// Every output format escapes what it prints (docs/reliability.md, "Safety"): strings that come from the node
// (process names, paths, UUIDs from procfs, hostnames in saved snapshots) may hold quotes, separators,
// newlines, terminal escapes and invalid UTF-8. Prometheus labels: tests/unit/test_formats.cpp
// (HostileLabelValuesStayInsideTheirSample) and the hostile-strings scenario.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/json_support.hpp"
#include "rules/engine/diagnose.hpp"
#include "identity/join.hpp"
#include "rules/comparisons/baseline.hpp"
#include "render/records.hpp"
#include "fleet/fleet.hpp"
#include "render/fleet.hpp"
#include "render/report.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {

// A process name as hostile as /proc/PID/comm allows: quote, backslash, newline, ESC sequences (clear
// screen, set title), a C1 CSI (U+009B), BEL, DEL and a byte that is not UTF-8.
const std::string kHostileName = "py\"th\\on\n\x1b[2J\x1b]0;owned\x07\xc2\x9b" "31m\x7f\xff";

Snapshot snapshot_with_hostile_holder() {
    Snapshot s;
    s.host.hostname = "node\x1b[1m-7\n";
    s.root = "/";
    CollectorStatus devices;
    devices.name = "devices";
    devices.state = CollectorState::ok;
    devices.problems.push_back({"/proc/4242/fd/\xff", "cannot read: \x1b[31mPermission denied"});
    s.collectors.push_back(devices);
    DeviceHolder h;
    h.pid = 4242;
    h.name = kHostileName;
    h.state = "Z";
    h.devices = {"/dev/nvidia1"};
    s.devices.holders.push_back(h);
    s.libraries.ld_library_path = {"/opt/\xfe\xfflib"};
    return s;
}

// RFC 4180 reader: fields of each record.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
    std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
    bool quoted = false;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') rows.back().back() += '"', ++i;
            else if (c == '"') quoted = false;
            else rows.back().back() += c;
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            rows.back().emplace_back();
        } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
            continue;
        } else if (c == '\n') {
            rows.emplace_back(1);
        } else {
            rows.back().back() += c;
        }
    }
    if (rows.back().size() == 1 && rows.back()[0].empty()) rows.pop_back();
    return rows;
}

void expect_no_terminal_controls(const std::string& text) {
    for (size_t i = 0; i < text.size(); ++i) {
        auto u = static_cast<unsigned char>(text[i]);
        if (u == '\n') continue;  // the renderer's own line breaks
        ASSERT_FALSE(u < 0x20 || u == 0x7f) << "control byte " << int(u) << " at " << i << " in:\n" << text;
        ASSERT_FALSE(u == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F)
            << "C1 control at " << i << " in:\n" << text;
    }
}

}  // namespace

TEST(OutputEscaping, JsonStringsAreEscapedAndInvalidUtf8Repaired) {
    auto s = snapshot_with_hostile_holder();
    std::string text;
    ASSERT_NO_THROW(text = snapshot_to_json(s).dump(2));
    EXPECT_EQ(text.find('\x1b'), std::string::npos);  // written as \u001b
    EXPECT_NE(text.find("\\u001b[2J"), std::string::npos) << text;
    auto back = nlohmann::json::parse(text);
    // Everything valid survives exactly; only the invalid byte became U+FFFD.
    EXPECT_EQ(back["devices"]["holders"][0]["name"], "py\"th\\on\n\x1b[2J\x1b]0;owned\x07\xc2\x9b" "31m\x7f\xEF\xBF\xBD");
    EXPECT_EQ(back["libraries"]["ld_library_path"][0], "/opt/\xEF\xBF\xBD\xEF\xBF\xBDlib");

    auto d = diagnose(s, {});
    ASSERT_NO_THROW(text = diagnosis_to_json(s, d).dump(2));
    auto dj = nlohmann::json::parse(text);
    bool found = false;
    for (auto& f : dj["findings"])
        if (f["id"] == "devices.stuck_holder") found = true;
    EXPECT_TRUE(found) << text;
}

// The agent's /v1/status writes the diagnosis a finding at a time (diagnosis_json_text): the same bytes as the whole
// tree's text, with hostile strings, without findings, and with thousands of them.
TEST(OutputEscaping, TheDiagnosisWrittenAFindingAtATimeIsTheTreesText) {
    auto s = snapshot_with_hostile_holder();
    auto d = diagnose(s, {});
    const nlohmann::json agent = {{"agent", {{"version", "x"}, {"findings", {1, 2}}, {"note", "bad \xff byte"}}}};
    auto tree_text = [&](const Diagnosis& dd) {
        auto j = diagnosis_to_json(s, dd);
        for (auto& [k, v] : agent.items()) j[k] = v;
        repair_utf8(j);
        return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    ASSERT_FALSE(d.findings.empty());
    EXPECT_EQ(diagnosis_json_text(s, d, agent), tree_text(d));
    Diagnosis none = d;
    none.findings.clear();
    EXPECT_EQ(diagnosis_json_text(s, none, agent), tree_text(none));
    Diagnosis many = d;
    for (int i = 0; i < 3000; ++i) {
        Finding f = d.findings.front();
        f.message += " \xc3(" + std::to_string(i) + ")\n\x1b[2J";
        f.subjects.push_back({"GPU-63acd0f2-e950-182f-ae7d-ac246f19966d", "0000:00:06.0"});
        many.findings.push_back(std::move(f));
    }
    EXPECT_EQ(diagnosis_json_text(s, many, agent), tree_text(many));
}

TEST(OutputEscaping, TextOutputStripsTerminalControlsFromProcessNames) {
    auto s = snapshot_with_hostile_holder();
    auto d = diagnose(s, {});
    for (bool verbose : {false, true}) {
        std::string text = render_diagnosis_text(s, d, RenderOptions{false, verbose});
        expect_no_terminal_controls(text);
        // The name's newline cannot start a line of its own: the forged text stays on the finding's line.
        EXPECT_EQ(text.find("\n?[2J"), std::string::npos) << text;
        EXPECT_NE(text.find("py\"th\\on??[2J?]0;owned??31m?\xEF\xBF\xBD"), std::string::npos) << text;
    }
    expect_no_terminal_controls(render_snapshot_text(s));
    expect_no_terminal_controls(render_findings_text(d.findings));
}

TEST(OutputEscaping, TextOutputStripsControlsFromGpuNames) {
    // A UUID is read from procfs and NVML: it reaches the "gpu:" line of every finding that names the GPU.
    Snapshot s;
    Diagnosis d;
    d.findings.push_back({"devices.holder", Layer::devices, Severity::error,
                          {GpuRef{"GPU-\x1b[2J\nforged line", "0000:00:07.0\x1b]0;t\x07"}}, "m", {}, "n"});
    std::string text = render_diagnosis_text(s, d, RenderOptions{});
    expect_no_terminal_controls(text);
    EXPECT_EQ(text.find("\nforged line"), std::string::npos) << text;
}

TEST(OutputEscaping, TextOutputKeepsItsOwnColoursOnly) {
    auto s = snapshot_with_hostile_holder();
    auto d = diagnose(s, {});
    std::string text = render_diagnosis_text(s, d, RenderOptions{true, true});
    // Colour codes are gpudx's own SGR sequences; none of the name's escapes (clear screen, title) remain.
    EXPECT_EQ(text.find("\x1b[2J"), std::string::npos);
    EXPECT_EQ(text.find("\x1b]0;"), std::string::npos);
    EXPECT_EQ(text.find('\x07'), std::string::npos);
}

TEST(OutputEscaping, FleetCsvFieldsRoundTrip) {
    FleetReport r;
    const std::string file = "/srv/snap,shots/\"odd\"\r\nname.json";
    const std::string reason = "not valid JSON: line 1,\ncolumn 2";
    r.skipped.push_back({file, reason});
    auto rows = parse_csv(render_fleet_csv(r));
    ASSERT_EQ(rows.size(), 2u);
    ASSERT_EQ(rows[1].size(), rows[0].size());
    EXPECT_EQ(rows[1][0], "skipped");
    EXPECT_EQ(rows[1][3], file);
    EXPECT_EQ(rows[1][6], reason);
}

TEST(OutputEscaping, IdsCsvFieldsRoundTrip) {
    IdentityTable t;
    IdentityRow row;
    row.pci = "0000:00:06.0";
    row.model = "NVIDIA \"H200\", NVL\r\nx";
    row.slot = "slot\r7";
    t.rows.push_back(row);
    auto rows = parse_csv(render_identity_csv(t));
    ASSERT_EQ(rows.size(), 2u);
    ASSERT_EQ(rows[1].size(), rows[0].size());
    EXPECT_EQ(rows[1][0], "0000:00:06.0");
    EXPECT_EQ(rows[1][1], "slot\r7");
    auto model = std::find(rows[0].begin(), rows[0].end(), "model") - rows[0].begin();
    ASSERT_LT(static_cast<size_t>(model), rows[0].size());
    EXPECT_EQ(rows[1][model], row.model);
    expect_no_terminal_controls(render_identity_text(t));
    EXPECT_NO_THROW((void)identity_to_json(t).dump());
}

TEST(OutputEscaping, NodeRecordWithInvalidBytesStillWrites) {
    NodeRecord r;
    r.hostname = "gpu\xff-a17";
    RecordedGpu g;
    g.pci = "0000:00:06.0";
    g.model = "NVIDIA H200\xc0";
    r.gpus.push_back(g);
    std::string text;
    ASSERT_NO_THROW(text = node_record_to_json(r).dump());
    auto back = node_record_from_json(nlohmann::json::parse(text));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->hostname, "gpu\xEF\xBF\xBD-a17");
}

}  // namespace GPUDX_UNITY_ID
