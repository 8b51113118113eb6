#include "agent/recorder.hpp"

#include <cstdio>

namespace gpudx {

namespace {

constexpr size_t kKeptNotes = 20;

}  // namespace

void Recorder::open() {
    auto store = EventStore::open(o_);
    std::lock_guard lock(mutex_);
    if (!store) {
        store_problem_ = store.error().message + " (events are kept in memory only)";
        return;
    }
    store_ = std::move(*store);
    if (auto st = store_->status(); !st.moved_aside.empty()) std::fprintf(stderr, "gpudx agent: %s\n", st.problem.c_str());
}

std::string Recorder::problem() const {
    std::lock_guard lock(mutex_);
    return store_problem_;
}

nlohmann::json Recorder::saved_state(const char* key) {
    std::lock_guard lock(mutex_);
    if (!store_) return nullptr;
    auto text = store_->state(key);
    return text && !text->empty() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
}

Result<size_t> Recorder::visit_open_findings(const std::function<void(std::string_view entry)>& visit) {
    std::lock_guard lock(mutex_);
    if (!store_) return size_t{0};
    return store_->visit_open_findings(visit);
}

void Recorder::record(std::vector<AgentEvent> events, const std::map<std::string, std::string>& state,
                      EventStore::OpenFindingsWriter open_findings) {
    if (events.empty() && state.empty() && !open_findings) return;
    std::lock_guard lock(mutex_);
    for (const auto& e : events) ++events_by_kind_[static_cast<size_t>(e.kind)];
    if (store_) {
        bool was_writable = store_->status().writable;
        store_->append(events, state, std::move(open_findings));
        if (!events.empty()) store_->prune(now_ms());
        auto st = store_->status();
        if (was_writable && !st.writable) std::fprintf(stderr, "gpudx agent: %s\n", st.problem.c_str());
        return;
    }
    for (auto& e : events) memory_events_.push_back(std::move(e));
    while (memory_events_.size() > o_.max_pending) memory_events_.pop_front();
}

void Recorder::note(std::string message) {
    std::fprintf(stderr, "gpudx agent: %s\n", message.c_str());
    {
        std::lock_guard lock(mutex_);
        notes_.emplace_back(now_ms(), message);
        while (notes_.size() > kKeptNotes) notes_.pop_front();
    }
    record({agent_note(std::move(message), now_ms())});
}

std::optional<size_t> Recorder::visit_page(int64_t since_ms, int64_t after_id, size_t limit,
                                           const EventStore::EventVisitor& visit) {
    std::lock_guard lock(mutex_);
    if (!store_) return std::nullopt;
    return store_->visit(since_ms, after_id, limit, visit);
}

size_t Recorder::visit_unstored(int64_t since_ms, size_t skip, size_t limit, const EventStore::EventVisitor& visit) {
    std::lock_guard lock(mutex_);
    size_t visited = 0;
    auto take = [&](const AgentEvent& e) {
        if (e.time_ms < since_ms || visited >= limit) return;
        if (skip > 0) {
            --skip;
            return;
        }
        visit(e, std::nullopt);
        ++visited;
    };
    if (store_) store_->each_pending(take);
    else
        for (const auto& e : memory_events_) take(e);
    return visited;
}

void Recorder::describe(AgentStatus& s) const {
    std::lock_guard lock(mutex_);
    if (store_) {
        auto st = store_->status();
        s.store = {.database = true,
                   .writable = st.writable,
                   .stored = st.stored,
                   .pending = st.pending,
                   .dropped = st.dropped,
                   .write_failures = st.write_failures,
                   .problem = st.problem,
                   .moved_aside = st.moved_aside};
    } else {
        s.store = {.database = false, .writable = false, .stored = 0, .pending = memory_events_.size(),
                   .problem = store_problem_};
    }
    s.events_by_kind = events_by_kind_;
    for (const auto& [t, m] : notes_) s.notes.push_back({t, m});
}

}  // namespace gpudx
