// gpudx: a thin entry point. All logic lives in libgpudx; each subcommand in app/cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "app/command.hpp"
#include "rules/diagnose.hpp"
#include "core/error.hpp"

namespace gpudx::app {
std::vector<Command>& commands() {
    static std::vector<Command> all;
    return all;
}
}  // namespace gpudx::app

int main(int argc, char** argv) {
    using namespace gpudx;
    CLI::App app{
        "gpudx — find where a GPU node's stack is broken, name every GPU by UUID and PCI address,\n"
        "and keep identity right across checkpoint/restore.\n\n"
        "Start with `gpudx diagnose` (this node) or `gpudx diagnose --root CAPTURE` (a saved node).\n"
        "Exit codes: 0 healthy, 1 error findings, 2 warnings only, 3 could not evaluate, 64 usage error.",
        "gpudx"};
    app.set_version_flag("--version", std::string("gpudx ") + GPUDX_VERSION);
    app.require_subcommand(1);
    app.fallthrough(false);

    auto& cmds = app::commands();
    std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.order < b.order; });
    std::function<int()> runner;
    for (auto& c : cmds) {
        auto* sub = app.add_subcommand(c.name, c.summary);
        auto run = c.setup(*sub);
        sub->callback([&runner, run] { runner = run; });
    }

    // Fault-isolation boundary: main(), the last one. CLI11 reports parse errors and --help by throwing.
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return kExitUsage;
    }
    // UsageError, thrown only by app/, exits 64; anything that passed every other boundary is a bug.
    try {
        return runner ? runner() : kExitUsage;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "gpudx: %s\n", e.message.c_str());
        return kExitUsage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpudx: internal error: %s\n", e.what());
        return kExitUnknown;
    }
}
