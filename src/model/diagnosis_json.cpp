// The diagnosis as JSON (`gpudx diagnose --format json`, the agent's /v1/status): the verdict and findings with the
// snapshot's host, collectors and processes.
#include <nlohmann/json.hpp>

#include "core/json_text.hpp"
#include "model/diagnosis.hpp"
#include "model/json_support.hpp"
#include "model/layer_json.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

namespace {

// Everything but the findings, which the callers add (an empty array in its place).
nlohmann::json diagnosis_head_json(const Snapshot& s, const Diagnosis& d) {
    nlohmann::json j;
    j["schema_version"] = 1;
    j["host"] = s.host.hostname;
    j["collected_at"] = s.collected_at;
    j["root"] = s.root;
    j["verdict"] = name_of(d.verdict);
    j["exit_code"] = d.exit_code;
    j["boundary"] = d.boundary ? nlohmann::json(to_string(*d.boundary)) : nlohmann::json(nullptr);
    auto& layers = j["layers"] = nlohmann::json::array();
    for (auto& l : d.layers)
        layers.push_back({{"layer", to_string(l.layer)},
                          {"state", to_string(l.state)},
                          {"reason", l.reason},
                          {"trusted", l.trusted},
                          {"unreadable", l.unreadable},
                          {"errors", l.errors},
                          {"warnings", l.warnings}});
    j["findings"] = nlohmann::json::array();
    auto& cols = j["collectors"] = nlohmann::json::array();
    for (auto& c : s.collectors)
        cols.push_back({{"name", c.name}, {"state", to_string(c.state)}, {"message", c.message}, {"path", c.path},
                        {"duration_ms", c.duration_ms}});
    // --pid: each process's own view, as the snapshot records it (docs/output-formats.md).
    if (!s.processes.empty()) {
        auto& ps = j["processes"] = nlohmann::json::array();
        for (auto& p : s.processes) layer_to_json(ps.emplace_back(), p);
    }
    return j;
}

}  // namespace

nlohmann::json diagnosis_to_json(const Snapshot& s, const Diagnosis& d) {
    nlohmann::json j = diagnosis_head_json(s, d);
    auto& findings = j["findings"];
    for (auto& f : d.findings) findings.push_back(finding_to_json(f));
    repair_utf8(j);
    return j;
}

PiecedText diagnosis_json_pieces(const Snapshot& s, const Diagnosis& d, const nlohmann::json& extra,
                                 FindingsView findings) {
    nlohmann::json head = diagnosis_head_json(s, d);
    for (auto& [key, value] : extra.items()) head[key] = value;
    // The findings' place in the head's text, held by a string no document has, at the top level's indentation.
    const std::string placeholder = "\x01gpudx: the findings go here\x01";
    head["findings"] = placeholder;
    repair_utf8(head);
    std::string text = json_text(head, 2);
    const std::string quoted = json_text(placeholder);
    size_t at = text.find("\n  \"findings\": " + quoted);
    if (at == std::string::npos) {  // cannot happen; the tree's text is the answer then
        Diagnosis whole = d;
        whole.findings.clear();
        for (size_t i = 0; i < findings.size(); ++i)
            findings.with(i, [&](const Finding& f) { whole.findings.push_back(f); });
        auto j = diagnosis_to_json(s, whole);
        for (auto& [key, value] : extra.items()) j[key] = value;
        return PiecedText(json_text(j, 2), 0, nullptr, "");
    }
    size_t value_at = text.find(quoted, at);
    std::string after = text.substr(value_at + quoted.size());
    text.resize(value_at);
    if (findings.empty()) return PiecedText(std::move(text) + "[]", 0, nullptr, std::move(after));
    // As dump(2) writes an array one level down: each element on its own lines, 4 spaces in.
    auto item = [findings](size_t i, std::string& out) {
        nlohmann::json f = findings.with(i, [](const Finding& x) { return finding_to_json(x); });
        repair_utf8(f);
        if (i > 0) out += ",\n";
        out += "    ";
        for (char c : json_text(f, 2)) {
            out += c;
            if (c == '\n') out += "    ";
        }
    };
    return PiecedText(std::move(text) + "[\n", findings.size(), item, "\n  ]" + after);
}

std::string diagnosis_json_text(const Snapshot& s, const Diagnosis& d, const nlohmann::json& extra) {
    return diagnosis_json_pieces(s, d, extra, FindingsView(d.findings)).whole();
}

}  // namespace gpudx
