// gpudx: a thin entry point. All logic lives in libgpudx; each subcommand in app/cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "app/command.hpp"
#include "app/common.hpp"
#include "core/error.hpp"
#include "rules/engine/diagnose.hpp"

namespace gpudx::app {
std::vector<Command>& commands() {
    static std::vector<Command> all;
    return all;
}
}  // namespace gpudx::app

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// The command a mistyped name most likely meant: a few letters off, or the start of exactly one name.
std::optional<std::string> closest_command(std::string_view typed, const std::vector<std::string>& names) {
    std::optional<std::string> best;
    size_t best_distance = std::max<size_t>(2, typed.size() / 3) + 1;
    for (const auto& n : names)
        if (size_t d = edit_distance(typed, n); d < best_distance) best = n, best_distance = d;
    if (best) return best;
    std::vector<std::string> starting;
    for (const auto& n : names)
        if (typed.size() >= 2 && n.starts_with(typed)) starting.push_back(n);
    if (starting.size() == 1) return starting.front();
    return std::nullopt;
}

bool takes_values(const CLI::App& level) {
    for (const auto* opt : level.get_options())
        if (opt->get_items_expected_max() > 0) return true;
    return false;
}

std::string command_path(const CLI::App* level) {
    std::string path;
    for (; level; level = level->get_parent()) path = level->get_name() + (path.empty() ? "" : " " + path);
    return path;
}

// CLI11 takes a mistyped command for a stray argument, and answers `gpudx no-such-command --help` with the
// main help and exit 0. Walks the words down the command tree first; at a level that has subcommands and
// only flags, the first word must be one of its subcommands.
std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv) {
    CLI::App* level = &app;
    for (int i = 1; i < argc; ++i) {
        std::string_view word = argv[i];
        if (word == "--") return std::nullopt;
        if (word.starts_with('-')) continue;
        auto subs = level->get_subcommands([](const CLI::App*) { return true; });
        if (subs.empty() || takes_values(*level)) return std::nullopt;
        auto known = std::find_if(subs.begin(), subs.end(), [&](CLI::App* s) { return s->check_name(std::string(word)); });
        if (known != subs.end()) {
            level = *known;
            continue;
        }
        std::vector<std::string> names;
        for (auto* s : subs) names.push_back(s->get_name());
        std::string where = level == &app ? "" : command_path(level).substr(app.get_name().size() + 1) + " ";
        std::string message = fmt::format("unknown {}command '{}'", where, word);
        if (auto guess = closest_command(word, names)) message += fmt::format("; did you mean '{}'?", *guess);
        message += fmt::format(" (`{} --help` lists the commands)", command_path(level));
        return message;
    }
    return std::nullopt;
}

// The command whose options were being read when parsing failed, for the error line.
const CLI::App* deepest_parsed(const CLI::App& app) {
    const CLI::App* level = &app;
    for (auto subs = level->get_subcommands(); !subs.empty(); subs = level->get_subcommands()) level = subs.front();
    return level;
}

// Parses the command line and runs the command; its exit code. What it printed is not yet known to have
// arrived: main() finishes standard output after.
int run_command_line(int argc, char** argv) {
    using namespace gpudx;
    CLI::App app{
        "gpudx — find where a GPU node's stack is broken, name every GPU by UUID and PCI address,\n"
        "and keep identity right across checkpoint/restore.\n\n"
        "Start with `gpudx diagnose` (this node) or `gpudx diagnose --root CAPTURE` (a saved node).\n"
        "Exit codes: 0 healthy, 1 error findings, 2 warnings only, 3 could not evaluate, 64 usage error,\n"
        "74 the output could not be written (standard output or -o FILE: a full disk, an I/O error).",
        "gpudx"};
    app.set_version_flag("--version", std::string("gpudx ") + GPUDX_VERSION);
    app.require_subcommand(1);
    app.fallthrough(false);

    auto& cmds = app::commands();
    std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.order < b.order; });
    // Only the command named on the line gets its options: building every command's options costs a few million
    // instructions per start (about 1 ms), paid by every run of every command. The others are listed by name and
    // summary, which is all the unknown-command check, --version and the parser need of them. Only a help asked
    // for without a command (`gpudx --help`, `--help-all`) sets every command up, as the full help lists them.
    std::string_view chosen;
    bool help_asked = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view word = argv[i];
        if (word == "-h" || word.starts_with("--help")) help_asked = true;
        else if (!word.starts_with('-') && chosen.empty()) chosen = word;
    }
    bool names_a_command = std::any_of(cmds.begin(), cmds.end(), [&](auto& c) { return c.name == chosen; });
    std::function<int()> runner;
    for (auto& c : cmds) {
        auto* sub = app.add_subcommand(c.name, c.summary);
        if (c.name != chosen && (names_a_command || !help_asked)) continue;
        auto run = c.setup(*sub);
        sub->callback([&runner, run] { runner = run; });
    }

    if (auto unknown = unknown_command(app, argc, argv)) {
        std::fprintf(stderr, "gpudx: %s\n", unknown->c_str());
        return kExitUsage;
    }
    // CLI11 reports parse errors and --help by throwing.
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // One line: what was wrong, and where the command's options are listed.
        std::string where = command_path(deepest_parsed(app));
        std::fprintf(stderr, "gpudx: %s (see `%s --help`)\n", e.what(), where.c_str());
        return kExitUsage;
    }
    return runner ? runner() : kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace gpudx;
    app::hold_closed_standard_descriptors();
    // Fault-isolation boundary: main(), the last one. UsageError and OutputError, thrown only by app/, exit 64
    // and 74; anything that passed every other boundary is a bug.
    try {
        int code = run_command_line(argc, argv);
        // The verdict stands only if the report that carries it arrived whole.
        app::finish_standard_output();
        return code;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "gpudx: %s\n", e.message.c_str());
        return kExitUsage;
    } catch (const OutputError& e) {
        std::fprintf(stderr, "gpudx: %s\n", e.message.c_str());
        return kExitIoError;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpudx: internal error: %s\n", e.what());
        return kExitUnknown;
    }
}
