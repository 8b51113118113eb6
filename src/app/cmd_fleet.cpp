#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/engine/diagnose.hpp"
#include "fleet/fleet.hpp"
#include "render/fleet.hpp"
#include "render/html.hpp"

namespace gpudx::app {
namespace {

struct FleetCmdOptions {
    std::string matrix;
    std::vector<std::string> inputs;
    std::string format = "text";
    std::string output;
    unsigned jobs = 0;
    size_t limit = 50;
    std::string today;
    bool quiet = false;
};

int run_fleet_report(const FleetCmdOptions& o) {
    FleetOptions fo;
    if (!o.today.empty()) {
        auto d = CalendarDate::parse(o.today);
        if (!d) throw UsageError{"--today " + o.today + ": not a date (YYYY-MM-DD)"};
        fo.today = *d;
    }
    auto m = load_matrix(o.matrix);
    if (!m) throw UsageError{m.error().message};
    fo.jobs = o.jobs ? o.jobs : std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
    std::vector<FleetProblem> problems;
    auto files = expand_fleet_inputs(o.inputs, problems);
    if (files.empty() && problems.size() == o.inputs.size())
        throw UsageError{"no snapshot files found in " + o.inputs.front() +
                         (o.inputs.size() > 1 ? " (and the other inputs)" : "")};
    // Progress only where a person watches; scripts and pipes stay quiet.
    if (!o.quiet && ::isatty(STDERR_FILENO) == 1) {
        fo.progress = [](size_t done, size_t total) {
            std::fprintf(stderr, "\rreading snapshots %zu/%zu", done, total);
            if (done == total) std::fprintf(stderr, "\r\033[K");
            std::fflush(stderr);
        };
    }
    auto report = build_fleet_report(*m, files, std::move(problems), fo);
    if (o.format == "json")
        write_output(o.output, fleet_report_to_json(report).dump(2) + "\n", OutputKind::data);
    else if (o.format == "csv")
        write_output(o.output, render_fleet_csv(report), OutputKind::data);
    else if (o.format == "html")  // one page, aggregated per class; --limit bounds the nodes it lists
        write_output(o.output, render_fleet_html(report, {.node_rows = o.limit ? o.limit * 4 : 200}), OutputKind::data);
    else {
        bool coloured = o.output.empty() && stdout_is_terminal();
        write_output(o.output, render_fleet_text(report, {o.limit, coloured}), text_output(coloured));
    }
    return report.exit_code;
}

CommandRegistrar register_fleet{
    {"fleet", "Compare many saved snapshots against the compatibility matrix: drift, missing GPUs, Xids", 42,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<FleetCmdOptions>();
         cmd.require_subcommand(1);
         auto* report = cmd.add_subcommand("report", "Group nodes by class and report every divergence");
         report->add_option("--matrix", o->matrix, "The matrix TOML file")->required()->type_name("FILE");
         report->add_option("SNAPSHOT", o->inputs, "Snapshot JSON files, or directories searched for *.json")
             ->required();
         report->add_option("--format", o->format,
                            "text (default), json, csv, html (one self-contained page: heat maps of classes and nodes "
                            "against checks, versions per class; docs/report.md)")
             ->check(CLI::IsMember({"text", "json", "csv", "html"}));
         report->add_option("-o,--output", o->output, "Write to FILE (atomically) instead of stdout")->type_name("FILE");
         report->add_option("-j,--jobs", o->jobs, "Parsing threads (default: the CPUs, at most 8)")
             ->check(CLI::Range(1u, 64u));
         report->add_option("--limit", o->limit,
                            "Text: most entries shown per list, 0 for all; html: 4 times as many nodes drawn (200 for 0)")->capture_default_str()
             ->check(non_negative_number());
         report->add_option("--today", o->today, "Date to judge review_by against (default: today, UTC)")
             ->type_name("YYYY-MM-DD");
         report->add_flag("-q,--quiet", o->quiet, "No progress line on the terminal");
         cmd.footer(
             "A file that is truncated or is not a gpudx snapshot is named and skipped; the rest is reported.\n"
             "Several snapshots of one hostname: the newest (collected_at) counts.\n\n"
             "Exit codes: 0 every node within its class, 1 a node lost cards or has a card of another model,\n"
             "2 other divergence, unclassified nodes, overdue reviews or skipped files, 64 usage error.\n\n"
             "Examples:\n  gpudx fleet report --matrix /etc/gpudx/matrix.toml /srv/gpudx/snapshots\n"
             "  gpudx fleet report --matrix examples/matrix.toml --format csv -o drift.csv snaps/*.json\n"
             "  gpudx fleet report --matrix examples/matrix.toml --format html -o fleet.html snaps/");
         return [o, report]() -> int { return report->parsed() ? run_fleet_report(*o) : kExitUsage; };
     }}};

}  // namespace
}  // namespace gpudx::app
