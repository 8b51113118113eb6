// The JSON report of a checkpoint command (docs/checkpoint.md), and of its pieces.
#include "model/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include "model/json_support.hpp"

namespace gpudx {

using nlohmann::json;

json call_to_json(const CallResult& r) {
    return {{"code", r.code}, {"name", r.name}, {"meaning", r.meaning}, {"seconds", r.seconds}};
}
CallResult call_from_json(const json& j) {
    CallResult r;
    r.code = j.value("code", kCallWorkerLost);
    r.name = j.value("name", "");
    r.meaning = j.value("meaning", "");
    r.seconds = j.value("seconds", 0.0);
    return r;
}

json info_to_json(const DriverInfo& d) {
    json j = {{"library_path", d.library_path},
              {"load_error", d.load_error},
              {"init_seconds", d.init_seconds},
              {"driver_version", d.driver_version},
              {"missing_entry_points", d.missing_entry_points},
              {"nvml_loaded", d.nvml_loaded}};
    j["init"] = d.init ? call_to_json(*d.init) : json(nullptr);
    j["cuda_version"] = d.cuda_version ? json(*d.cuda_version) : json(nullptr);
    return j;
}
DriverInfo info_from_json(const json& j) {
    DriverInfo d;
    d.library_path = j.value("library_path", "");
    d.load_error = j.value("load_error", "");
    d.init_seconds = j.value("init_seconds", 0.0);
    d.driver_version = j.value("driver_version", "");
    d.missing_entry_points = j.value("missing_entry_points", std::vector<std::string>{});
    d.nvml_loaded = j.value("nvml_loaded", false);
    if (j.contains("init") && j["init"].is_object()) d.init = call_from_json(j["init"]);
    if (j.contains("cuda_version") && j["cuda_version"].is_number()) d.cuda_version = j["cuda_version"].get<int>();
    return d;
}

// ---------------------------------------------------------------------------------------------------------------
// Output

namespace {
json step_to_json(const StepRecord& s) {
    json j = {{"pid", s.pid},          {"step", step_name(s.step)},     {"call", driver_call_name(s.step)},
            {"ok", s.result.ok()},   {"code", s.result.code},         {"name", s.result.name},
            {"meaning", s.result.meaning}, {"seconds", s.result.seconds}, {"wall_seconds", s.result.wall_seconds},
            {"rollback", s.rollback}};
    if (auto cause = usual_cause(s.result)) j["hint"] = *cause;
    return j;
}
}  // namespace

json checkpoint_result_to_json(const CheckpointCommandResult& r) {
    json j;
    j["command"] = command_name(r.request.command);
    if (r.request.action) j["action"] = step_name(*r.request.action);
    j["pids"] = r.request.pids;
    j["ok"] = r.exit_code == 0;
    j["exit_code"] = r.exit_code;
    if (!r.usage_error.empty()) j["error"] = r.usage_error;
    json driver = info_to_json(r.driver);
    driver["checkpoint_api"] = r.driver.has_checkpoint_api();
    driver["can_remap"] = r.driver.can_remap();
    j["driver"] = driver;
    j["gpus"] = json::array();
    for (const auto& g : r.gpus) j["gpus"].push_back(gpu_to_json(g));
    j["device_map"] = {{"given", r.request.device_map}, {"pairs", json::array()}};
    for (const auto& p : r.pairs) {
        json pj = {{"old_uuid", p.old_uuid}, {"new_uuid", p.new_uuid}};
        if (auto* g = gpu_by_uuid(r.gpus, p.old_uuid)) pj["old_index"] = g->index, pj["old_pci"] = g->pci;
        if (auto* g = gpu_by_uuid(r.gpus, p.new_uuid)) pj["new_index"] = g->index, pj["new_pci"] = g->pci;
        j["device_map"]["pairs"].push_back(pj);
    }
    j["steps"] = json::array();
    for (const auto& s : r.report.steps) j["steps"].push_back(step_to_json(s));
    // Per process, seconds per step (the forward steps; rollback calls are in "steps").
    json timings = json::array();
    for (int pid : r.request.pids) {
        json t = {{"pid", pid}};
        for (const auto& s : r.report.steps)
            if (s.pid == pid && !s.rollback) t[std::string(step_name(s.step)) + "_s"] = s.result.seconds;
        timings.push_back(t);
    }
    j["timings"] = timings;
    j["failure"] = r.report.failure ? step_to_json(*r.report.failure) : json(nullptr);
    j["final_states"] = json::array();
    for (const auto& o : r.report.final_states) {
        json oj = {{"pid", o.pid}, {"state", state_name(o.state)}};
        if (!o.state_error.empty()) oj["error"] = o.state_error;
        j["final_states"].push_back(oj);
    }
    j["verify"] = json::array();
    for (const auto& v : r.verify) {
        json vj = {{"pid", v.pid}, {"shim_loaded", !v.shim_path.empty()}, {"detail", v.detail}};
        if (!v.shim_path.empty()) vj["shim_path"] = v.shim_path;
        if (v.consistent) vj["consistent"] = *v.consistent;
        if (!v.verdict.empty()) vj["verdict"] = v.verdict;
        j["verify"].push_back(vj);
    }
    j["notes"] = r.notes;
    j["seconds"] = r.report.seconds;
    repair_utf8(j);
    return j;
}

}  // namespace gpudx
