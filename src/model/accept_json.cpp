// The acceptance record as JSON, and reading an earlier record back.
#include "model/accept.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/input_file.hpp"
#include "model/json_support.hpp"

namespace gpudx {

GPUDX_JSON(AcceptThresholds, min_d2d_gbps, min_h2d_gbps, min_d2h_gbps, min_p2p_gbps, min_p2p_pcie_gbps,
           min_memory_fraction, pairs)
GPUDX_JSON(AcceptGpu, ordinal, uuid, pci, name, total_memory, sm_count, cc_major, cc_minor)

nlohmann::json sub_test_to_json(const SubTest& t) {
    nlohmann::json j;
    j["id"] = t.id;
    j["subjects"] = t.subjects;
    j["pci"] = t.pci;
    j["required"] = t.required;
    j["status"] = to_string(t.status);
    j["reason"] = t.reason;
    j["figures"] = nlohmann::json::object();
    for (auto& [k, v] : t.figures) j["figures"][k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    j["thresholds"] = t.thresholds;
    j["details"] = t.details;
    j["duration_ms"] = t.duration_ms;
    return j;
}

Result<SubTest> sub_test_from_json(const nlohmann::json& j) {
    // Fault-isolation boundary: a reader of a third-party format (nlohmann's at() and get<> throw).
    try {
        SubTest t;
        t.id = j.at("id").get<std::string>();
        t.subjects = j.value("subjects", std::vector<std::string>{});
        t.pci = j.value("pci", std::vector<std::string>{});
        t.required = j.value("required", true);
        auto st = parse_test_status(j.value("status", std::string("not_run")));
        if (!st) return fail("unknown status \"" + j.value("status", std::string()) + "\" in test " + t.id);
        t.status = *st;
        t.reason = j.value("reason", std::string());
        if (j.contains("figures"))
            for (auto& [k, v] : j["figures"].items())
                if (v.is_number()) t.figures[k] = v.get<double>();
        t.thresholds = j.value("thresholds", std::map<std::string, double>{});
        t.details = j.value("details", std::map<std::string, std::string>{});
        t.duration_ms = j.value("duration_ms", 0.0);
        return t;
    } catch (const std::exception& e) {
        return fail(std::string("malformed test record: ") + e.what());
    }
}

nlohmann::json accept_report_to_json(const AcceptReport& r) {
    nlohmann::json j;
    j["kind"] = "gpudx-accept";
    j["schema_version"] = r.schema_version;
    j["gpudx_version"] = r.gpudx_version;
    j["started_at"] = r.started_at;
    j["node"] = r.node;
    j["kernel"] = r.kernel;
    j["module_version"] = r.module_version;
    j["driver_version"] = r.driver_version;
    j["cuda_driver_version"] = r.cuda_driver_version;
    j["driver_library"] = r.driver_library;
    j["image_digest"] = r.image_digest;
    j["mode"] = r.mode;
    j["gpus"] = r.gpus;
    j["thresholds"] = r.thresholds;
    j["thresholds_source"] = r.thresholds_source;
    j["allocation_source"] = r.allocation_source;
    j["allocation"] = r.allocation;
    j["tests"] = nlohmann::json::array();
    for (auto& t : r.tests) j["tests"].push_back(sub_test_to_json(t));
    j["verdict"] = r.verdict;
    j["exit_code"] = r.exit_code;
    j["wall_ms"] = r.wall_ms;
    return j;
}

Result<AcceptReport> accept_report_from_json(const nlohmann::json& input) {
    nlohmann::json j = input;
    if (auto bad = normalise_numbers(j)) return fail("malformed accept record: " + *bad);
    // Checked before reading: value() throws on a key of the wrong type.
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || j["kind"].get<std::string>() != "gpudx-accept")
        return fail("not a gpudx accept record (no \"kind\": \"gpudx-accept\")");
    if (j.contains("schema_version") && !j["schema_version"].is_number_integer())
        return fail("malformed accept record: schema_version is not an integer");
    int version = j.value("schema_version", 0);
    if (version > kAcceptSchemaVersion)
        return fail(fmt::format("accept record schema {} is newer than this gpudx understands ({})", version,
                                kAcceptSchemaVersion));
    // Fault-isolation boundary: a reader of a third-party format (nlohmann's get<> throws on a wrong type).
    try {
        AcceptReport r;
        r.schema_version = version;
        r.gpudx_version = j.value("gpudx_version", std::string());
        r.started_at = j.value("started_at", std::string());
        r.node = j.value("node", std::string());
        r.kernel = j.value("kernel", std::string());
        r.module_version = j.value("module_version", std::string());
        r.driver_version = j.value("driver_version", std::string());
        if (j.contains("cuda_driver_version") && j["cuda_driver_version"].is_number_integer())
            r.cuda_driver_version = j["cuda_driver_version"].get<int>();
        r.driver_library = j.value("driver_library", std::string());
        r.image_digest = j.value("image_digest", std::string());
        r.mode = j.value("mode", std::string("quick"));
        if (j.contains("gpus")) r.gpus = j["gpus"].get<std::vector<AcceptGpu>>();
        if (j.contains("thresholds")) r.thresholds = j["thresholds"].get<AcceptThresholds>();
        r.thresholds_source = j.value("thresholds_source", std::string());
        r.allocation_source = j.value("allocation_source", std::string());
        r.allocation = j.value("allocation", std::vector<std::string>{});
        if (j.contains("tests"))
            for (auto& t : j["tests"]) {
                auto st = sub_test_from_json(t);
                if (!st) return std::unexpected(st.error());
                r.tests.push_back(std::move(*st));
            }
        r.verdict = j.value("verdict", std::string());
        r.exit_code = j.value("exit_code", 0);
        r.wall_ms = j.value("wall_ms", 0.0);
        return r;
    } catch (const std::exception& e) {
        return fail(std::string("malformed accept record: ") + e.what());
    }
}

Result<AcceptReport> load_accept_report(const std::string& path) {
    auto text = read_input_file(path, 64u << 20);
    if (!text) return std::unexpected(text.error());  // "no such file", "Is a directory", "larger than 64 MiB"
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded()) return fail("not valid JSON", path);
    auto r = accept_report_from_json(j);
    if (!r) return fail(r.error().message, path);
    return r;
}

}  // namespace gpudx
