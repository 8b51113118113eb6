#include "standin_scenario.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace standin {

namespace {

nlohmann::json load_file(const std::filesystem::path& path, std::string& problem, int depth) {
    std::ifstream in(path);
    if (!in) {
        problem = "cannot open scenario " + path.string();
        return {};
    }
    std::stringstream ss;
    ss << in.rdbuf();
    auto doc = nlohmann::json::parse(ss.str(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        problem = "scenario is not a JSON object: " + path.string();
        return {};
    }
    if (doc.contains("base") && doc["base"].is_string() && depth < 8) {
        auto base = load_file(path.parent_path() / doc["base"].get<std::string>(), problem, depth + 1);
        if (!problem.empty()) return {};
        // Controls of this file apply on top of the base's document.
        auto controls = doc;
        controls.erase("base");
        for (auto& [k, v] : controls.items()) {
            if (k == "faults" && base.contains("faults")) {
                for (auto& f : v) base["faults"].push_back(f);
            } else {
                base[k] = v;
            }
        }
        doc = std::move(base);
    }
    return doc;
}

void drop(nlohmann::json& devices, const nlohmann::json& indices) {
    if (!devices.is_array() || !indices.is_array()) return;
    nlohmann::json kept = nlohmann::json::array();
    for (size_t i = 0; i < devices.size(); ++i) {
        bool gone = false;
        for (auto& x : indices)
            if (x.is_number_integer() && x.get<long>() == static_cast<long>(i)) gone = true;
        if (!gone) kept.push_back(devices[i]);
    }
    devices = std::move(kept);
}

void override_devices(nlohmann::json& devices, const nlohmann::json& patches) {
    if (!devices.is_array() || !patches.is_object()) return;
    for (auto& [k, v] : patches.items()) {
        size_t i = std::strtoul(k.c_str(), nullptr, 10);
        if (i < devices.size()) devices[i].merge_patch(v);
    }
}

Scenario load() {
    Scenario s;
    std::filesystem::path path;
    if (const char* p = std::getenv("GPUDX_STANDIN_SCENARIO"); p && *p) path = p;
    else if (const char* r = std::getenv("GPUDX_STANDIN_ROOT"); r && *r)
        path = std::filesystem::path(r) / "_driver/answers.json";
    else {
        s.problem = "no scenario: set GPUDX_STANDIN_SCENARIO or GPUDX_STANDIN_ROOT";
        return s;
    }
    s.doc = load_file(path, s.problem, 0);
    if (!s.problem.empty()) return s;
    auto& d = s.doc;
    if (!d.contains("nvml")) d["nvml"] = nlohmann::json::object();
    if (!d.contains("cuda")) d["cuda"] = nlohmann::json::object();
    if (!d["nvml"].contains("devices")) d["nvml"]["devices"] = nlohmann::json::array();
    if (!d["cuda"].contains("devices")) d["cuda"]["devices"] = nlohmann::json::array();
    if (d.contains("nvml_override")) d["nvml"].merge_patch(d["nvml_override"]);
    if (d.contains("nvml_device_override")) override_devices(d["nvml"]["devices"], d["nvml_device_override"]);
    if (d.contains("cuda_device_override")) override_devices(d["cuda"]["devices"], d["cuda_device_override"]);
    if (d.contains("nvml_drop_devices")) drop(d["nvml"]["devices"], d["nvml_drop_devices"]);
    if (d.contains("cuda_drop_devices")) drop(d["cuda"]["devices"], d["cuda_drop_devices"]);
    if (d.contains("rocm_smi")) {
        auto& r = d["rocm_smi"];
        if (!r.contains("devices")) r["devices"] = nlohmann::json::array();
        if (d.contains("rocm_smi_device_override")) override_devices(r["devices"], d["rocm_smi_device_override"]);
        if (d.contains("rocm_smi_drop_devices")) drop(r["devices"], d["rocm_smi_drop_devices"]);
    }
    return s;
}

std::string_view base_name(std::string_view call) {
    for (std::string_view suffix : {"_v2", "_v3"})
        if (call.size() > suffix.size() && call.substr(call.size() - suffix.size()) == suffix)
            return call.substr(0, call.size() - suffix.size());
    return call;
}

}  // namespace

const Scenario& scenario() {
    static const Scenario s = [] {
        auto loaded = load();
        if (!loaded.problem.empty()) std::fprintf(stderr, "gpudx stand-in: %s\n", loaded.problem.c_str());
        return loaded;
    }();
    return s;
}

std::optional<int> fault(std::string_view call, int device) {
    const auto& doc = scenario().doc;
    if (!doc.is_object() || !doc.contains("faults") || !doc["faults"].is_array()) return std::nullopt;
    auto want = base_name(call);
    for (auto& f : doc["faults"]) {
        if (!f.is_object() || !f.contains("call") || !f["call"].is_string()) continue;
        if (base_name(f["call"].get<std::string>()) != want) continue;
        if (f.contains("device") && f["device"].is_number_integer() && f["device"].get<int>() != device) continue;
        if (f.value("hang", false))
            for (;;) ::pause();  // a wedged driver: only SIGKILL ends this
        if (f.contains("result") && f["result"].is_number_integer()) return f["result"].get<int>();
    }
    return std::nullopt;
}

bool parse_bus_id(std::string_view t, unsigned& domain, unsigned& bus, unsigned& dev, unsigned& fn) {
    std::string s(t);
    unsigned a = 0, b = 0, c = 0, d = 0;
    char tail = 0;
    if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &a, &b, &c, &d, &tail) == 4) {
        domain = a, bus = b, dev = c, fn = d;
        return true;
    }
    return false;
}

bool parse_uuid(std::string_view text, unsigned char out[16]) {
    if (text.substr(0, 4) == "GPU-" || text.substr(0, 4) == "MIG-") text.remove_prefix(4);
    int n = 0;
    int hi = -1;
    for (char c : text) {
        if (c == '-') continue;
        int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (v < 0 || n >= 16) return false;
        if (hi < 0) hi = v;
        else {
            out[n++] = static_cast<unsigned char>(hi * 16 + v);
            hi = -1;
        }
    }
    return n == 16 && hi < 0;
}

}  // namespace standin
