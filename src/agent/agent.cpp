#include "agent/agent.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/follow.hpp"
#include "agent/http.hpp"
#include "agent/notify.hpp"
#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/root.hpp"
#include "core/reap.hpp"
#include "core/spawn.hpp"
#include "core/text.hpp"
#include "render/formats.hpp"
#include "render/report.hpp"
#include "render/report_format.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/engine/diagnose.hpp"
#include "rules/reference/signatures.hpp"

namespace gpudx {

bool kernel_line_matters(std::string_view line, const std::vector<std::string>& words) {
    auto format = detect_line_format(line);
    std::string_view message = line;
    if (format != KernelLogFormat::unknown) {
        auto parsed = parse_log_line(line, format);
        if (parsed.continuation) return false;
        if (parsed.recognised) message = parsed.message;
    }
    if (!classify_topic(message).empty()) return true;
    std::string lower = to_lower(message);
    for (const auto& w : words)
        if (!w.empty() && lower.find(to_lower(w)) != std::string::npos) return true;
    return false;
}

namespace {

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
    return out;
}

constexpr size_t kKeptNotes = 20;
// Lines of earlier generations of a followed file kept for the diagnosis (the oldest go first, said as a note):
// only lines that matter are kept, and a node that logs 20,000 of them between rotations has bigger news.
constexpr long kKeptEarlierLines = 20000;
constexpr size_t kDefaultEventLimit = 1000;
constexpr size_t kMaxEventLimit = 100000;
constexpr size_t kEventPage = 500;

// What the endpoints serve: one diagnosis, rendered once when it is made.
struct Published {
    Snapshot snapshot;
    Diagnosis diagnosis;
    std::string prom;
    int64_t time_ms = 0;
    std::string trigger;  // start, interval, kernel_log
    double duration_ms = 0;
};

// What a full collection in the child gave.
struct Collected {
    std::optional<Snapshot> snapshot;
    std::string problem;  // why there is none
    bool stopping = false;  // a signal came while it ran
};

class Agent {
public:
    Agent(const AgentOptions& o, int signal_fd) : o_(o), signal_fd_(signal_fd), root_(o.root) {}
    int run();

private:
    // Setup, in the main thread.
    int open_listeners();
    void open_store();
    void start_follower();
    void stop_all();

    // The main loop's work.
    Collected collect_full();
    void diagnose_and_publish(Snapshot s, const std::string& trigger, double started_ms);
    void rediagnose_kernel_log();
    // Reads the kernel-log layer into `s` here, a followed file's earlier generations included.
    void read_kernel_log(Snapshot& s);
    bool has_earlier_lines();
    // Under inbox_mutex_. What a re-read of the log takes from what the agent kept: a followed file's earlier
    // generations; for /dev/kmsg, every record kept (the collector takes those the ring has lost).
    const std::vector<std::string>& lines_for_reread() const {
        return following_file_ ? earlier_lines_ : generation_lines_;
    }
    // Under inbox_mutex_. The oldest go past the bound: they are still in the file until it is rotated.
    void keep_generation_line(std::string_view line) {
        generation_lines_.emplace_back(line);
        if (static_cast<long>(generation_lines_.size()) > 2 * kKeptEarlierLines)
            generation_lines_.erase(generation_lines_.begin(), generation_lines_.begin() + kKeptEarlierLines);
    }
    void take_inbox();
    // Reads the NVML watcher; returns whether its news calls for a new diagnosis.
    bool take_nvml_events();
    // Stores the events, and the state given (key -> value) in the same commit (agent/store.hpp).
    void record(std::vector<AgentEvent> events, const std::map<std::string, std::string>& state = {});
    // What the store remembers of an earlier run: the open findings, the layers judged at gpudx's drain, a
    // drain that was started and not recorded.
    void restore_state();
    // Drains or resumes the Slurm node as the diagnosis says, recording the intent before scontrol runs and
    // the outcome after.
    void drain_or_resume(const Diagnosis& d, const std::map<Layer, std::string>& unread);
    // Records what the previous run's unrecorded drain or resume did, from the node's state; false when that
    // state could not be read (the decision waits).
    bool resolve_interrupted_drain();
    // The drain, resume or failure to record for scontrol's answer, if any.
    std::optional<AgentEvent> slurm_event(const Diagnosis& d, const std::string& reason,
                                          const Result<SlurmDrainResult>& r);
    void note(std::string message);

    // The endpoints, from the servers' threads.
    HttpResponse handle(const HttpRequest& r);
    HttpResponse status_response(const HttpRequest& r);
    HttpResponse events_response(const HttpRequest& r);
    std::string agent_metrics();
    nlohmann::json agent_json();
    std::shared_ptr<const Published> published() const;

    const AgentOptions& o_;
    int signal_fd_;
    Root root_;
    int64_t started_ms_ = now_ms();
    SystemdNotifier systemd_;

    std::vector<std::unique_ptr<HttpServer>> servers_;
    std::vector<std::string> serving_;

    mutable std::mutex published_mutex_;
    std::shared_ptr<const Published> published_;

    std::mutex store_mutex_;
    std::unique_ptr<EventStore> store_;
    std::string store_problem_;  // when there is no store at all
    std::deque<AgentEvent> memory_events_;  // the events, when there is no store

