// Reading back a saved diagnosis, and naming the fields a saved document lacks (model/node_page.hpp).
#include "model/node_page.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpudx {
namespace {

std::string text_of(const nlohmann::json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<LayerState> parse_layer_state(std::string_view s) {
    for (auto state : {LayerState::ok, LayerState::warning, LayerState::failed, LayerState::not_evaluated})
        if (s == to_string(state)) return state;
    return std::nullopt;
}

std::optional<CollectorState> parse_collector_state(std::string_view s) {
    for (auto state : {CollectorState::ok, CollectorState::no_data, CollectorState::error, CollectorState::timed_out})
        if (s == to_string(state)) return state;
    return std::nullopt;
}

void missing_walk(const nlohmann::json& written, const nlohmann::json& read, const std::string& path,
                  std::vector<std::string>& out) {
    if (written.is_object() && read.is_object()) {
        for (auto it = written.begin(); it != written.end(); ++it) {
            std::string sub = path.empty() ? it.key() : path + "." + it.key();
            auto r = read.find(it.key());
            if (r == read.end()) {
                out.push_back(sub);
                continue;
            }
            missing_walk(it.value(), *r, sub, out);
        }
        return;
    }
    if (written.is_array() && read.is_array()) {
        // Objects in an array: a key is missing when no element of the saved array has it, while an element of
        // the written one does; the arrays' elements correspond one to one (the reader keeps their order).
        nlohmann::json merged_written = nlohmann::json::object(), merged_read = nlohmann::json::object();
        for (const auto& e : written)
            if (e.is_object())
                for (auto it = e.begin(); it != e.end(); ++it)
                    if (!merged_written.contains(it.key())) merged_written[it.key()] = it.value();
        for (const auto& e : read)
            if (e.is_object())
                for (auto it = e.begin(); it != e.end(); ++it)
                    if (!merged_read.contains(it.key())) merged_read[it.key()] = it.value();
        if (!merged_written.empty() && !read.empty()) missing_walk(merged_written, merged_read, path + "[]", out);
    }
}

}  // namespace

std::vector<std::string> missing_json_fields(const nlohmann::json& written, const nlohmann::json& read, size_t limit) {
    std::vector<std::string> all;
    missing_walk(written, read, "", all);
    if (all.size() <= limit) return all;
    size_t more = all.size() - limit;
    all.resize(limit);
    all.push_back(fmt::format("... and {} more", more));
    return all;
}

namespace {

Result<SavedDiagnosis> read_diagnosis(const nlohmann::json& j) {
    if (!j.is_object()) return fail("not a gpudx diagnosis: the document is not a JSON object");
    auto verdict_it = j.find("verdict");
    auto findings_it = j.find("findings");
    if (verdict_it == j.end() || !verdict_it->is_string() || findings_it == j.end() || !findings_it->is_array())
        return fail("not a gpudx diagnosis: it has no \"verdict\" and \"findings\" (gpudx diagnose --format json)");
    SavedDiagnosis out;
    auto& d = out.diagnosis;
    auto verdict = parse_name<Verdict>(verdict_it->get<std::string>());
    if (!verdict) return fail("verdict \"" + verdict_it->get<std::string>() + "\" is not one gpudx writes");
    d.verdict = *verdict;
    if (auto it = j.find("exit_code"); it != j.end() && it->is_number_integer()) d.exit_code = it->get<int>();
    else d.exit_code = kExitUnknown;  // fail closed: a diagnosis whose code is not known is no verdict of health
    if (auto b = text_of(j, "boundary"); !b.empty()) d.boundary = parse_layer(b);
    size_t index = 0;
    for (const auto& f : *findings_it) {
        auto finding = finding_from_json(f);
        if (!finding) return fail(fmt::format("findings[{}]: no id, or a layer or severity gpudx does not know", index));
        d.findings.push_back(std::move(*finding));
        ++index;
    }
    if (auto it = j.find("layers"); it != j.end() && it->is_array()) {
        index = 0;
        for (const auto& l : *it) {
            auto layer = l.is_object() ? parse_layer(text_of(l, "layer")) : std::nullopt;
            if (!layer) return fail(fmt::format("layers[{}]: no layer gpudx knows", index));
            LayerReport r;
            r.layer = *layer;
            r.state = parse_layer_state(text_of(l, "state")).value_or(LayerState::not_evaluated);
            r.reason = text_of(l, "reason");
            r.trusted = l.value("trusted", true);
            r.unreadable = l.value("unreadable", false);
            r.errors = l.value("errors", 0u);
            r.warnings = l.value("warnings", 0u);
            d.layers.push_back(std::move(r));
            ++index;
        }
    }
    if (auto it = j.find("collectors"); it != j.end() && it->is_array())
        for (const auto& c : *it) {
            if (!c.is_object()) continue;
            CollectorStatus st;
            st.name = text_of(c, "name");
            st.state = parse_collector_state(text_of(c, "state")).value_or(CollectorState::error);
            st.message = text_of(c, "message");
            st.path = text_of(c, "path");
            if (auto ms = c.find("duration_ms"); ms != c.end() && ms->is_number()) st.duration_ms = ms->get<double>();
            out.collectors.push_back(std::move(st));
        }
    out.host = text_of(j, "host");
    out.collected_at = text_of(j, "collected_at");
    out.root = text_of(j, "root");
    return out;
}

}  // namespace

Result<SavedDiagnosis> diagnosis_from_json(const nlohmann::json& j) {
    // Fault-isolation boundary of a JSON reader (core/error.hpp): a field of the wrong type is an error of the file.
    try {
        return read_diagnosis(j);
    } catch (const nlohmann::json::exception& e) {
        return fail(std::string("not a diagnosis gpudx can read: ") + e.what());
    }
}

}  // namespace gpudx
