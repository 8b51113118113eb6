#include "rules/engine/catalogue.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "rules/engine/families.hpp"
#include "rules/reference/signatures.hpp"

namespace gpudx {

namespace {

// The built-in signature catalogue is data (data/signatures.toml), so its rules are declared when it is read:
// the kernel-log family emits them beside its own table's.
const std::vector<Rule>& signature_rules() {
    static const std::vector<SignatureDeclaration> declarations = signature_declarations(builtin_signature_catalogue());
    static const std::vector<Rule> rules = [] {
        std::vector<Rule> out;
        for (auto& d : declarations) out.push_back({d.id, d.layer, d.severity, {Collector::kernel_log}, d.summary});
        return out;
    }();
    return rules;
}

}  // namespace

const std::vector<DeclaredRule>& declared_rules() {
    static const std::vector<DeclaredRule> all = [] {
        std::vector<DeclaredRule> out;
        for (auto& fam : check_families()) {
            for (auto& r : fam.rules) out.push_back({fam.name, &r});
            if (fam.name == std::string_view("kernel_log"))
                for (auto& r : signature_rules()) out.push_back({"signatures", &r});
        }
        for (const RuleTable* t : {&kBaselineRules, &kMatrixRules, &kEngineRules})
            for (auto& r : t->rules) out.push_back({t->name, &r});
        return out;
    }();
    return all;
}

const DeclaredRule* find_declared_rule(std::string_view id) {
    auto& all = declared_rules();
    auto it = std::find_if(all.begin(), all.end(), [&](const DeclaredRule& d) { return d.rule->id == id; });
    return it == all.end() ? nullptr : &*it;
}

std::vector<std::string> expected_finding_ids(std::string_view expect_text) {
    std::vector<std::string> ids;
    for (auto line : split(expect_text, '\n')) {
        auto t = trim(line);
        if (t.empty() || t.starts_with('#') || t.starts_with('!') || t.find(':') != std::string_view::npos) continue;
        ids.emplace_back(t);
    }
    return ids;
}

namespace {

std::vector<Layer> other_layers(const Rule& r) {
    std::vector<Layer> out;
    for (auto l : kAllLayers)
        if (r.also_filed_under.contains(l) && r.layer != l) out.push_back(l);
    return out;
}

std::vector<std::string> collector_names(const Rule& r) {
    std::vector<std::string> out;
    for (auto c : kAllCollectors)
        if (r.reads.contains(c)) out.emplace_back(to_string(c));
    return out;
}

std::string joined(const std::vector<std::string>& v, std::string_view sep = ", ") {
    std::string out;
    for (auto& x : v) out += (out.empty() ? "" : std::string(sep)) + x;
    return out;
}

const std::vector<std::string>& scenarios_of(const ScenarioIndex& index, std::string_view id) {
    static const std::vector<std::string> none;
    auto it = index.find(id);
    return it == index.end() ? none : it->second;
}

}  // namespace

std::string layers_text(const Rule& r) {
    if (!r.layer) return "the failing family's";
    std::vector<std::string> others;
    for (auto l : other_layers(r)) others.emplace_back(to_string(l));
    std::string out = to_string(*r.layer);
    if (!others.empty()) out += " (or " + joined(others) + ")";
    return out;
}

std::string rules_text(const std::vector<DeclaredRule>& rules) {
    size_t id_width = 2;
    for (auto& d : rules) id_width = std::max(id_width, d.rule->id.size());
    std::string out = fmt::format("{:<{}}  {:<10}  {:<8}  {}\n", "id", id_width, "layer", "severity", "summary");
    for (auto& d : rules) {
        const Rule& r = *d.rule;
        out += fmt::format("{:<{}}  {:<10}  {:<8}  {}\n", r.id, id_width, r.layer ? to_string(*r.layer) : "(family's)",
                           to_string(r.severity), r.summary);
    }
    return out;
}

nlohmann::json rules_json(const std::vector<DeclaredRule>& rules, const ScenarioIndex* scenarios) {
    auto arr = nlohmann::json::array();
    for (auto& d : rules) {
        const Rule& r = *d.rule;
        nlohmann::json j;
        j["id"] = r.id;
        j["family"] = d.family;
        j["layer"] = r.layer ? nlohmann::json(to_string(*r.layer)) : nlohmann::json(nullptr);
        auto& also = j["also_filed_under"] = nlohmann::json::array();
        for (auto l : other_layers(r)) also.push_back(to_string(l));
        j["severity"] = to_string(r.severity);
        j["reads"] = collector_names(r);
        j["summary"] = r.summary;
        if (scenarios) j["scenarios"] = scenarios_of(*scenarios, r.id);
        arr.push_back(std::move(j));
    }
    return nlohmann::json{{"rules", std::move(arr)}};
}

std::string rules_markdown(const std::vector<DeclaredRule>& rules, const ScenarioIndex& scenarios) {
    std::string out =
        "# Rules\n\n"
        "<!-- Generated from the rule tables in src/rules/ by\n"
        "     `gpudx rules --format md --scenarios tests/scenarios > docs/rules.md`; do not edit by hand. -->\n\n"
        "Every finding gpudx reports comes from a rule declared in its family's table: the id, the layer the\n"
        "finding is filed under, the default severity, the collectors it reads and what it finds. A rule whose\n"
        "severity the evidence or a policy decides (the Xid policy, the matrix) says so in its summary. The\n"
        "scenarios are the folders of tests/scenarios whose `expect` file lists the rule; a rule without one is\n"
        "covered by unit tests (tests/scenarios/README.md says why for those a root tree cannot produce).\n"
        "`gpudx rules` lists the same tables (`--format json` for tools).\n";
    std::string family;
    for (auto& d : rules) {
        const Rule& r = *d.rule;
        if (d.family != family) {
            family = d.family;
            out += fmt::format("\n## {}\n\n", family);
            out += "| id | layer | severity | reads | summary | scenarios |\n";
            out += "|----|-------|----------|-------|---------|-----------|\n";
        }
        auto reads = collector_names(r);
        auto& shown = scenarios_of(scenarios, r.id);
        std::vector<std::string> shown_code;
        for (auto& s : shown) shown_code.push_back("`" + s + "`");
        out +=
            fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", r.id, layers_text(r), to_string(r.severity),
                        reads.empty() ? "—" : joined(reads), r.summary, shown_code.empty() ? "—" : joined(shown_code));
    }
    return out;
}

}  // namespace gpudx