    // The follower thread and what it hands over.
    std::thread follower_;
    int follower_stop_ = -1;  // eventfd: the follower stops when it is readable
    int wake_ = -1;           // eventfd: the main loop has lines or notes to take
    std::string follow_source_;
    std::mutex inbox_mutex_;
    uint64_t inbox_matched_ = 0;
    std::vector<std::string> inbox_notes_;
    // The followed log's lines that matter (under inbox_mutex_): a file's, those of the generation under the name
    // now and those of earlier generations (rotated, truncated or rewritten away), judged before the file at each
    // read; /dev/kmsg's, every record since start (generation_lines_), judged where the ring lost them.
    std::vector<std::string> generation_lines_, earlier_lines_;
    bool following_file_ = false;  // set before the follower starts
    // A followed file's earlier generations are saved in the store (a restart would lose them otherwise): what
    // the previous run saved, and how many lines the last save held (main thread).
    nlohmann::json restored_earlier_lines_;
    size_t saved_earlier_lines_ = 0;
    uint64_t earlier_lines_dropped_ = 0;
    std::atomic<uint64_t> lines_read_{0}, lines_matched_{0}, kmsg_lost_{0};

    mutable std::mutex notes_mutex_;
    std::deque<std::pair<int64_t, std::string>> notes_;

    std::mutex counters_mutex_;
    std::map<std::string, uint64_t> events_by_kind_;
    std::map<std::string, uint64_t> diagnoses_by_trigger_;

    // Slurm: the last outcome, so a failure is said once while it lasts and retried (under counters_mutex_:
    // /v1/status reads it).
    bool drain_failing_ = false;
    std::string drain_state_;
    void set_drain_state(bool failing, std::string state) {
        std::lock_guard lock(counters_mutex_);
        drain_failing_ = failing;
        drain_state_ = std::move(state);
    }
    bool collect_failing_ = false;

    // Main thread only. The warning and error findings recorded as open; what was last read of a layer that
    // could not be read since stays in it (fail closed).
    FindingLedger ledger_;
    // The layers gpudx's drain of the node rested on (read when it drained): the node is resumed only by a
    // diagnosis that read every one of them again.
    std::set<Layer> drain_layers_;
    // The drain or resume the previous run started and did not record (it stopped between scontrol and the
    // commit): resolved from the node's state at the first decision.
    std::optional<nlohmann::json> interrupted_drain_;
    std::string resume_held_;  // why a resume is held back, said once while it lasts

