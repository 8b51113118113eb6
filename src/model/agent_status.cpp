#include "model/agent_status.hpp"

#include <nlohmann/json.hpp>

#include "core/clock.hpp"

namespace gpudx {

namespace {

// A reader that says the first key it could not read.
class Reader {
public:
    explicit Reader(std::string& problem) : problem_(problem) {}
    const nlohmann::json* object(const nlohmann::json& j, const char* key, bool required = true) {
        auto it = j.find(key);
        if (it == j.end()) return required ? bad(key, "missing") : nullptr;
        return it->is_object() ? &*it : bad(key, "not an object");
    }
    template <class T>
    void get(const nlohmann::json& j, const char* key, T& out) {
        auto it = j.find(key);
        if (it == j.end()) return (void)bad(key, "missing");
        // Fault-isolation boundary: nlohmann's exception for a value of the wrong type says which key.
        try {
            out = it->get<T>();
        } catch (const nlohmann::json::exception&) {
            bad(key, "of the wrong type");
        }
    }
    void time(const nlohmann::json& j, const char* key, int64_t& out) {
        std::string text;
        get(j, key, text);
        if (!problem_.empty()) return;
        if (auto t = parse_utc_iso8601_ms(text)) out = *t;
        else bad(key, "not a time: " + text);
    }
    std::nullptr_t bad(const char* key, const std::string& why) {
        if (problem_.empty()) problem_ = std::string(key) + ": " + why;
        return nullptr;
    }

private:
    std::string& problem_;
};

}  // namespace

nlohmann::json agent_status_to_json(const AgentStatus& s) {
    nlohmann::json j;
    j["version"] = s.version;
    j["started"] = utc_iso8601_ms(s.started_ms);
    j["uptime_s"] = s.uptime_s;
    j["serving"] = s.serving;
    j["nvml_events"] = {{"watching", s.nvml_events.watching}, {"received", s.nvml_events.received}};
    j["kernel_log"] = {{"source", s.kernel_log.source},
                       {"lines_read", s.kernel_log.lines_read},
                       {"lines_matched", s.kernel_log.lines_matched},
                       {"kmsg_records_lost", s.kernel_log.kmsg_records_lost}};
    if (const auto& d = s.last_diagnosis)
        j["last_diagnosis"] = {
            {"time", utc_iso8601_ms(d->time_ms)}, {"trigger", to_string(d->trigger)}, {"duration_ms", d->duration_ms}};
    const auto& st = s.store;
    if (st.database)
        j["store"] = {{"writable", st.writable}, {"stored", st.stored},   {"pending", st.pending},
                      {"dropped", st.dropped},   {"problem", st.problem}, {"moved_aside", st.moved_aside},
                      {"write_failures", st.write_failures}};
    else
        j["store"] = {{"writable", false}, {"stored", st.stored}, {"pending", st.pending}, {"problem", st.problem}};
    if (s.drain) j["drain"] = {{"node", s.drain->node}, {"last", s.drain->last}, {"failing", s.drain->failing}};
    nlohmann::json notes = nlohmann::json::array();
    for (const auto& n : s.notes) notes.push_back({{"time", utc_iso8601_ms(n.time_ms)}, {"message", n.message}});
    j["notes"] = notes;
    return j;
}

Result<AgentStatus> agent_status_from_json(const nlohmann::json& j) {
    if (!j.is_object()) return fail("the agent's status is not a JSON object");
    std::string problem;
    Reader r(problem);
    AgentStatus s;
    r.get(j, "version", s.version);
    r.time(j, "started", s.started_ms);
    r.get(j, "uptime_s", s.uptime_s);
    r.get(j, "serving", s.serving);
    if (auto* n = r.object(j, "nvml_events")) {
        r.get(*n, "watching", s.nvml_events.watching);
        r.get(*n, "received", s.nvml_events.received);
    }
    if (auto* k = r.object(j, "kernel_log")) {
        r.get(*k, "source", s.kernel_log.source);
        r.get(*k, "lines_read", s.kernel_log.lines_read);
        r.get(*k, "lines_matched", s.kernel_log.lines_matched);
        r.get(*k, "kmsg_records_lost", s.kernel_log.kmsg_records_lost);
    }
    if (auto* d = r.object(j, "last_diagnosis", false)) {
        AgentStatus::LastDiagnosis last;
        r.time(*d, "time", last.time_ms);
        std::string trigger;
        r.get(*d, "trigger", trigger);
        if (auto t = parse_diagnosis_trigger(trigger)) last.trigger = *t;
        else r.bad("trigger", "not a trigger gpudx knows: " + trigger);
        r.get(*d, "duration_ms", last.duration_ms);
        s.last_diagnosis = last;
    }
    if (auto* st = r.object(j, "store")) {
        // A store with no database says only these four.
        s.store.database = st->contains("moved_aside");
        r.get(*st, "writable", s.store.writable);
        r.get(*st, "stored", s.store.stored);
        r.get(*st, "pending", s.store.pending);
        r.get(*st, "problem", s.store.problem);
        if (s.store.database) {
            r.get(*st, "dropped", s.store.dropped);
            r.get(*st, "moved_aside", s.store.moved_aside);
            r.get(*st, "write_failures", s.store.write_failures);
        }
    }
    if (auto* d = r.object(j, "drain", false)) {
        AgentStatus::Drain drain;
        r.get(*d, "node", drain.node);
        r.get(*d, "last", drain.last);
        r.get(*d, "failing", drain.failing);
        s.drain = drain;
    }
    if (auto n = j.find("notes"); n == j.end() || !n->is_array()) {
        r.bad("notes", "not a list");
    } else {
        for (const auto& note : *n) {
            if (!note.is_object()) {
                r.bad("notes", "an entry that is not an object");
                break;
            }
            AgentStatus::Note read;
            r.time(note, "time", read.time_ms);
            r.get(note, "message", read.message);
            s.notes.push_back(std::move(read));
        }
    }
    if (!problem.empty()) return fail("the agent's status: " + problem);
    return s;
}

}  // namespace gpudx
