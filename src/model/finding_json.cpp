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
    if (!f.followed_by.empty()) j["followed_by"] = f.followed_by;
    if (f.process)
        j["process"] = {{"pid", f.process->pid},
                        {"command", f.process->command},
                        {"user", f.process->user},
                        {"container", f.process->container},
                        {"job", f.process->job}};
    return j;
}

std::optional<Finding> finding_from_json(const nlohmann::json& j) {
    if (!j.is_object()) return std::nullopt;
    auto text = [](const nlohmann::json& o, const char* key) {
        auto it = o.find(key);
        return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    Finding f;
    f.id = text(j, "id");
    auto layer = parse_layer(text(j, "layer"));
    auto severity = parse_severity(text(j, "severity"));
    if (f.id.empty() || !layer || !severity) return std::nullopt;
    f.layer = *layer;
    f.severity = *severity;
    if (auto it = j.find("subjects"); it != j.end() && it->is_array())
        for (const auto& g : *it) {
            if (!g.is_object()) continue;
            GpuRef ref{text(g, "uuid"), text(g, "pci")};
            if (text(g, "kind") == "nvswitch") ref.kind = SubjectKind::nvswitch;
            f.subjects.push_back(std::move(ref));
        }
    f.message = text(j, "message");
    if (auto it = j.find("evidence"); it != j.end() && it->is_array())
        for (const auto& e : *it)
            if (e.is_object()) f.evidence.push_back({text(e, "source"), text(e, "value")});
    f.next_step = text(j, "next_step");
    if (auto it = j.find("followed_by"); it != j.end() && it->is_array())
        for (const auto& id : *it)
            if (id.is_string()) f.followed_by.push_back(id.get<std::string>());
    if (auto it = j.find("process"); it != j.end() && it->is_object()) {
        ProcessRef p;
        if (auto pid = it->find("pid"); pid != it->end() && pid->is_number_integer()) p.pid = pid->get<int>();
        p.command = text(*it, "command");
        p.user = text(*it, "user");
        p.container = text(*it, "container");
        p.job = text(*it, "job");
        f.process = std::move(p);
    }
    return f;
}

}  // namespace gpudx