    // NVML events (main thread only, but for the counter): the recent ones go into every snapshot judged.
    NvmlEventWatcher nvml_watch_{o_.nvml_events};
    std::deque<NvmlEvent> nvml_recent_;
    std::atomic<uint64_t> nvml_events_{0};
};

// NVML events kept for the diagnosis (the oldest go first): enough for any repeat threshold of the Xid policy.
constexpr size_t kKeptNvmlEvents = 256;

std::shared_ptr<const Published> Agent::published() const {
    std::lock_guard lock(published_mutex_);
    return published_;
}

void Agent::note(std::string message) {
    std::fprintf(stderr, "gpudx agent: %s\n", message.c_str());
    {
        std::lock_guard lock(notes_mutex_);
        notes_.emplace_back(now_ms(), message);
        while (notes_.size() > kKeptNotes) notes_.pop_front();
    }
    record({agent_note(std::move(message), now_ms())});
}

int Agent::open_listeners() {
    HttpHandler handler = [this](const HttpRequest& r) { return handle(r); };
    if (o_.listen) {
        auto address = parse_listen_address(*o_.listen);
        if (!address) {
            std::fprintf(stderr, "gpudx agent: %s\n", address.error().message.c_str());
            return kExitAgentCannotStart;
        }
        auto server = HttpServer::listen_tcp(*address, handler);
        if (!server) {
            std::fprintf(stderr, "gpudx agent: %s\n", server.error().message.c_str());
            return kExitAgentCannotStart;
        }
        servers_.push_back(std::move(*server));
    }
    if (!o_.socket_path.empty()) {
        auto server = HttpServer::listen_unix(o_.socket_path, handler);
        if (!server) {
            std::fprintf(stderr, "gpudx agent: %s\n", server.error().message.c_str());
            return kExitAgentCannotStart;
        }
        servers_.push_back(std::move(*server));
    }
    for (auto& s : servers_) serving_.push_back(s->where());
    return 0;
}

void Agent::open_store() {
    EventStoreOptions so = o_.store;
    if (so.path.empty()) so.path = (std::filesystem::path(o_.state_dir) / "events.db").string();
    auto store = EventStore::open(so);
    std::lock_guard lock(store_mutex_);
    if (!store) {
        store_problem_ = store.error().message + " (events are kept in memory only)";
        return;
    }
    store_ = std::move(*store);
    if (auto st = store_->status(); !st.moved_aside.empty()) std::fprintf(stderr, "gpudx agent: %s\n", st.problem.c_str());
}

// State keys in the event store (agent/store.hpp): what must survive a restart beside the events.
constexpr const char* kStateOpenFindings = "open_findings";
constexpr const char* kStateDrainLayers = "drain_layers";
constexpr const char* kStateDrainIntent = "drain_intent";
constexpr const char* kStateEarlierLines = "kernel_log_earlier_lines";

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

void Agent::restore_state() {
    std::lock_guard lock(store_mutex_);
    if (!store_) return;
    auto parsed = [&](const char* key) {
        auto text = store_->state(key);
        return text && !text->empty() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    };
    ledger_ = FindingLedger::from_json(parsed(kStateOpenFindings));
    drain_layers_ = layers_from_json(parsed(kStateDrainLayers));
    if (auto intent = parsed(kStateDrainIntent); intent.is_object()) interrupted_drain_ = intent;
    restored_earlier_lines_ = parsed(kStateEarlierLines);
}

void Agent::start_follower() {
    follower_stop_ = ::eventfd(0, EFD_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    bool file = o_.collect.kernel_log_file.has_value();
    if (file) {
        follow_source_ = *o_.collect.kernel_log_file;
    } else if (!root_.is_live() && root_.exists("/_commands/dmesg.txt")) {
        // A capture: its saved log is what the diagnosis reads, so it is what is followed.
        auto p = root_.host_path("/_commands/dmesg.txt");
        follow_source_ = p ? p->string() : std::string();
        file = true;
    } else {
        auto p = root_.host_path("/dev/kmsg");
        follow_source_ = p ? p->string() : std::string("/dev/kmsg");
    }
    following_file_ = file;
    // The earlier generations the previous run kept, if it followed the same file: rotated away before this
    // start, they are in no file this run reads.
    if (file && restored_earlier_lines_.is_object() && restored_earlier_lines_.value("source", "") == follow_source_)
        if (auto lines = restored_earlier_lines_.find("lines"); lines != restored_earlier_lines_.end() && lines->is_array())
            for (const auto& l : *lines)
                if (l.is_string()) earlier_lines_.push_back(l.get<std::string>());
    saved_earlier_lines_ = earlier_lines_.size();
    restored_earlier_lines_ = nullptr;
    follower_ = std::thread([this, file] {
        FollowSink sink;
        sink.line = [this](std::string_view line) {
            lines_read_.fetch_add(1, std::memory_order_relaxed);
            if (!kernel_line_matters(line, o_.kernel_log_words)) return;
            lines_matched_.fetch_add(1, std::memory_order_relaxed);
            {
                std::lock_guard lock(inbox_mutex_);
                ++inbox_matched_;
                keep_generation_line(line);
            }
            uint64_t one = 1;
            (void)!::write(wake_, &one, sizeof one);
        };
        sink.note = [this](std::string message) {
            {
                std::lock_guard lock(inbox_mutex_);
                inbox_notes_.push_back(std::move(message));
            }
            uint64_t one = 1;
            (void)!::write(wake_, &one, sizeof one);
        };
        sink.lost = [this](uint64_t n) { kmsg_lost_.fetch_add(n, std::memory_order_relaxed); };
        // The lines that matter of each generation of a followed file (or of the kmsg ring), so one rotated,
        // truncated or overwritten away is still judged (read_kernel_log): the source no longer holds them.
        sink.initial_line = [this](std::string_view line) {
            if (!kernel_line_matters(line, o_.kernel_log_words)) return;
            std::lock_guard lock(inbox_mutex_);
            keep_generation_line(line);
        };
        sink.generation_ended = [this] {
            {
                std::lock_guard lock(inbox_mutex_);
                for (auto& l : generation_lines_) earlier_lines_.push_back(std::move(l));
                generation_lines_.clear();
                if (auto n = static_cast<long>(earlier_lines_.size()); n > kKeptEarlierLines) {
                    earlier_lines_dropped_ += static_cast<uint64_t>(n - kKeptEarlierLines);
                    earlier_lines_.erase(earlier_lines_.begin(), earlier_lines_.begin() + (n - kKeptEarlierLines));
                }
                ++inbox_matched_;  // the file now under the name no longer holds them: judge again
            }
            uint64_t one = 1;
            (void)!::write(wake_, &one, sizeof one);
        };
        if (file) follow_file(follow_source_, follower_stop_, sink);
        else follow_kmsg(follow_source_, follower_stop_, sink);
    });
}

void Agent::stop_all() {
    if (follower_.joinable()) {
        uint64_t one = 1;
        (void)!::write(follower_stop_, &one, sizeof one);
        follower_.join();
    }
    for (auto& s : servers_) s->stop();
    servers_.clear();
    if (follower_stop_ >= 0) ::close(follower_stop_);
    if (wake_ >= 0) ::close(wake_);
}

// The child's stdout, read until it ends, the deadline passes or a signal comes (then the child is killed).
Collected Agent::collect_full() {
    Collected out;
    if (o_.snapshot_command.empty()) {
        out.problem = "no snapshot command";
        return out;
    }
    // The agent blocks SIGTERM and ignores SIGPIPE; SpawnedProgram starts the child as any program starts.
    auto child = SpawnedProgram::start(o_.snapshot_command);
    if (!child) {
        out.problem = fmt::format("cannot run {}: {}", o_.snapshot_command[0], child.error().message);
        return out;
    }
    std::string text;
    auto deadline = std::chrono::steady_clock::now() + o_.snapshot_timeout;
    bool killed = false;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            out.problem = fmt::format("the collection did not finish within {} s (killed)", o_.snapshot_timeout.count() / 1000);
            killed = true;
            break;
        }
        pollfd p[2] = {{child->fd(), POLLIN, 0}, {signal_fd_, POLLIN, 0}};
        int n = ::poll(p, 2, static_cast<int>(left.count()));
        if (n < 0 && errno == EINTR) continue;
        if (p[1].revents & POLLIN) {
            out.stopping = true;
            killed = true;
            break;
        }
        if (n <= 0) continue;
        auto got = child->read_available(text);
        if (got == SpawnedProgram::Read::closed || got == SpawnedProgram::Read::failed) break;
    }
    if (killed) return out;  // the destructor kills the child's process group and reaps it
    auto status = child->wait(kKilledChildGrace);
    if (!status) {
        out.problem = "the collection closed its output but did not exit (killed)";
        return out;
    }
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
        out.problem = "the collection " + describe_exit_status(*status);
        return out;
    }
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) {
        out.problem = "the collection printed no JSON snapshot";
        return out;
    }
    auto s = snapshot_from_json(j);
    if (!s) {
        out.problem = "the collection's snapshot: " + s.error().message;
        return out;
    }
    out.snapshot = std::move(*s);
    return out;
}

