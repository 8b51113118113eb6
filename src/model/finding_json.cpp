#include <nlohmann/json.hpp>

#include "model/finding.hpp"

namespace gpudx {

nlohmann::json finding_to_json(const Finding& f) {
    nlohmann::json j;
    j["id"] = f.id;
    j["layer"] = to_string(f.layer);
    j["severity"] = to_string(f.severity);
    auto& subjects = j["subjects"] = nlohmann::json::array();
    for (auto& g : f.subjects) {
        subjects.push_back({{"uuid", g.uuid}, {"pci", g.pci}});
        if (g.kind != SubjectKind::gpu) subjects.back()["kind"] = subject_label(g);  // a GPU's is left out
    }
    j["message"] = f.message;
    auto& ev = j["evidence"] = nlohmann::json::array();
    for (auto& e : f.evidence) ev.push_back({{"source", e.source}, {"value", e.value}});
    j["next_step"] = f.next_step;
    if (f.process)
        j["process"] = {{"pid", f.process->pid},
                        {"command", f.process->command},
                        {"user", f.process->user},
                        {"container", f.process->container},
                        {"job", f.process->job}};
    return j;
}

}  // namespace gpudx
