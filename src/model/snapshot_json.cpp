#include <fstream>
#include <sstream>

#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {

NLOHMANN_JSON_SERIALIZE_ENUM(CollectorState, {{CollectorState::no_data, "no_data"},
                                              {CollectorState::ok, "ok"},
                                              {CollectorState::error, "error"},
                                              {CollectorState::timed_out, "timed_out"}})
GPUDX_JSON(ReadProblem, path, message)
GPUDX_JSON(CollectorStatus, name, state, message, path, duration_ms, problems)
GPUDX_DEFINE_LAYER_JSON(CollectorStatus)

const char* to_string(CollectorState s) {
    switch (s) {
        case CollectorState::ok: return "ok";
        case CollectorState::no_data: return "no_data";
        case CollectorState::error: return "error";
        case CollectorState::timed_out: return "timed_out";
    }
    return "?";
}

const CollectorStatus* Snapshot::collector(std::string_view name) const {
    for (auto& c : collectors)
        if (c.name == name) return &c;
    return nullptr;
}

nlohmann::json snapshot_to_json(const Snapshot& s) {
    nlohmann::json j;
    j["schema_version"] = s.schema_version;
    j["gpudx_version"] = s.gpudx_version;
    j["collected_at"] = s.collected_at;
    j["root"] = s.root;
    layer_to_json(j["host"], s.host);
    layer_to_json(j["pcie"], s.pcie);
    layer_to_json(j["module"], s.module);
    layer_to_json(j["kernel_log"], s.kernel_log);
    layer_to_json(j["libraries"], s.libraries);
    layer_to_json(j["devices"], s.devices);
    layer_to_json(j["environment"], s.environment);
    layer_to_json(j["nvml"], s.nvml);
    layer_to_json(j["cuda"], s.cuda);
    if (s.rocm_smi.probed) layer_to_json(j["rocm_smi"], s.rocm_smi);
    auto& cs = j["collectors"] = nlohmann::json::array();
    for (auto& c : s.collectors) {
        nlohmann::json cj;
        layer_to_json(cj, c);
        cs.push_back(std::move(cj));
    }
    repair_utf8(j);
    return j;
}

Result<Snapshot> snapshot_from_json(const nlohmann::json& input) {
    nlohmann::json j = input;
    if (auto bad = normalise_numbers(j)) return fail("snapshot does not match the schema: " + *bad);
    if (!j.is_object() || !j.contains("schema_version") || !j.contains("pcie"))
        return fail("not a gpudx snapshot (no schema_version or pcie key)");
    if (!j["schema_version"].is_number_integer()) return fail("schema_version is not an integer");
    int version = j["schema_version"].get<int>();
    if (version > kSnapshotSchemaVersion)
        return fail("snapshot schema version " + std::to_string(version) + " is newer than this gpudx understands (" +
                    std::to_string(kSnapshotSchemaVersion) + "); upgrade gpudx to read it");
    Snapshot s;
    // Fault-isolation boundary: a reader of a third-party format (nlohmann's get<> throws on a wrong type).
    try {
        s.schema_version = version;
        s.gpudx_version = j.value("gpudx_version", "");
        s.collected_at = j.value("collected_at", "");
        s.root = j.value("root", "");
        auto layer = [&](const char* key, auto& out) {
            if (j.contains(key) && !j[key].is_null()) layer_from_json(j[key], out);
        };
        layer("host", s.host);
        layer("pcie", s.pcie);
        layer("module", s.module);
        layer("kernel_log", s.kernel_log);
        layer("libraries", s.libraries);
        layer("devices", s.devices);
        layer("environment", s.environment);
        layer("nvml", s.nvml);
        layer("cuda", s.cuda);
        layer("rocm_smi", s.rocm_smi);
        if (j.contains("collectors"))
            for (auto& cj : j["collectors"]) {
                CollectorStatus c;
                layer_from_json(cj, c);
                s.collectors.push_back(std::move(c));
            }
    } catch (const nlohmann::json::exception& e) {
        return fail(std::string("snapshot does not match the schema: ") + e.what());
    }
    return s;
}

Result<Snapshot> load_snapshot_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail("cannot open snapshot", path, errno);
    nlohmann::json j;
    // Fault-isolation boundary: a reader of a third-party format; only the exception carries where the
    // JSON went wrong.
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
        return fail(std::string("not valid JSON: ") + e.what(), path);
    }
    auto s = snapshot_from_json(j);
    if (!s) {
        auto e = s.error();
        e.path = path;
        return std::unexpected(e);
    }
    return s;
}

}  // namespace gpudx