void Agent::record(std::vector<AgentEvent> events, const std::map<std::string, std::string>& state) {
    if (events.empty() && state.empty()) return;
    {
        std::lock_guard lock(counters_mutex_);
        for (const auto& e : events) ++events_by_kind_[e.kind];
    }
    std::lock_guard lock(store_mutex_);
    if (store_) {
        bool was_writable = store_->status().writable;
        store_->append(events, state);
        if (!events.empty()) store_->prune(now_ms());
        auto st = store_->status();
        if (was_writable && !st.writable) std::fprintf(stderr, "gpudx agent: %s\n", st.problem.c_str());
        return;
    }
    for (auto& e : events) memory_events_.push_back(std::move(e));
    while (memory_events_.size() > o_.store.max_pending) memory_events_.pop_front();
}

void Agent::diagnose_and_publish(Snapshot s, const std::string& trigger, double started_ms) {
    s.nvml_events.assign(nvml_recent_.begin(), nvml_recent_.end());
    auto p = std::make_shared<Published>();
    p->diagnosis = diagnose(s, o_.diagnose);
    // Fail closed: a layer that could not be read keeps the findings last read in it, judged again beside
    // what was read, so neither the verdict nor the node turns healthy because a read failed.
    std::map<Layer, std::string> unread;
    for (const auto& l : p->diagnosis.layers)
        if (l.state == LayerState::not_evaluated) unread.emplace(l.layer, l.reason);
    if (auto carried = ledger_.carried(unread); !carried.empty()) {
        DiagnoseOptions with_carried = o_.diagnose;
        with_carried.extra_findings.insert(with_carried.extra_findings.end(), carried.begin(), carried.end());
        p->diagnosis = diagnose(s, with_carried);
    }
    p->snapshot = std::move(s);
    p->prom = render_prometheus(p->snapshot, p->diagnosis, {.node = make_node_record(p->snapshot)});
    p->time_ms = now_ms();
    p->trigger = trigger;
    p->duration_ms = static_cast<double>(now_ms()) - started_ms;
    auto before = published();
    auto events = ledger_.advance(p->diagnosis.findings, unread, p->time_ms);
    {
        std::lock_guard lock(published_mutex_);
        published_ = p;
    }
    {
        std::lock_guard lock(counters_mutex_);
        ++diagnoses_by_trigger_[trigger];
    }
    // What the scheduler should do changes with any event, and with the verdict alone (an unreadable layer).
    bool changed = !events.empty() || !before || before->diagnosis.exit_code != p->diagnosis.exit_code;
    std::map<std::string, std::string> state;
    if (!events.empty() || !before) state[kStateOpenFindings] = json_text(ledger_.to_json());
    record(std::move(events), state);
    if (o_.drain && (changed || drain_failing_ || interrupted_drain_)) drain_or_resume(p->diagnosis, unread);
    // A diagnosis allocates and frees megabytes (the snapshot's JSON); give them back between runs.
    ::malloc_trim(0);
}

void Agent::read_kernel_log(Snapshot& s) {
    CollectOptions options = o_.collect;
    uint64_t dropped = 0;
    {
        std::lock_guard lock(inbox_mutex_);
        options.kernel_log_earlier_lines = lines_for_reread();
        std::swap(dropped, earlier_lines_dropped_);
    }
    if (dropped > 0)
        note(fmt::format("{} kernel-log lines of rotated-away generations of {} were dropped (more than {} kept)",
                         dropped, follow_source_, kKeptEarlierLines));
    // Saved when a generation ended since the last save (rare: a rotation), so a restart still judges them.
    if (following_file_ && (options.kernel_log_earlier_lines.size() != saved_earlier_lines_ || dropped > 0)) {
        nlohmann::json saved = {{"source", follow_source_}, {"lines", options.kernel_log_earlier_lines}};
        record({}, {{kStateEarlierLines, json_text(saved)}});
        saved_earlier_lines_ = options.kernel_log_earlier_lines.size();
    }
    CollectContext ctx{root_, options};
    KernelLog log;
    CollectorStatus st = collect_kernel_log(ctx, log);
    s.kernel_log = std::move(log);
    bool replaced = false;
    for (auto& c : s.collectors)
        if (c.name == st.name) c = st, replaced = true;
    if (!replaced) s.collectors.push_back(st);
}

