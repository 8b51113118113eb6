// The diagnosis as JSON (`gpudx diagnose --format json`, the agent's /v1/status): the verdict and findings with the
// snapshot's host, collectors and processes.
#include <nlohmann/json.hpp>

#include "model/diagnosis.hpp"
#include "model/json_support.hpp"
#include "model/layer_json.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

nlohmann::json diagnosis_to_json(const Snapshot& s, const Diagnosis& d) {
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
    auto& findings = j["findings"] = nlohmann::json::array();
    for (auto& f : d.findings) findings.push_back(finding_to_json(f));
    auto& cols = j["collectors"] = nlohmann::json::array();
    for (auto& c : s.collectors)
        cols.push_back({{"name", c.name}, {"state", to_string(c.state)}, {"message", c.message}, {"path", c.path},
                        {"duration_ms", c.duration_ms}});
    // --pid: each process's own view, as the snapshot records it (docs/output-formats.md).
    if (!s.processes.empty()) {
        auto& ps = j["processes"] = nlohmann::json::array();
        for (auto& p : s.processes) layer_to_json(ps.emplace_back(), p);
    }
    repair_utf8(j);
    return j;
}

}  // namespace gpudx
