// `gpudx rules`: every rule gpudx can report (id, layer, severity, what it reads, what it finds), from the families'
// tables. `--format md --scenarios tests/scenarios` writes docs/rules.md.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "core/error.hpp"
#include "rules/engine/catalogue.hpp"

namespace gpudx::app {
namespace {

struct RulesOptions {
    std::string format = "text";
    std::string scenarios;
    std::string output;
};

// Finding id -> the scenario folders under `dir` whose `expect` file lists it, in name order.
ScenarioIndex index_scenarios(const std::string& dir) {
    std::error_code ec;
    std::vector<std::filesystem::path> folders;
    for (auto& entry : std::filesystem::directory_iterator(dir, ec))
        if (entry.is_directory() && std::filesystem::exists(entry.path() / "expect")) folders.push_back(entry.path());
    if (ec) throw UsageError{dir + ": " + ec.message()};
    std::sort(folders.begin(), folders.end());
    ScenarioIndex index;
    for (auto& folder : folders) {
        std::ifstream in(folder / "expect");
        std::ostringstream text;
        text << in.rdbuf();
        for (auto& id : expected_finding_ids(text.str())) index[id].push_back(folder.filename().string());
    }
    return index;
}

int run_rules(const RulesOptions& o) {
    const auto& rules = declared_rules();
    std::optional<ScenarioIndex> scenarios;
    if (!o.scenarios.empty()) scenarios = index_scenarios(o.scenarios);
    std::string text;
    if (o.format == "json")
        text = rules_json(rules, scenarios ? &*scenarios : nullptr).dump(2) + "\n";
    else if (o.format == "md")
        text = rules_markdown(rules, scenarios.value_or(ScenarioIndex{}));
    else
        text = rules_text(rules);
    write_output(o.output, text, o.format == "json" ? OutputKind::data : OutputKind::text);
    return 0;
}

CommandRegistrar register_rules{
    {"rules", "List every rule gpudx can report: id, layer, default severity, what it finds", 65,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<RulesOptions>();
         cmd.add_option("--format", o->format, "text (default), json, md (the table docs/rules.md holds)")
             ->check(CLI::IsMember({"text", "json", "md"}));
         cmd.add_option("--scenarios", o->scenarios,
                        "Scenario folders (tests/scenarios): name, for each rule, the scenarios whose expected "
                        "findings show it (json, md)")
             ->type_name("DIR");
         cmd.add_option("-o,--output", o->output, "Write to FILE instead of stdout")->type_name("FILE");
         cmd.footer(
             "Examples:\n  gpudx rules\n  gpudx rules --format json\n"
             "  gpudx rules --format md --scenarios tests/scenarios > docs/rules.md");
         return [o] { return run_rules(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app