bool Agent::has_earlier_lines() {
    std::lock_guard lock(inbox_mutex_);
    return !lines_for_reread().empty();
}

void Agent::rediagnose_kernel_log() {
    auto before = published();
    if (!before) return;
    double started = static_cast<double>(now_ms());
    Snapshot s = before->snapshot;
    read_kernel_log(s);
    diagnose_and_publish(std::move(s), "kernel_log", started);
}

void Agent::drain_or_resume(const Diagnosis& d, const std::map<Layer, std::string>& unread) {
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
            if (why != resume_held_) note(why);
            resume_held_ = why;
        } else {
            resume_held_.clear();
        }
    }
    // A drain the previous run made and did not record is recorded before a new intent takes its place.
    if (!resolve_interrupted_drain()) return;
    std::string reason = slurm_reason(d);
    // The intent is on disk before scontrol runs: a kill -9 between the two leaves it for the next start to
    // resolve against the node's state, instead of a drain with no record.
    nlohmann::json intent = {{"time_ms", now_ms()}, {"exit_code", exit_code}, {"reason", reason},
                             {"layers", layers_json(read_now)}};
    record({}, {{kStateDrainIntent, json_text(intent)}});
    auto r = apply_slurm_drain(o_.slurm, exit_code, reason);
    std::map<std::string, std::string> state{{kStateDrainIntent, ""}};
    std::vector<AgentEvent> events;
    if (auto e = slurm_event(d, reason, r)) events.push_back(std::move(*e));
    if (r && r->action == SlurmAction::drain) {
        drain_layers_ = read_now;
        state[kStateDrainLayers] = json_text(layers_json(drain_layers_));
    } else if (r && r->action == SlurmAction::resume) {
        drain_layers_.clear();
        state[kStateDrainLayers] = "";
    }
    record(std::move(events), state);
}

bool Agent::resolve_interrupted_drain() {
    if (!interrupted_drain_) return true;
    auto node = read_slurm_node(o_.slurm);
    if (!node) {
        // Asked again at the next decision; until then no new intent replaces this one.
        if (auto e = slurm_event({}, {}, std::unexpected(node.error()))) record({std::move(*e)});
        return false;
    }
    int was = interrupted_drain_->value("exit_code", int{kExitUnknown});
    bool ours = node->drain && is_gpudx_reason(node->reason);
    std::map<std::string, std::string> state{{kStateDrainIntent, ""}};
    std::vector<AgentEvent> events;
    AgentEvent e;
    e.time_ms = now_ms();
    if (ours && was == kExitErrors && node->reason == interrupted_drain_->value("reason", std::string())) {
        e.kind = "drained";
        e.message = fmt::format("Slurm node {} was drained by gpudx ({}) just before the agent stopped; recorded "
                                "after its restart",
                                o_.slurm.node, node->reason);
        events.push_back(std::move(e));
        drain_layers_ = layers_from_json(interrupted_drain_->value("layers", nlohmann::json::array()));
        state[kStateDrainLayers] = json_text(layers_json(drain_layers_));
    } else if (!node->drain && (was == kExitHealthy || was == kExitWarnings) && !drain_layers_.empty()) {
        e.kind = "resumed";
        e.message = fmt::format("Slurm node {} ({}) was resumed by gpudx just before the agent stopped; recorded "
                                "after its restart",
                                o_.slurm.node, node->state);
        events.push_back(std::move(e));
        drain_layers_.clear();
        state[kStateDrainLayers] = "";
    }
    for (const auto& ev : events) std::fprintf(stderr, "gpudx agent: %s\n", ev.message.c_str());
    record(std::move(events), state);
    interrupted_drain_.reset();
    return true;
}

