// The JSON report of gpudx verify.
#include "model/verify.hpp"

#include <nlohmann/json.hpp>

#include "model/json_support.hpp"

namespace gpudx {

nlohmann::json verify_report_to_json(const VerifyReport& r) {
    nlohmann::json j;
    j["pid"] = r.pid;
    j["verdict"] = verdict_name(r.verdict);
    j["consistent"] = r.exit_code == 0;
    j["exit_code"] = r.exit_code;
    j["summary"] = r.summary;
    j["shim"] = {{"loaded", r.shim_loaded}, {"path", r.shim_path}};
    j["state"] = nlohmann::json::object();
    j["state"]["path"] = r.state_path;
    if (!r.state_problem.empty()) j["state"]["problem"] = r.state_problem;
    if (r.state) {
        j["state"]["mode"] = r.state->mode;
        j["state"]["updated_unix_ms"] = r.state->updated_unix_ms;
        j["state"]["age_s"] = r.state_age_s;
        j["state"]["nvml"] = r.state->nvml;
        j["state"]["nvml_translations"] = r.state->nvml_translations;
        j["state"]["proc_root"] = r.state->proc_root;
    }
    j["libraries"] = r.libraries;
    j["ordinals"] = nlohmann::json::array();
    for (const auto& o : r.ordinals) {
        j["ordinals"].push_back({{"ordinal", o.state.ordinal},
                                 {"uuid", o.state.uuid},
                                 {"driver_bus_id", bus_or_empty(o.state.driver_bus)},
                                 {"corrected_bus_id", bus_or_empty(o.state.current_bus)},
                                 {"node_bus_id", o.node_bus},
                                 {"source", o.state.source},
                                 {"corrected_calls", o.state.corrected},
                                 {"uuid_changes", o.state.uuid_changes},
                                 {"handed_out", o.state.handed_out},
                                 {"verdict", verdict_name(o.verdict)},
                                 {"explanation", o.explanation}});
    }
    j["cannot_correct"] = r.cannot_correct;
    repair_utf8(j);
    return j;
}

}  // namespace gpudx
