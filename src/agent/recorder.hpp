#pragma once
// What the agent records, behind one lock: the event store (or, when none could be made, the events in memory),
// the events counted by kind, and its latest notes. The main loop records; the servers' threads page through the
// events and read the rest for /v1/status and /metrics. One mutex, because these are one thing: a record is
// counted and kept in the same step, and a note is a record.
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/store.hpp"
#include "model/agent_status.hpp"

namespace gpudx {

class Recorder {
public:
    explicit Recorder(EventStoreOptions o) : o_(std::move(o)) {}

    // Opens the event store; without one (says why on stderr later: problem()) the events are kept in memory.
    void open();
    // Why there is no store at all; empty when there is one.
    std::string problem() const;
    // A state value the store holds (agent/store.hpp), as JSON; null when none, unreadable, or no store.
    nlohmann::json saved_state(const char* key);

    // Stores the events, and the state given (key -> value) and the open findings in the same commit
    // (agent/store.hpp). Without a store the state and the open findings are not kept.
    void record(std::vector<AgentEvent> events, const std::map<std::string, std::string>& state = {},
                EventStore::OpenFindingsWriter open_findings = {});
    // The open findings the store holds, an entry at a time (EventStore::visit_open_findings); 0 without one.
    Result<size_t> visit_open_findings(const std::function<void(std::string_view entry)>& visit);
    // Said on stderr, kept among the latest notes (/v1/status) and recorded as the agent's news.
    void note(std::string message);

    // A page of stored events (EventStore::visit) handed to `visit` under the lock; nullopt when there is no store,
    // else how many were visited.
    std::optional<size_t> visit_page(int64_t since_ms, int64_t after_id, size_t limit,
                                     const EventStore::EventVisitor& visit);
    // The events without an id (those held in memory while the store refuses them, or, without a store, every one
    // kept) with time >= since_ms, past the first `skip` of them, at most `limit`, handed to
    // `visit` under the lock (a streamed answer goes through them a piece at a time); how many were visited.
    size_t visit_unstored(int64_t since_ms, size_t skip, size_t limit, const EventStore::EventVisitor& visit);
    // The store's state, the count by kind and the notes.
    void describe(AgentStatus& s) const;

private:
    EventStoreOptions o_;
    mutable std::mutex mutex_;
    std::unique_ptr<EventStore> store_;
    std::string store_problem_;                 // when there is no store at all
    std::deque<AgentEvent> memory_events_;      // the events, when there is no store
    std::array<uint64_t, std::size(kAllAgentEventKinds)> events_by_kind_{};
    std::deque<std::pair<int64_t, std::string>> notes_;
};

}  // namespace gpudx