std::optional<AgentEvent> Agent::slurm_event(const Diagnosis& d, const std::string& reason,
                                             const Result<SlurmDrainResult>& r) {
    AgentEvent e;
    e.time_ms = now_ms();
    if (!r) {
        std::string message = "--drain: " + r.error().message;
        bool news = !drain_failing_ || message != drain_state_;
        set_drain_state(true, message);
        if (!news) return std::nullopt;
        e.kind = "drain_failed";
        e.message = message;
        std::fprintf(stderr, "gpudx agent: %s\n", message.c_str());
        return e;
    }
    set_drain_state(false, r->message);
    if (r->action != SlurmAction::drain && r->action != SlurmAction::resume) return std::nullopt;
    e.kind = r->action == SlurmAction::drain ? "drained" : "resumed";
    e.message = r->message;
    // A drain names the finding its reason names (the first error); a resume, the one the node's reason named.
    const Finding* cause = nullptr;
    if (r->action == SlurmAction::drain) {
        for (const auto& f : d.findings)
            if (f.severity == Severity::error) {
                cause = &f;
                break;
            }
    } else if (auto words = split_ws(r->before.reason); words.size() >= 2) {
        e.finding = std::string(words[1]);
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
    if (!reason.empty() && r->action == SlurmAction::drain) e.evidence.push_back({{"source", "Slurm reason"}, {"value", reason}});
    std::fprintf(stderr, "gpudx agent: %s\n", r->message.c_str());
    return e;
}

void Agent::take_inbox() {
    uint64_t count = 0;
    (void)!::read(wake_, &count, sizeof count);
    uint64_t matched = 0;
    std::vector<std::string> notes;
    {
        std::lock_guard lock(inbox_mutex_);
        std::swap(matched, inbox_matched_);
        std::swap(notes, inbox_notes_);
    }
    for (auto& n : notes) note(std::move(n));
    // However many lines arrived since the last look, one re-read of the kernel log judges them all.
    if (matched > 0) rediagnose_kernel_log();
}

bool Agent::take_nvml_events() {
    auto out = nvml_watch_.check(std::chrono::steady_clock::now());
    for (auto& n : out.notes) note(std::move(n));
    if (out.events.empty()) return out.restarted_or_lost;
    std::vector<AgentEvent> recorded;
    int64_t t = now_ms();
    for (auto& e : out.events) {
        recorded.push_back(nvml_agent_event(e, t));
        nvml_recent_.push_back(std::move(e));
        if (nvml_recent_.size() > kKeptNvmlEvents) nvml_recent_.pop_front();
    }
    nvml_events_.fetch_add(out.events.size(), std::memory_order_relaxed);
    record(std::move(recorded));
    return true;
}

int Agent::run() {
    if (int rc = open_listeners(); rc != 0) return rc;
    open_store();
    restore_state();
    {
        std::lock_guard lock(store_mutex_);
        if (!store_problem_.empty()) std::fprintf(stderr, "gpudx agent: %s\n", store_problem_.c_str());
    }
    // Followed (and NVML's events watched) before the first diagnosis, so nothing that happens while it runs is
    // missed.
    start_follower();
    take_nvml_events();
    record({agent_note(fmt::format("gpudx agent {} started; following {}; serving {}", GPUDX_VERSION, follow_source_,
                                   serving_.empty() ? std::string("nothing") : join(serving_, ", ")),
                       now_ms())});
    auto full = [&](const char* trigger) {
        double started = static_cast<double>(now_ms());
        Collected c = collect_full();
        if (c.stopping) return false;
        if (!c.snapshot) {
            if (!collect_failing_) note("collecting the node failed: " + c.problem + "; the kernel-log layer goes on");
            collect_failing_ = true;
            auto before = published();
            if (before) return true;
            // Nothing to serve yet: the host layers in this process (no driver: no child to fork here).
            CollectOptions host_only = o_.collect;
            host_only.probe_driver = false;
            host_only.driver_not_probed_reason = "the agent's collection failed: " + c.problem;
            c.snapshot = take_snapshot(root_, host_only);
        } else {
            collect_failing_ = false;
            // The child read the followed file as it is now: the lines rotated away since are read here too.
            if (has_earlier_lines()) read_kernel_log(*c.snapshot);
        }
        diagnose_and_publish(std::move(*c.snapshot), trigger, started);
        return true;
    };
    for (auto& s : servers_) s->start();
    if (!full("start")) {
        stop_all();
        return 0;
    }
    systemd_.notify(fmt::format("READY=1\nSTATUS=serving {}", join(serving_, ", ")));
    using clock = std::chrono::steady_clock;
    auto next_full = clock::now() + o_.interval;
    auto watchdog = systemd_.watchdog_interval();
    auto next_ping = clock::now() + watchdog.value_or(std::chrono::hours(24));
    // A diagnosis that NVML events call for: at the next full one, or sooner, but never within
    // nvml_rediagnose_gap of the last one they called for.
    bool nvml_called = false;  // the next full diagnosis is one NVML events called for
    auto last_nvml_full = clock::now() - o_.nvml_rediagnose_gap;
    for (;;) {
        auto now = clock::now();
        auto wake_at = std::min(next_full, watchdog ? next_ping : next_full);
        if (auto nvml_due = nvml_watch_.next_check()) wake_at = std::min(wake_at, *nvml_due);
        int timeout = static_cast<int>(
            std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count()));
        pollfd p[3] = {{signal_fd_, POLLIN, 0}, {wake_, POLLIN, 0}, {nvml_watch_.fd(), POLLIN, 0}};
        int n = ::poll(p, p[2].fd >= 0 ? 3 : 2, timeout);
        if (n < 0 && errno != EINTR) break;
        if (p[0].revents & POLLIN) break;
        if (p[1].revents & POLLIN) take_inbox();
        if (take_nvml_events()) {
            next_full = std::min(next_full, std::max(clock::now(), last_nvml_full + o_.nvml_rediagnose_gap));
            nvml_called = true;
        }
        now = clock::now();
        if (now >= next_full) {
            if (nvml_called) last_nvml_full = now;
            if (!full(nvml_called ? "nvml_event" : "interval")) break;
            next_full = clock::now() + o_.interval;
            nvml_called = false;
        }
        if (watchdog && clock::now() >= next_ping) {
            systemd_.notify("WATCHDOG=1");
            next_ping = clock::now() + *watchdog;
        }
    }
    systemd_.notify("STOPPING=1");
    stop_all();
    record({agent_note("gpudx agent stopped", now_ms())});
    return 0;
}

// ---- the endpoints

