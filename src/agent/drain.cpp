#include "agent/drain.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "render/formats.hpp"
#include "rules/engine/diagnose.hpp"

namespace gpudx {

namespace {

// The drain journal's keys in the event store's state (agent/store.hpp).
constexpr const char* kStateDrainLayers = "drain_layers";
constexpr const char* kStateDrainIntent = "drain_intent";

nlohmann::json layers_json(const std::set<Layer>& layers) {
    nlohmann::json j = nlohmann::json::array();
    for (auto l : layers) j.push_back(to_string(l));
    return j;
}

std::set<Layer> layers_from_json(const nlohmann::json& j) {
    std::set<Layer> out;
    if (j.is_array())
        for (const auto& v : j)
            if (v.is_string())
                if (auto l = parse_layer(v.get<std::string>())) out.insert(*l);
    return out;
}

}  // namespace

void SlurmDrain::restore() {
    drain_layers_ = layers_from_json(recorder_.saved_state(kStateDrainLayers));
    if (auto intent = recorder_.saved_state(kStateDrainIntent); intent.is_object()) interrupted_ = intent;
}

AgentStatus::Drain SlurmDrain::status() const {
    std::lock_guard lock(outcome_mutex_);
    return {o_.node, last_, failing_};
}

void SlurmDrain::set_outcome(bool failing, std::string last) {
    std::lock_guard lock(outcome_mutex_);
    failing_ = failing;
    last_ = std::move(last);
}

void SlurmDrain::decide(const Diagnosis& d, const std::map<Layer, std::string>& unread) {
    // What this diagnosis read (a layer whose findings were carried was not).
    std::set<Layer> read_now;
    for (const auto& l : d.layers)
        if (!unread.contains(l.layer)) read_now.insert(l.layer);
    // A node gpudx drained comes back only on evidence: a diagnosis that read every layer the drain rested on.
    int exit_code = d.exit_code;
    if (exit_code == kExitHealthy || exit_code == kExitWarnings) {
        std::string missing;
        for (auto l : drain_layers_)
            if (!read_now.contains(l)) missing += (missing.empty() ? "" : ", ") + std::string(to_string(l));
        if (!missing.empty()) {
            exit_code = kExitUnknown;  // neither drain nor resume
            std::string why = "a resume waits: the drain rested on " + missing + ", which could not be read now";
            if (why != resume_held_) recorder_.note(why);
            resume_held_ = why;
        } else {
            resume_held_.clear();
        }
    }
    // A drain the previous run made and did not record is recorded before a new intent takes its place.
    if (!resolve_interrupted()) return;
    auto reason = slurm_reason(d);
    // The intent is on disk before scontrol runs: a kill -9 between the two leaves it for the next start to
    // resolve against the node's state, instead of a drain with no record.
    nlohmann::json intent = {{"time_ms", now_ms()}, {"exit_code", exit_code},
                             {"reason", reason ? reason->format() : std::string()}, {"layers", layers_json(read_now)}};
    recorder_.record({}, {{kStateDrainIntent, json_text(intent)}});
    auto r = apply_slurm_drain(o_, exit_code, reason);
    std::map<std::string, std::string> state{{kStateDrainIntent, ""}};
    std::vector<AgentEvent> events;
    if (auto e = event_for(d, reason, r)) events.push_back(std::move(*e));
    if (r && r->action == SlurmAction::drain) {
        drain_layers_ = read_now;
        state[kStateDrainLayers] = json_text(layers_json(drain_layers_));
    } else if (r && r->action == SlurmAction::resume) {
        drain_layers_.clear();
        state[kStateDrainLayers] = "";
    }
    recorder_.record(std::move(events), state);
}

bool SlurmDrain::resolve_interrupted() {
    if (!interrupted_) return true;
    auto node = read_slurm_node(o_);
    if (!node) {
        // Asked again at the next decision; until then no new intent replaces this one.
        if (auto e = event_for({}, std::nullopt, std::unexpected(node.error()))) recorder_.record({std::move(*e)});
        return false;
    }
    int was = interrupted_->value("exit_code", int{kExitUnknown});
    bool ours = node->drain && node->gpudx_reason();
    std::map<std::string, std::string> state{{kStateDrainIntent, ""}};
    std::vector<AgentEvent> events;
    AgentEvent e;
    e.time_ms = now_ms();
    // The intent's reason is the text scontrol was given: compared as Slurm holds it.
    if (ours && was == kExitErrors && node->reason == interrupted_->value("reason", std::string())) {
        e.kind = AgentEventKind::drained;
        e.message = fmt::format("Slurm node {} was drained by gpudx ({}) just before the agent stopped; recorded "
                                "after its restart",
                                o_.node, node->reason);
        events.push_back(std::move(e));
        drain_layers_ = layers_from_json(interrupted_->value("layers", nlohmann::json::array()));
        state[kStateDrainLayers] = json_text(layers_json(drain_layers_));
    } else if (!node->drain && (was == kExitHealthy || was == kExitWarnings) && !drain_layers_.empty()) {
        e.kind = AgentEventKind::resumed;
        e.message = fmt::format("Slurm node {} ({}) was resumed by gpudx just before the agent stopped; recorded "
                                "after its restart",
                                o_.node, node->state);
        events.push_back(std::move(e));
        drain_layers_.clear();
        state[kStateDrainLayers] = "";
    }
    for (const auto& ev : events) std::fprintf(stderr, "gpudx agent: %s\n", ev.message.c_str());
    recorder_.record(std::move(events), state);
    interrupted_.reset();
    return true;
}

std::optional<AgentEvent> SlurmDrain::event_for(const Diagnosis& d, const std::optional<SlurmReason>& reason,
                                                const Result<SlurmDrainResult>& r) {
    AgentEvent e;
    e.time_ms = now_ms();
    if (!r) {
        std::string message = "--drain: " + r.error().message;
        bool news = !failing_ || message != last_;
        set_outcome(true, message);
        if (!news) return std::nullopt;
        e.kind = AgentEventKind::drain_failed;
        e.message = message;
        std::fprintf(stderr, "gpudx agent: %s\n", message.c_str());
        return e;
    }
    set_outcome(false, r->message);
    if (r->action != SlurmAction::drain && r->action != SlurmAction::resume) return std::nullopt;
    e.kind = r->action == SlurmAction::drain ? AgentEventKind::drained : AgentEventKind::resumed;
    e.message = r->message;
    // A drain names the finding its reason names (the first error); a resume, the one the node's reason named.
    const Finding* cause = nullptr;
    if (r->action == SlurmAction::drain) {
        for (const auto& f : d.findings)
            if (f.severity == Severity::error) {
                cause = &f;
                break;
            }
    } else if (auto was = r->before.gpudx_reason()) {
        e.finding = was->finding;
    }
    if (cause) {
        e.finding = cause->id;
        e.layer = to_string(cause->layer);
        e.severity = to_string(cause->severity);
        if (!cause->subjects.empty()) {
            e.gpu_uuid = cause->subjects.front().uuid;
            e.gpu_pci = cause->subjects.front().pci;
        }
    }
    if (reason && r->action == SlurmAction::drain)
        e.evidence.push_back({{"source", "Slurm reason"}, {"value", reason->format()}});
    std::fprintf(stderr, "gpudx agent: %s\n", r->message.c_str());
    return e;
}

}  // namespace gpudx
