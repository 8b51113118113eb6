// The fleet report as JSON (`gpudx fleet report --format json`).
#include "model/fleet.hpp"

#include <nlohmann/json.hpp>

namespace gpudx {

using nlohmann::json;

nlohmann::json fleet_report_to_json(const FleetReport& r) {
    json j;
    j["matrix"] = r.matrix_path;
    j["generated_at"] = r.generated_at;
    j["inputs"] = r.inputs;
    j["nodes"] = r.nodes;
    j["health"] = {{"diagnosis", r.health_saved}, {"snapshot", r.health_computed}, {"unknown", r.health_unknown}};
    auto& sk = j["skipped"] = json::array();
    for (auto& p : r.skipped) sk.push_back({{"file", p.file}, {"reason", p.reason}});
    auto& sup = j["superseded"] = json::array();
    for (auto& [old_file, new_file] : r.superseded) sup.push_back({{"file", old_file}, {"superseded_by", new_file}});
    auto& cls = j["classes"] = json::array();
    for (auto& c : r.classes) {
        json cj;
        cj["name"] = c.name;
        cj["owner"] = c.owner;
        cj["review_by"] = c.review_by;
        cj["review_overdue"] = c.review_overdue;
        cj["expected_gpus"] = c.expected_gpus ? json(*c.expected_gpus) : json(nullptr);
        cj["nodes"] = c.nodes;
        cj["conforming"] = c.conforming;
        cj["spread"] = {{"driver", c.drivers}, {"kernel", c.kernels}, {"vbios", c.vbios}, {"cuda", c.cuda},
                        {"fabric_manager", c.fabric_manager}};
        cj["divergence_nodes"] = c.divergence_nodes;
        auto& dv = cj["diverging"] = json::array();
        for (auto& d : c.diverging) {
            json dj{{"node", d.node}, {"file", d.file}};
            auto& fs = dj["findings"] = json::array();
            for (auto& f : d.findings) fs.push_back(finding_to_json(f));
            dv.push_back(std::move(dj));
        }
        auto& ms = cj["missing_gpus"] = json::array();
        for (auto& m : c.missing)
            ms.push_back({{"node", m.node}, {"file", m.file}, {"seen", m.seen}, {"expected", m.expected}});
        cj["healthy"] = c.healthy;
        cj["health_unknown"] = c.health_unknown;
        cj["health_only"] = c.health_only;
        auto& fnodes = cj["finding_nodes"] = json::object();
        for (auto& [id, count] : c.finding_nodes)
            fnodes[id] = {{"severity", to_string(count.severity)}, {"layer", to_string(count.layer)},
                          {"nodes", count.nodes}};
        auto& uh = cj["unhealthy"] = json::array();
        for (auto& u : c.unhealthy) {
            json uj{{"node", u.node}, {"file", u.file}, {"health", to_string(u.source)}};
            if (u.source == HealthSource::none) uj["error"] = u.error;
            auto& fs = uj["findings"] = json::array();
            for (auto& f : u.findings) {
                json fj = finding_to_json(f);
                fj.erase("evidence");  // not kept (health_findings)
                fj.erase("next_step");
                fs.push_back(std::move(fj));
            }
            uh.push_back(std::move(uj));
        }
        cls.push_back(std::move(cj));
    }
    auto& xc = j["xids_by_code"] = json::object();
    for (auto& [code, n] : r.xids_by_code)
        xc[std::to_string(code)] = {{"events", n}, {"nodes", r.xid_nodes_by_code.at(code)}};
    auto& xn = j["xids_by_node"] = json::array();
    for (auto& x : r.xids_by_node) {
        json by = json::object();
        for (auto& [code, n] : x.by_code) by[std::to_string(code)] = n;
        xn.push_back({{"node", x.node}, {"file", x.file}, {"class", x.node_class}, {"total", x.total}, {"by_code", by}});
    }
    j["read_seconds"] = r.read_seconds;
    j["exit_code"] = r.exit_code;
    return j;
}

}  // namespace gpudx