nlohmann::json Agent::agent_json() {
    nlohmann::json j;
    j["version"] = GPUDX_VERSION;
    j["started"] = format_event_time(started_ms_);
    j["uptime_s"] = static_cast<double>(now_ms() - started_ms_) / 1000.0;
    j["serving"] = serving_;
    j["nvml_events"] = {{"watching", nvml_watch_.enabled()}, {"received", nvml_events_.load()}};
    j["kernel_log"] = {{"source", follow_source_},
                       {"lines_read", lines_read_.load()},
                       {"lines_matched", lines_matched_.load()},
                       {"kmsg_records_lost", kmsg_lost_.load()}};
    if (auto p = published())
        j["last_diagnosis"] = {{"time", format_event_time(p->time_ms)},
                               {"trigger", p->trigger},
                               {"duration_ms", p->duration_ms}};
    {
        std::lock_guard lock(store_mutex_);
        nlohmann::json s;
        if (store_) {
            auto st = store_->status();
            s = {{"writable", st.writable},     {"stored", st.stored},   {"pending", st.pending},
                 {"dropped", st.dropped},       {"problem", st.problem}, {"moved_aside", st.moved_aside},
                 {"write_failures", st.write_failures}};
        } else {
            s = {{"writable", false}, {"stored", 0}, {"pending", memory_events_.size()}, {"problem", store_problem_}};
        }
        j["store"] = s;
    }
    if (o_.drain) {
        std::lock_guard lock(counters_mutex_);
        j["drain"] = {{"node", o_.slurm.node}, {"last", drain_state_}, {"failing", drain_failing_}};
    }
    nlohmann::json notes = nlohmann::json::array();
    {
        std::lock_guard lock(notes_mutex_);
        for (const auto& [t, m] : notes_) notes.push_back({{"time", format_event_time(t)}, {"message", m}});
    }
    j["notes"] = notes;
    return j;
}

std::string Agent::agent_metrics() {
    std::string out;
    auto family = [&](const char* name, const char* type, const char* help) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    };
    {
        std::lock_guard lock(counters_mutex_);
        family("gpudx_agent_events_total", "counter", "Events the agent recorded since it started, by kind.");
        for (const char* kind : {"appeared", "changed", "cleared", "drained", "resumed", "drain_failed", "nvml", "agent"})
            out += fmt::format("gpudx_agent_events_total{{kind=\"{}\"}} {}\n", kind,
                               events_by_kind_.contains(kind) ? events_by_kind_.at(kind) : 0);
        family("gpudx_agent_diagnoses_total", "counter", "Diagnoses the agent made since it started, by trigger.");
        for (const char* trigger : {"start", "interval", "kernel_log", "nvml_event"})
            out += fmt::format("gpudx_agent_diagnoses_total{{trigger=\"{}\"}} {}\n", trigger,
                               diagnoses_by_trigger_.contains(trigger) ? diagnoses_by_trigger_.at(trigger) : 0);
    }
    family("gpudx_agent_kernel_log_lines_total", "counter", "Lines read from the followed kernel log.");
    out += fmt::format("gpudx_agent_kernel_log_lines_total {}\n", lines_read_.load());
    family("gpudx_agent_kernel_log_lines_matched_total", "counter",
           "Followed kernel-log lines that a topic or the signature catalogue recognised.");
    out += fmt::format("gpudx_agent_kernel_log_lines_matched_total {}\n", lines_matched_.load());
    family("gpudx_agent_kmsg_records_lost_total", "counter",
           "Kernel log records overwritten in the ring buffer before the agent read them.");
    out += fmt::format("gpudx_agent_kmsg_records_lost_total {}\n", kmsg_lost_.load());
    bool writable = false;
    uint64_t pending = 0;
    {
        std::lock_guard lock(store_mutex_);
        if (store_) {
            auto st = store_->status();
            writable = st.writable;
            pending = st.pending;
        } else {
            pending = memory_events_.size();
        }
    }
    family("gpudx_agent_store_writable", "gauge", "Whether the last write to the event store succeeded (1) or not (0).");
    out += fmt::format("gpudx_agent_store_writable {}\n", writable ? 1 : 0);
    family("gpudx_agent_store_pending_events", "gauge", "Events held in memory because the event store refused them.");
    out += fmt::format("gpudx_agent_store_pending_events {}\n", pending);
    if (auto p = published()) {
        family("gpudx_agent_last_diagnosis_timestamp_seconds", "gauge", "When the agent's current diagnosis was made.");
        out += fmt::format("gpudx_agent_last_diagnosis_timestamp_seconds {:.3f}\n", static_cast<double>(p->time_ms) / 1000.0);
    }
    return out;
}

HttpResponse Agent::status_response(const HttpRequest& r) {
    auto p = published();
    if (!p) return {503, "application/json", R"({"error":"the first diagnosis is still running"})" "\n", {}};
    std::string format = r.query.contains("format") ? r.query.at("format") : "json";
    if (!is_report_format(format))
        return {400, "application/json",
                json_text(nlohmann::json({{"error", "format must be one of text, json, prom, slurm, npd, nagios"}})) + "\n", {}};
    HttpResponse res;
    if (format == "json") {
        auto j = diagnosis_to_json(p->snapshot, p->diagnosis);
        j["agent"] = agent_json();
        res.body = json_text(j, 2) + "\n";
        res.headers.emplace_back("X-Gpudx-Exit-Code", std::to_string(p->diagnosis.exit_code));
        return res;
    }
    RenderOptions ro;
    ro.verbose = r.query.contains("verbose");
    auto report = render_report(p->snapshot, p->diagnosis, format, ro, {.node = make_node_record(p->snapshot)});
    res.content_type = "text/plain; charset=utf-8";
    res.body = std::move(report.text);
    res.headers.emplace_back("X-Gpudx-Exit-Code", std::to_string(report.exit_code));
    return res;
}

