#include "core/input_file.hpp"
#include "model/json_support.hpp"
#include "model/layer_json.hpp"
#include "model/snapshot_keys.hpp"

namespace gpudx {

namespace {
// A snapshot of the largest node gpudx has seen is a few MiB; the bound only keeps a wrong file from filling memory.
constexpr size_t kMaxSnapshotFileBytes = 256u << 20;
}  // namespace

NLOHMANN_JSON_SERIALIZE_ENUM(CollectorState, {{CollectorState::no_data, "no_data"},
                                              {CollectorState::ok, "ok"},
                                              {CollectorState::error, "error"},
                                              {CollectorState::timed_out, "timed_out"}})
GPUDX_DEFINE_LAYER_JSON(CollectorStatus)
bool enum_from_name(std::string_view name, CollectorState& v) {
    v = nlohmann::json(name).get<CollectorState>();
    return true;
}

const char* to_string(CollectorState s) {
    switch (s) {
        case CollectorState::ok: return "ok";
        case CollectorState::no_data: return "no_data";
        case CollectorState::error: return "error";
        case CollectorState::timed_out: return "timed_out";
    }
    return "?";
}

const CollectorStatus* Snapshot::collector(Collector c) const { return collector(to_string(c)); }

bool Snapshot::collected(Collector c) const {
    auto* st = collector(c);
    return st && st->state == CollectorState::ok;
}

const CollectorStatus* Snapshot::collector(std::string_view name) const {
    for (auto& c : collectors)
        if (c.name == name) return &c;
    return nullptr;
}

namespace {

// The snapshot's own keys, as a const char* for nlohmann's operator[] and contains().
template <auto Member>
constexpr const char* key = snapshot_key<Member>.data();

template <auto... Layer>
void write_layers(nlohmann::json& j, const Snapshot& s) {
    (layer_to_json(j[key<Layer>], s.*Layer), ...);
}

// A missing or null layer keeps its default: collected nothing.
template <auto... Layer>
void read_layers(const nlohmann::json& j, Snapshot& s) {
    auto read = [&](const char* k, auto& layer) {
        if (j.contains(k) && !j[k].is_null()) layer_from_json(j[k], layer);
    };
    (read(key<Layer>, s.*Layer), ...);
}

}  // namespace

nlohmann::json snapshot_to_json(const Snapshot& s) {
    nlohmann::json j;
    j[key<&Snapshot::schema_version>] = s.schema_version;
    j[key<&Snapshot::gpudx_version>] = s.gpudx_version;
    j[key<&Snapshot::collected_at>] = s.collected_at;
    j[key<&Snapshot::root>] = s.root;
    write_layers<&Snapshot::host, &Snapshot::pcie, &Snapshot::module, &Snapshot::kernel_log, &Snapshot::libraries,
                 &Snapshot::devices, &Snapshot::environment, &Snapshot::infiniband,
                 &Snapshot::services, &Snapshot::nvml, &Snapshot::cuda>(j, s);
    if (s.rocm_smi.probed) layer_to_json(j[key<&Snapshot::rocm_smi>], s.rocm_smi);
    auto& cs = j[key<&Snapshot::collectors>] = nlohmann::json::array();
    for (auto& c : s.collectors) {
        nlohmann::json cj;
        layer_to_json(cj, c);
        cs.push_back(std::move(cj));
    }
    if (!s.processes.empty()) {
        auto& ps = j[key<&Snapshot::processes>] = nlohmann::json::array();
        for (auto& p : s.processes) layer_to_json(ps.emplace_back(), p);
    }
    if (!s.nvml_events.empty()) {
        auto& es = j[key<&Snapshot::nvml_events>] = nlohmann::json::array();
        for (auto& e : s.nvml_events) layer_to_json(es.emplace_back(), e);
    }
    repair_utf8(j);
    return j;
}

Result<Snapshot> snapshot_from_json(const nlohmann::json& input) {
    nlohmann::json j = input;
    if (auto bad = normalise_numbers(j)) return fail("snapshot does not match the schema: " + *bad);
    constexpr const char* version_key = key<&Snapshot::schema_version>;
    if (!j.is_object() || !j.contains(version_key) || !j.contains(key<&Snapshot::pcie>))
        return fail("not a gpudx snapshot (no schema_version or pcie key)");
    if (!j[version_key].is_number_integer()) return fail("schema_version is not an integer");
    int version = j[version_key].get<int>();
    if (version > kSnapshotSchemaVersion)
        return fail("snapshot schema version " + std::to_string(version) + " is newer than this gpudx understands (" +
                    std::to_string(kSnapshotSchemaVersion) + "); upgrade gpudx to read it");
    Snapshot s;
    // Fault-isolation boundary: a reader of a third-party format (nlohmann's get<> throws on a wrong type).
    try {
        s.schema_version = version;
        s.gpudx_version = j.value(key<&Snapshot::gpudx_version>, "");
        s.collected_at = j.value(key<&Snapshot::collected_at>, "");
        s.root = j.value(key<&Snapshot::root>, "");
        read_layers<&Snapshot::host, &Snapshot::pcie, &Snapshot::module, &Snapshot::kernel_log, &Snapshot::libraries,
                    &Snapshot::devices, &Snapshot::environment, &Snapshot::infiniband, &Snapshot::services,
                    &Snapshot::nvml, &Snapshot::cuda, &Snapshot::rocm_smi>(j, s);
        if (j.contains(key<&Snapshot::collectors>))
            for (auto& cj : j[key<&Snapshot::collectors>]) {
                CollectorStatus c;
                layer_from_json(cj, c);
                s.collectors.push_back(std::move(c));
            }
        if (j.contains(key<&Snapshot::processes>))
            for (auto& pj : j[key<&Snapshot::processes>]) layer_from_json(pj, s.processes.emplace_back());
        if (j.contains(key<&Snapshot::nvml_events>))
            for (auto& ej : j[key<&Snapshot::nvml_events>]) layer_from_json(ej, s.nvml_events.emplace_back());
    } catch (const nlohmann::json::exception& e) {
        return fail(std::string("snapshot does not match the schema: ") + e.what());
    } catch (const UnknownName& e) {
        return fail(std::string("snapshot does not match the schema: ") + e.what());
    }
    return s;
}

Result<Snapshot> load_snapshot_file(const std::string& path) {
    auto text = read_input_file(path, kMaxSnapshotFileBytes);
    if (!text) return fail("cannot read the snapshot: " + text.error().message, path, text.error().sys_errno);
    nlohmann::json j;
    // Fault-isolation boundary: a reader of a third-party format; only the exception carries where the
    // JSON went wrong.
    try {
        j = nlohmann::json::parse(*text);
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
