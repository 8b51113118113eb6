#pragma once
// Every declared rule, from the families' tables: what `gpudx rules` lists and docs/rules.md is generated from.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rules/engine/rule.hpp"

namespace gpudx {

struct DeclaredRule {
    std::string_view family;  // the family (or table) that declares it: "pcie", "baseline", "engine"
    const Rule* rule;
};

// Diagnose's families in the order it runs them, then the baseline, matrix and engine tables.
const std::vector<DeclaredRule>& declared_rules();
// The declaration of `id`; nullptr for an id no table declares.
const DeclaredRule* find_declared_rule(std::string_view id);

// The finding ids a scenario's `expect` file says diagnose must report (tests/scenarios/README.md): one per line;
// `!id` (must not), `boundary:`, `exit:` and comment lines are not among them.
std::vector<std::string> expected_finding_ids(std::string_view expect_text);
// Finding id -> the scenarios whose expected findings show it, by folder name.
using ScenarioIndex = std::map<std::string, std::vector<std::string>, std::less<>>;

// "driver (or libraries, allocation)"; "the failing family's" for a rule with no layer of its own.
std::string layers_text(const Rule& r);
std::string rules_text(const std::vector<DeclaredRule>& rules);
// With `scenarios`, each rule also names the scenarios that show it (null: not asked).
nlohmann::json rules_json(const std::vector<DeclaredRule>& rules, const ScenarioIndex* scenarios);
std::string rules_markdown(const std::vector<DeclaredRule>& rules, const ScenarioIndex& scenarios);

}  // namespace gpudx