HttpResponse Agent::events_response(const HttpRequest& r) {
    auto bad = [](const std::string& why) {
        return HttpResponse{400, "application/json", json_text(nlohmann::json({{"error", why}})) + "\n", {}};
    };
    int64_t since = 0, after = 0;
    size_t limit = kDefaultEventLimit;
    if (auto it = r.query.find("since"); it != r.query.end()) {
        auto t = parse_event_time(it->second, now_ms());
        if (!t)
            return bad("since=" + it->second +
                       ": not Unix seconds, an ISO 8601 time or an age (15m, 2h, 7d), up to the year 9999");
        since = *t;
    }
    if (auto it = r.query.find("after"); it != r.query.end()) {
        auto v = parse_int(it->second);
        if (!v) return bad("after=" + it->second + ": not an event id");
        after = *v;
    }
    if (auto it = r.query.find("limit"); it != r.query.end()) {
        auto v = parse_uint(it->second);
        if (!v || *v == 0) return bad("limit=" + it->second + ": not a positive number");
        limit = std::min<size_t>(*v, kMaxEventLimit);
    }
    // Written event by event, a page of the store at a time: 10,000 events never sit in memory as one JSON
    // document, and the main loop's writes wait for one page at most. At most 4 MiB, whatever limit= asks: past
    // that the answer says where to go on ("next_after"), so what a client that does not read it pins stays
    // bounded (docs/agent.md).
    constexpr size_t kMaxEventsAnswerBytes = 4u << 20;
    EventsAnswer answer(kMaxEventsAnswerBytes);
    bool full = false;
    int64_t cursor = after;
    std::vector<AgentEvent> unstored;  // held in memory (no id): after the stored ones
    for (;;) {
        std::vector<AgentEvent> page;
        {
            std::lock_guard lock(store_mutex_);
            if (!store_) {
                for (const auto& e : memory_events_)
                    if (e.time_ms >= since && unstored.size() < limit) unstored.push_back(e);
                break;
            }
            page = store_->query(since, cursor, std::min(kEventPage, limit - answer.count()));
        }
        for (const auto& e : page) {
            if (!answer.add(e)) {
                full = true;
                break;
            }
            cursor = e.id;
        }
        if (full || page.size() < kEventPage || answer.count() >= limit) break;
    }
    if (!full) {
        std::lock_guard lock(store_mutex_);
        if (store_) unstored = store_->pending(since);
    }
    size_t left_out = 0;
    for (const auto& e : unstored) {
        if (answer.count() + left_out >= limit) break;
        if (left_out > 0 || !answer.add(e)) ++left_out;
    }
    HttpResponse res;
    res.body = std::move(answer).finish(full ? std::optional<int64_t>(cursor) : std::nullopt, left_out);
    return res;
}

HttpResponse Agent::handle(const HttpRequest& r) {
    if (r.path == "/metrics") {
        auto p = published();
        HttpResponse res;
        res.content_type = "text/plain; version=0.0.4; charset=utf-8";
        res.body = (p ? p->prom : std::string()) + agent_metrics();
        return res;
    }
    if (r.path == "/v1/status") return status_response(r);
    if (r.path == "/v1/events") {
        auto res = events_response(r);
        // A large answer's buffers go back to the system once sent (its copy in the response stays until then).
        if (res.body.size() > (1u << 20)) ::malloc_trim(0);
        return res;
    }
    nlohmann::json unknown = {{"error", "no such endpoint: " + r.path},
                              {"endpoints", {"/metrics", "/v1/status", "/v1/events"}}};
    return {404, "application/json", json_text(unknown) + "\n", {}};
}

}  // namespace

int run_agent(const AgentOptions& o) {
    // The signals that stop the agent are taken by the main loop alone, through a signalfd; every thread
    // started from here on inherits the mask. A client gone mid-answer must not kill the agent (SIGPIPE), nor a
    // file-size limit reached by the event store (SIGXFSZ: the write fails and is reported instead).
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    ::signal(SIGXFSZ, SIG_IGN);
    // Two malloc arenas, not one per thread: what an answer allocates in a server thread is reused by the next
    // instead of staying resident in an arena of its own.
    ::mallopt(M_ARENA_MAX, 2);
    int sfd = ::signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        std::fprintf(stderr, "gpudx agent: signalfd: %s\n", std::strerror(errno));
        return kExitAgentCannotStart;
    }
    std::error_code ec;
    std::filesystem::create_directories(o.state_dir, ec);
    if (ec) {
        std::fprintf(stderr, "gpudx agent: --state-dir %s: %s\n", o.state_dir.c_str(), ec.message().c_str());
        ::close(sfd);
        return kExitAgentCannotStart;
    }
    int rc = 0;
    {
        Agent agent(o, sfd);
        rc = agent.run();
    }
    ::close(sfd);
    return rc;
}

}  // namespace gpudx
