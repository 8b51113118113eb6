#include "agent/store.hpp"

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace gpudx {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS events("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER NOT NULL, kind TEXT NOT NULL,"
    " finding TEXT NOT NULL, layer TEXT NOT NULL, severity TEXT NOT NULL, gpu_uuid TEXT NOT NULL,"
    " gpu_pci TEXT NOT NULL, message TEXT NOT NULL, evidence TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS events_time ON events(time_ms);"
    // What the agent must remember across a restart beside its events (docs/agent.md, "Restarts").
    "CREATE TABLE IF NOT EXISTS agent_state(key TEXT PRIMARY KEY, value TEXT NOT NULL);";

// The findings the agent holds open (FindingLedger), a row each, written with the events that changed them. Made
// by the first write that puts them, not at open: opening a store of an earlier gpudx on a full disk must not fail
// for want of a new table (it would lose the drain journal with it).
constexpr const char* kOpenFindingsTable =
    "CREATE TABLE IF NOT EXISTS open_findings(key TEXT PRIMARY KEY, entry TEXT NOT NULL)";

// A statement, finalized when it goes out of scope.
class Statement {
public:
    Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
    ~Statement() { sqlite3_finalize(stmt_); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    bool ok() const { return rc_ == SQLITE_OK; }
    sqlite3_stmt* get() { return stmt_; }
    void bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
    void bind(int i, const std::string& v) { sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
    int step() { return sqlite3_step(stmt_); }
    std::string text(int col) {
        auto* p = sqlite3_column_text(stmt_, col);
        return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
                 : std::string();
    }
    // Valid until the next step.
    std::string_view view(int col) {
        auto* p = sqlite3_column_text(stmt_, col);
        return p ? std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
                 : std::string_view();
    }
    int64_t integer(int col) { return sqlite3_column_int64(stmt_, col); }

private:
    sqlite3_stmt* stmt_ = nullptr;
    int rc_ = SQLITE_ERROR;
};

bool is_corruption(int rc) {
    int primary = rc & 0xff;
    return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

int64_t pragma_integer(sqlite3* db, const char* sql) {
    Statement s(db, sql);
    return s.ok() && s.step() == SQLITE_ROW ? s.integer(0) : 0;
}

}  // namespace

Result<std::unique_ptr<EventStore>> EventStore::open(const EventStoreOptions& o) {
    std::unique_ptr<EventStore> store(new EventStore(o));
    bool corrupt = false;
    auto opened = store->open_database(corrupt);
    if (!opened && !corrupt) return std::unexpected(opened.error());
    if (!opened) {
        // Not a database, or one that fails its check: moved aside, and a new one.
        store->move_aside(opened.error().message);
        if (auto again = store->open_database(corrupt); !again) return std::unexpected(again.error());
    }
    store->status_.writable = true;
    store->status_.stored = static_cast<uint64_t>(pragma_integer(store->db_, "SELECT count(*) FROM events"));
    if (!store->status_.moved_aside.empty()) {
        std::vector<AgentEvent> note = {agent_note(store->status_.problem, now_ms())};
        store->append(note);
    }
    return store;
}

Result<void> EventStore::open_database(bool& corrupt) {
    corrupt = false;
    int rc = sqlite3_open_v2(o_.path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    auto error = [&](const std::string& what) -> Result<void> {
        std::string msg = fmt::format("{}: {}: {}", o_.path, what, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
        int code = db_ ? sqlite3_extended_errcode(db_) : rc;
        sqlite3_close(db_);
        db_ = nullptr;
        corrupt = is_corruption(code);
        return fail(msg, o_.path);
    };
    if (rc != SQLITE_OK) return error("cannot open");
    sqlite3_busy_timeout(db_, 2000);
    // WAL with synchronous=FULL: every commit is on disk before append() returns; a crash mid-write leaves
    // the last commit intact and the torn frames are ignored on the next open.
    // A page cache of 512 KiB instead of SQLite's 2 MiB: the agent appends at the table's end and pages by id, so
    // what it reads again is a few pages; the rest is in the kernel's page cache, not in the agent's memory.
    for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=OFF",
                               "PRAGMA cache_size=-512"}) {
        char* err = nullptr;
        rc = sqlite3_exec(db_, pragma, nullptr, nullptr, &err);
        sqlite3_free(err);
        if (rc != SQLITE_OK) return error(pragma);
    }
    {
        Statement check(db_, "PRAGMA quick_check");
        if (!check.ok()) return error("check");
        std::string answer = check.step() == SQLITE_ROW ? check.text(0) : "no answer";
        if (answer != "ok") {
            std::string msg = fmt::format("{}: PRAGMA quick_check: {}", o_.path, answer);
            sqlite3_close(db_);
            db_ = nullptr;
            corrupt = true;
            return fail(msg, o_.path);
        }
    }
    char* err = nullptr;
    rc = sqlite3_exec(db_, kSchema, nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) return error("schema");
    return {};
}

void EventStore::move_aside(const std::string& why) {
    std::string aside = fmt::format("{}.corrupt-{}", o_.path, utc_iso8601_ms(now_ms()));
    std::error_code ec;
    std::filesystem::rename(o_.path, aside, ec);
    // The WAL and its index belong to the old file: a new database must not replay them.
    for (const char* suffix : {"-wal", "-shm"}) {
        std::error_code ignored;
        if (std::filesystem::exists(o_.path + suffix, ignored))
            std::filesystem::rename(o_.path + suffix, aside + suffix, ignored);
    }
    status_.moved_aside = ec ? std::string() : aside;
    status_.problem = ec ? fmt::format("{} (could not move it aside: {})", why, ec.message())
                         : fmt::format("the event store was unreadable ({}); moved aside to {} and a new one started",
                                       why, aside);
}

EventStore::~EventStore() {
    if (db_) sqlite3_close(db_);
}

bool EventStore::write(const std::vector<AgentEvent*>& events, const std::map<std::string, std::string>& state,
                       const OpenFindingsWriter& open_findings) {
    if (!db_) return false;
    auto failed = [&](const char* what) {
        status_.writable = false;
        ++status_.write_failures;
        status_.problem = fmt::format("cannot write the event store {}: {}: {}", o_.path, what, sqlite3_errmsg(db_));
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        for (auto* e : events) e->id = 0;
        return false;
    };
    if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) return failed("begin");
    Statement insert(db_,
                     "INSERT INTO events(time_ms, kind, finding, layer, severity, gpu_uuid, gpu_pci, message, evidence)"
                     " VALUES(?,?,?,?,?,?,?,?,?)");
    if (!insert.ok()) return failed("prepare");
    for (auto* e : events) {
        insert.bind(1, e->time_ms);
        insert.bind(2, std::string(to_string(e->kind)));
        insert.bind(3, e->finding);
        insert.bind(4, e->layer);
        insert.bind(5, e->severity);
        insert.bind(6, e->gpu_uuid);
        insert.bind(7, e->gpu_pci);
        insert.bind(8, e->message);
        insert.bind(9, json_text(e->evidence));
        if (insert.step() != SQLITE_DONE) return failed("insert");
        e->id = sqlite3_last_insert_rowid(db_);
        sqlite3_reset(insert.get());
    }
    if (!state.empty()) {
        Statement put(db_, "INSERT INTO agent_state(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
        if (!put.ok()) return failed("prepare");
        for (const auto& [key, value] : state) {
            put.bind(1, key);
            put.bind(2, value);
            if (put.step() != SQLITE_DONE) return failed("state");
            sqlite3_reset(put.get());
        }
    }
    if (open_findings) {
        if (sqlite3_exec(db_, kOpenFindingsTable, nullptr, nullptr, nullptr) != SQLITE_OK) return failed("open findings");
        Statement clear(db_, "DELETE FROM open_findings");
        if (!clear.ok() || clear.step() != SQLITE_DONE) return failed("open findings");
        Statement put(db_, "INSERT INTO open_findings(key, entry) VALUES(?, ?)");
        if (!put.ok()) return failed("prepare");
        bool ok = true;
        open_findings([&](const std::string& key, const std::string& entry) {
            if (!ok) return;
            put.bind(1, key);
            put.bind(2, entry);
            ok = put.step() == SQLITE_DONE;
            sqlite3_reset(put.get());
        });
        if (!ok) return failed("open findings");
        Statement legacy(db_, "DELETE FROM agent_state WHERE key = ?");
        if (!legacy.ok()) return failed("prepare");
        legacy.bind(1, std::string(kLegacyOpenFindingsKey));
        if (legacy.step() != SQLITE_DONE) return failed("state");
    }
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return failed("commit");
    status_.stored += events.size();
    if (!status_.writable) status_.problem.clear();
    status_.writable = true;
    return true;
}

bool EventStore::append(std::vector<AgentEvent>& events, const std::map<std::string, std::string>& state,
                         OpenFindingsWriter open_findings) {
    // What waited from an earlier failure goes first, in order; the newer value of a state key wins.
    std::vector<AgentEvent*> batch;
    for (auto& e : pending_) batch.push_back(&e);
    for (auto& e : events) batch.push_back(&e);
    for (const auto& [key, value] : state) pending_state_[key] = value;
    if (open_findings) pending_open_findings_ = std::move(open_findings);
    if (batch.empty() && pending_state_.empty() && !pending_open_findings_) return true;
    if (write(batch, pending_state_, pending_open_findings_)) {
        pending_.clear();
        pending_state_.clear();
        pending_open_findings_ = nullptr;
        status_.pending = 0;
        return true;
    }
    for (auto& e : events) pending_.push_back(e);
    while (pending_.size() > o_.max_pending) {
        pending_.pop_front();
        ++status_.dropped;
    }
    status_.pending = pending_.size();
    return false;
}

std::optional<std::string> EventStore::state(const std::string& key) {
    if (auto it = pending_state_.find(key); it != pending_state_.end()) return it->second;
    if (!db_) return std::nullopt;
    Statement q(db_, "SELECT value FROM agent_state WHERE key = ?");
    if (!q.ok()) return std::nullopt;
    q.bind(1, key);
    if (q.step() != SQLITE_ROW) return std::nullopt;
    return q.text(0);
}

std::vector<AgentEvent> EventStore::query(int64_t since_ms, int64_t after_id, size_t limit) {
    std::vector<AgentEvent> out;
    visit(since_ms, after_id, limit, [&](const AgentEvent& stored, std::optional<std::string_view> evidence_json) {
        AgentEvent& e = out.emplace_back(stored);
        e.evidence = nlohmann::json::parse(evidence_json.value_or("[]"), nullptr, false);
        if (e.evidence.is_discarded()) e.evidence = nlohmann::json::array();
    });
    return out;
}

size_t EventStore::visit(int64_t since_ms, int64_t after_id, size_t limit, const EventVisitor& visit) {
    if (!db_) return 0;
    // Evidence that is not JSON (a damaged row) is none, checked by SQLite's own JSON parser as the row is read:
    // an answer written from these rows as text must stay one that every client can parse.
    Statement q(db_,
                "SELECT id, time_ms, kind, finding, layer, severity, gpu_uuid, gpu_pci, message,"
                " CASE WHEN json_valid(evidence) THEN evidence ELSE '[]' END FROM events"
                " WHERE time_ms >= ? AND id > ? ORDER BY id LIMIT ?");
    if (!q.ok()) return 0;
    q.bind(1, since_ms);
    q.bind(2, after_id);
    q.bind(3, static_cast<int64_t>(limit));
    size_t visited = 0;
    AgentEvent e;
    e.evidence = nullptr;
    while (q.step() == SQLITE_ROW) {
        e.id = q.integer(0);
        e.time_ms = q.integer(1);
        std::string kind = q.text(2);
        e.finding = q.text(3);
        e.layer = q.text(4);
        e.severity = q.text(5);
        e.gpu_uuid = q.text(6);
        e.gpu_pci = q.text(7);
        e.message = q.text(8);
        e.kind = read_event_kind(kind, e.message);
        visit(e, q.view(9));
        ++visited;
    }
    return visited;
}

Result<size_t> EventStore::visit_open_findings(const std::function<void(std::string_view entry)>& visit) {
    if (!db_) return size_t{0};
    if (pragma_integer(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'open_findings'") == 0)
        return size_t{0};
    auto error = [&] { return fail(fmt::format("{}: open findings: {}", o_.path, sqlite3_errmsg(db_)), o_.path); };
    Statement q(db_, "SELECT entry FROM open_findings ORDER BY key");
    if (!q.ok()) return error();
    size_t visited = 0;
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) {
        visit(q.view(0));
        ++visited;
    }
    if (rc != SQLITE_DONE) return error();
    return visited;
}

std::vector<AgentEvent> EventStore::pending(int64_t since_ms) const {
    std::vector<AgentEvent> out;
    for (const auto& e : pending_)
        if (e.time_ms >= since_ms) out.push_back(e);
    return out;
}

int64_t EventStore::bytes_in_use() {
    return (pragma_integer(db_, "PRAGMA page_count") - pragma_integer(db_, "PRAGMA freelist_count")) *
           pragma_integer(db_, "PRAGMA page_size");
}

void EventStore::prune(int64_t now) {
    if (!db_) return;
    {
        Statement old(db_, "DELETE FROM events WHERE time_ms < ?");
        if (old.ok()) {
            old.bind(1, now - o_.max_age_ms);
            old.step();
        }
    }
    // Freed pages are reused by later inserts, so the file stops growing once the pages in use are bounded.
    while (bytes_in_use() > o_.max_bytes) {
        int64_t count = pragma_integer(db_, "SELECT count(*) FROM events");
        if (count == 0) break;
        Statement oldest(db_, "DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT ?)");
        if (!oldest.ok()) break;
        oldest.bind(1, std::max<int64_t>(1, count / 10));
        if (oldest.step() != SQLITE_DONE) break;
    }
    status_.stored = static_cast<uint64_t>(pragma_integer(db_, "SELECT count(*) FROM events"));
}

EventStoreStatus EventStore::status() const { return status_; }

std::string EventStore::integrity_check() {
    if (!db_) return "no database";
    Statement s(db_, "PRAGMA integrity_check");
    return s.ok() && s.step() == SQLITE_ROW ? s.text(0) : std::string(sqlite3_errmsg(db_));
}

}  // namespace gpudx
