// gpudx report: the node as one self-contained HTML page (docs/report.md), from this node, a saved snapshot or a
// saved diagnosis, with an acceptance record and the agent's events beside it when given.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/events.hpp"
#include "app/command.hpp"
#include "app/common.hpp"
#include "core/input_file.hpp"
#include "identity/page_identity.hpp"
#include "render/html.hpp"
#include "rules/comparisons/held_to.hpp"
#include "rules/engine/diagnose.hpp"

namespace gpudx::app {

namespace {

struct ReportCmdOptions {
    NodeOptions node;
    std::string from, accept, accept_reference, events, output;
    std::optional<unsigned> expect_gpus;
    std::string baseline, matrix, xid_policy, signatures;
    std::vector<std::string> error_codes;
};

constexpr size_t kMaxInputBytes = 256u << 20;

// A JSON file the user named: a file that cannot be read or parsed is a usage error naming it (and, for JSON, the
// line and column where it went wrong).
nlohmann::json read_json_file(const std::string& path, const char* what) {
    auto text = read_input_file(path, kMaxInputBytes);
    if (!text) throw UsageError{path + ": cannot read the " + what + ": " + text.error().message};
    // Fault-isolation boundary: a reader of a third-party format; only the exception says where the JSON went wrong.
    try {
        return nlohmann::json::parse(*text);
    } catch (const nlohmann::json::parse_error& e) {
        throw UsageError{path + ": not valid JSON: " + e.what()};
    }
}

// The agent's /v1/events answer ({"events": [...]}) or a bare array of its events.
std::vector<PageEvent> load_events(const std::string& path) {
    auto j = read_json_file(path, "events");
    const nlohmann::json* list = &j;
    if (j.is_object()) {
        auto it = j.find("events");
        if (it == j.end()) throw UsageError{path + ": not the agent's events: no \"events\" (gpudx agent's /v1/events)"};
        list = &*it;
    }
    if (!list->is_array()) throw UsageError{path + ": not the agent's events: \"events\" is not a list"};
    std::vector<PageEvent> out;
    for (const auto& e : *list) {
        if (!e.is_object()) throw UsageError{fmt::format("{}: events[{}] is not an event object", path, out.size())};
        out.push_back(page_event_of(event_from_json(e)));
    }
    return out;
}

bool looks_like_diagnosis(const nlohmann::json& j) {
    return j.is_object() && j.contains("verdict") && j.contains("findings") && !j.contains("pcie");
}

struct Built {
    Snapshot snapshot;
    NodePage page;
    AcceptReport accept, accept_reference;
};

void build_page(const ReportCmdOptions& o, Built& b) {
    auto baseline = load_baseline_option(o.baseline);
    auto matrix = load_matrix_option(o.matrix);
    DiagnoseOptions dopts;
    JudgeFiles judge_files;
    NodeOptions node = o.node;
    load_judge_files(o.xid_policy, o.signatures, o.error_codes, judge_files, dopts, node);
    dopts.expect_gpus = o.expect_gpus;
    dopts.since = o.node.since;

    // The other inputs before the node is read: a mistake in one is told before the deadline is spent.
    std::optional<std::vector<PageEvent>> events;
    if (!o.events.empty()) events = load_events(o.events);
    if (!o.accept.empty()) {
        auto r = load_accept_report(o.accept);
        if (!r) throw UsageError{o.accept + ": " + r.error().message};
        b.accept = std::move(*r);
    }
    if (!o.accept_reference.empty()) {
        auto r = load_accept_report(o.accept_reference);
        if (!r) throw UsageError{o.accept_reference + ": " + r.error().message};
        b.accept_reference = std::move(*r);
    }

    std::vector<std::string> missing;
    if (!o.from.empty()) {
        auto doc = read_json_file(o.from, "saved snapshot or diagnosis");
        if (looks_like_diagnosis(doc)) {
            auto saved = diagnosis_from_json(doc);
            if (!saved) throw UsageError{o.from + ": " + saved.error().message};
            b.snapshot.host.hostname = saved->host;
            b.snapshot.collected_at = saved->collected_at;
            b.snapshot.root = saved->root;
            b.snapshot.collectors = saved->collectors;
            missing = missing_json_fields(diagnosis_to_json(b.snapshot, saved->diagnosis), doc);
            b.page = NodePage{};
            b.page.node = saved->host;
            b.page.collected_at = saved->collected_at;
            b.page.generated_by = std::string("gpudx ") + GPUDX_VERSION;
            b.page.diagnosis = std::move(saved->diagnosis);
            b.page.collectors = std::move(saved->collectors);
            b.page.source = "saved diagnosis " + o.from;
            missing.push_back("kernel, driver, identity table and topology: a saved diagnosis holds none of them (save "
                              "a snapshot with gpudx snapshot -o FILE)");
        } else {
            auto s = snapshot_from_json(doc);
            if (!s) throw UsageError{o.from + ": " + s.error().message};
            b.snapshot = std::move(*s);
            missing = missing_json_fields(snapshot_to_json(b.snapshot), doc);
        }
    } else {
        b.snapshot = collect_node(node);
    }
    if (b.page.source.empty()) {  // a snapshot, read or collected: diagnosed here, as `diagnose` would
        auto held = hold_node_to(b.snapshot, baseline, matrix);
        dopts.extra_findings = std::move(held.findings);
        b.page = node_page_of(b.snapshot, diagnose(b.snapshot, dopts));
        b.page.source = o.from.empty() ? "this node, read now" : "saved snapshot " + o.from;
    }
    b.page.missing = std::move(missing);
    if (!o.accept.empty()) {
        b.page.accept = &b.accept;
        b.page.accept_source = o.accept;
        if (!o.accept_reference.empty()) {
            b.page.accept_reference = &b.accept_reference;
            b.page.accept_reference_source = o.accept_reference;
        }
    }
    b.page.events = std::move(events);
}

int run_report(const ReportCmdOptions& o) {
    Built b;
    build_page(o, b);
    auto written = try_write_output(o.output, render_node_page_html(b.page), OutputKind::data);
    if (!written) throw_write_error(written.error());
    return b.page.diagnosis.exit_code;
}

}  // namespace

std::string render_node_report(const Snapshot& s, const std::string& source) {
    NodePage page = node_page_of(s, diagnose(s, DiagnoseOptions{}));
    page.source = source;
    return render_node_page_html(page);
}

namespace {

CommandRegistrar register_report{
    {"report", "The node as one self-contained HTML page: layers, findings, identity, topology, acceptance, events", 12,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<ReportCmdOptions>();
         add_node_options(cmd, o->node);
         auto* from = cmd.add_option("--from", o->from,
                                     "Make the page from a saved snapshot (gpudx snapshot -o FILE) or a saved diagnosis "
                                     "(gpudx diagnose --format json) instead of reading this node")
                          ->type_name("FILE");
         exclude_node_sources(from, cmd);
         cmd.add_option("--accept", o->accept, "Draw this acceptance record (gpudx accept -o FILE) too")
             ->type_name("FILE");
         cmd.add_option("--accept-reference", o->accept_reference,
                        "Draw each of --accept's figures against this earlier record of the node (a tick per bar)")
             ->type_name("FILE")
             ->needs("--accept");
         cmd.add_option("--events", o->events,
                        "Draw the agent's events from this file (a saved answer of its /v1/events) as a timeline")
             ->type_name("FILE");
         cmd.add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         cmd.add_option("--expect-gpus", o->expect_gpus, "Number of GPUs this node should have on PCIe");
         cmd.add_option("--baseline", o->baseline, "Also compare with this node record (gpudx baseline save)")
             ->type_name("FILE");
         cmd.add_option("--matrix", o->matrix, "Also hold the node to its class in this compatibility matrix (TOML)")
             ->type_name("FILE");
         cmd.add_option("--xid-policy", o->xid_policy, "Xid severities from this TOML file")->type_name("FILE");
         cmd.add_option("--signatures", o->signatures, "Site signature catalogue (TOML)")->type_name("FILE");
         cmd.add_option("--error-codes", o->error_codes, "Site result-code table (TOML, as for diagnose; repeatable)")
             ->type_name("FILE");
         cmd.footer(
             "One HTML file with its style and drawings inside: no script, nothing fetched from anywhere, readable\n"
             "offline and printable (docs/report.md). From a saved file made by an older gpudx, the page lists the\n"
             "fields it lacks and shows the rest.\n\n"
             "Exit codes: the diagnosis's, as `gpudx diagnose`: 0 healthy, 1 error findings, 2 warnings only,\n"
             "3 could not evaluate; 64 usage error (an input that cannot be read or is not what it should be),\n"
             "74 the page could not be written whole (standard output or -o FILE).\n\n"
             "Examples:\n  gpudx report -o node.html\n  gpudx report --from node17.snapshot.json -o node17.html\n"
             "  gpudx report --from node17.json --accept accept.json --events events.json -o node17.html\n"
             "  curl -s localhost:9400/v1/events > events.json   # the agent's events, for --events");
         return [o] { return run_report(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app
