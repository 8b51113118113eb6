#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/engine/diagnose.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"
#include "render/records.hpp"

namespace gpudx::app {
namespace {

struct MatrixOptions {
    NodeOptions node;
    std::string matrix;
    std::string from;
    std::string format = "text";
    std::string today;  // for reproducible output (tests); default: the current UTC date
};

CalendarDate today_from(const std::string& text) {
    if (text.empty()) return today_utc();
    auto d = CalendarDate::parse(text);
    if (!d) throw UsageError{"--today " + text + ": not a date (YYYY-MM-DD)"};
    return *d;
}

int run_matrix_check(const MatrixOptions& o) {
    auto today = today_from(o.today);
    auto m = load_matrix(o.matrix);
    if (!m) throw UsageError{m.error().message};
    Snapshot s = load_or_collect(o.from, o.node);
    auto record = make_node_record(s);
    auto check = check_node_against_matrix(*m, record, today);
    std::string text = o.format == "json" ? matrix_check_to_json(*m, record, check).dump(2) + "\n"
                                          : render_matrix_check_text(*m, record, check, stdout_is_terminal());
    write_output("", text, o.format == "json" ? OutputKind::data : text_output(stdout_is_terminal()));
    return check.exit_code;
}

int run_matrix_validate(const MatrixOptions& o) {
    auto today = today_from(o.today);
    auto m = load_matrix(o.matrix);
    if (!m) throw UsageError{m.error().message};
    int code = kExitHealthy;
    std::string text;
    for (auto& c : m->classes) {
        bool overdue = c.review_by < today;
        text += fmt::format("{:<20} line {:<4} owner {}, review by {}{}\n", c.name, c.line, c.owner, c.review_by.str(),
                            overdue ? " (OVERDUE)" : "");
        if (overdue) code = kExitWarnings;
    }
    write_output("", text, OutputKind::text);
    return code;
}

CommandRegistrar register_matrix{
    {"matrix", "Check this node against the compatibility matrix (node classes and their tested sets)", 41,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<MatrixOptions>();
         cmd.require_subcommand(1);
         auto* check = cmd.add_subcommand("check", "Name the node's class and every divergence from its tested set");
         check->add_option("--matrix", o->matrix, "The matrix TOML file")->required()->type_name("FILE");
         add_node_options(*check, o->node);
         exclude_node_sources(
             check->add_option("--from", o->from, "Check a saved snapshot instead of collecting")->type_name("SNAPSHOT"),
             *check);
         check->add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         check->add_option("--today", o->today, "Date to judge review_by against (default: today, UTC)")
             ->type_name("YYYY-MM-DD");
         auto* validate = cmd.add_subcommand("validate", "Parse the matrix and list its classes (errors name the line)");
         validate->add_option("--matrix", o->matrix, "The matrix TOML file")->required()->type_name("FILE");
         validate->add_option("--today", o->today, "Date to judge review_by against")->type_name("YYYY-MM-DD");
         cmd.footer(
             "Matrix format: docs/baseline-matrix-fleet.md; example: examples/matrix.toml.\n\n"
             "Exit codes: 0 within the tested set, 1 cards missing or of another model, 2 other divergence or\n"
             "review overdue, 64 usage error (unreadable matrix: the message names file and line).\n\n"
             "Examples:\n  gpudx matrix check --matrix /etc/gpudx/matrix.toml\n"
             "  gpudx matrix check --matrix examples/matrix.toml --from node.json --format json");
         return [o, check, validate]() -> int {
             if (check->parsed()) return run_matrix_check(*o);
             if (validate->parsed()) return run_matrix_validate(*o);
             return kExitUsage;
         };
     }}};

}  // namespace
}  // namespace gpudx::app
