#pragma once
// The agent's event store: one SQLite database (linked statically) under --state-dir, in WAL mode with
// synchronous=FULL, so a commit survives `kill -9` and power loss and a torn write is rolled back on the next
// open. Bounded by age and by size: past either, the oldest events go. A database that is not one, or fails
// its check, is moved aside and a new one started; a disk that is full keeps the events in memory (bounded)
// until a write succeeds again. Every such state is said in status() and as an event.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/events.hpp"
#include "core/error.hpp"

struct sqlite3;

namespace gpudx {

struct EventStoreOptions {
    std::string path;  // STATE_DIR/events.db
    int64_t max_age_ms = 30LL * 86'400'000;  // 30 days
    int64_t max_bytes = 64LL << 20;          // 64 MiB of pages in use
    size_t max_pending = 10'000;             // events held in memory while the disk refuses them
};

struct EventStoreStatus {
    bool writable = false;       // the last write succeeded
    std::string problem;         // why not, or what was done about it (moved aside)
    std::string moved_aside;     // where a corrupt database went, empty when none
    uint64_t stored = 0;         // events in the database
    uint64_t pending = 0;        // held in memory, not yet written
    uint64_t dropped = 0;        // lost: more pending than max_pending
    uint64_t write_failures = 0;
};

class EventStore {
public:
    // Opens (or creates) the database; a corrupt one is moved aside to PATH.corrupt-TIME and a new one made
    // (said in status() and as the first event). An Error only when no database can be made at all (the
    // directory does not exist or cannot be written): the agent then runs with the events in memory.
    static Result<std::unique_ptr<EventStore>> open(const EventStoreOptions& o);
    ~EventStore();
    EventStore(const EventStore&) = delete;
    EventStore& operator=(const EventStore&) = delete;

    // Stores the events in one transaction, each given its id (the events not written keep 0 and wait), with
    // the agent's state (key -> value: what it holds open, a drain it is about to make) in the same commit, so
    // a kill -9 leaves both as they were before or both as they are after.
    // False when the write failed (a full disk): the events and the state wait in memory and go with the next
    // append.
    // With `open_findings`, the table of the agent's open findings (FindingLedger) is written anew from the rows
    // it puts, in the same commit, a row at a time. It waits as the state does; the newest one given is written.
    using RowPut = std::function<void(const std::string& key, const std::string& entry)>;
    using OpenFindingsWriter = std::function<void(const RowPut& put)>;
    bool append(std::vector<AgentEvent>& events, const std::map<std::string, std::string>& state = {},
                OpenFindingsWriter open_findings = {});
    // Each open finding as last written (an entry's JSON text, as put), in key order; how many (0 too where no
    // commit made the table yet). Only what a commit wrote: not a writer still waiting. An Error when the rows
    // could not all be read: the entries visited before are not the whole ledger.
    Result<size_t> visit_open_findings(const std::function<void(std::string_view entry)>& visit);
    // Where gpudx kept the open findings before they had a table: one JSON array under this state key, read by an
    // agent that finds the table empty (agent.cpp) and deleted when the table is first written.
    static constexpr const char* kLegacyOpenFindingsKey = "open_findings";
    // A state value as last appended (waiting in memory or stored); nullopt when never set. An empty value is
    // how a key is cleared.
    std::optional<std::string> state(const std::string& key);
    // Stored events with time >= since_ms and id > after_id, oldest first, at most `limit`.
    std::vector<AgentEvent> query(int64_t since_ms, int64_t after_id, size_t limit);
    // The same events handed one by one to `visit` with their evidence as the JSON text stored (e.evidence left
    // empty), so an answer can write them without parsing and building each one; how many were visited. A
    // visitor of events held in memory is given nullopt: their evidence is e.evidence.
    using EventVisitor = std::function<void(const AgentEvent& e, std::optional<std::string_view> evidence_json)>;
    size_t visit(int64_t since_ms, int64_t after_id, size_t limit, const EventVisitor& visit);
    // The events waiting in memory for a write to succeed (id 0), with time >= since_ms.
    std::vector<AgentEvent> pending(int64_t since_ms) const;
    template <typename F>
    void each_pending(F&& f) const {
        for (const auto& e : pending_) f(e);
    }
    // Deletes events older than max_age and the oldest while the pages in use exceed max_bytes.
    void prune(int64_t now);
    EventStoreStatus status() const;
    // PRAGMA integrity_check's answer ("ok").
    std::string integrity_check();

private:
    explicit EventStore(EventStoreOptions o) : o_(std::move(o)) {}
    // `corrupt`: the file is there but is no database, or fails its check (to be moved aside).
    Result<void> open_database(bool& corrupt);
    bool write(const std::vector<AgentEvent*>& events, const std::map<std::string, std::string>& state,
               const OpenFindingsWriter& open_findings);
    void move_aside(const std::string& why);
    int64_t bytes_in_use();

    EventStoreOptions o_;
    sqlite3* db_ = nullptr;
    std::deque<AgentEvent> pending_;
    std::map<std::string, std::string> pending_state_;
    OpenFindingsWriter pending_open_findings_;
    EventStoreStatus status_;
};

}  // namespace gpudx
