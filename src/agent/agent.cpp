// The agent's main loop: it owns the parts (agent/collection.hpp: what it reads of the node; agent/recorder.hpp:
// what it records; agent/drain.hpp: the Slurm drain; agent/endpoints.hpp: what it serves) and decides when to
// diagnose: at start, every --interval, on a line of the followed kernel log that matters, on NVML's events. Each
// diagnosis is judged against the findings held open (FindingLedger: what appeared, changed or cleared), published
// for the endpoints, and handed to the drain. Only the main thread decides; a diagnosis is made on the scratch thread
// while the main thread waits for it (ScratchThread), so the two never run at once. The follower thread and the
// servers' threads reach the parts through the locks each part documents.
#include "agent/agent.hpp"

#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "agent/collection.hpp"
#include "agent/drain.hpp"
#include "agent/endpoints.hpp"
#include "agent/http.hpp"
#include "agent/notify.hpp"
#include "agent/recorder.hpp"
#include "collect/collectors.hpp"
#include "core/root.hpp"
#include "core/text.hpp"
#include "render/formats.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/held_to.hpp"
#include "rules/engine/diagnose.hpp"

namespace gpudx {

namespace {

// NVML events kept for the diagnosis (the oldest go first): enough for any repeat threshold of the Xid policy.
constexpr size_t kKeptNvmlEvents = 256;
// A diagnosis allocates and frees megabytes (the child's snapshot JSON, the events it records, the previous
// publication); give them back once all of it is freed, so the agent's resident memory is what it holds.
void give_back_freed_memory() {
    ::malloc_trim(0);
}

// The thread the diagnoses run on, one at a time, while the main thread waits: their scratch. It allocates from an
// arena other than the main thread's: glibc attaches a thread to an arena at its first allocation, and this one's
// comes before the agent's other threads start, while the main arena is the only one, so it gets a new one. The
// megabytes a diagnosis allocates and frees (the child's snapshot JSON, the kernel log's lines and events, the
// findings as made) come and go there, not in the holes between what the agent holds for hours; what is published
// is copied into the main thread's arena (Agent::publish). Made in the main arena, a diagnosis of 10,000 findings
// left it perforated: 27.7 MB resident, 12 MB of it in use (docs/agent.md, "The API at size"). One thread for the
// agent's life: what it builds once per thread (the signature catalogue's candidate index) is built once. Constructed
// last of the agent's parts, before any of their threads starts.
class ScratchThread {
public:
    ScratchThread() : thread_([this] { serve(); }) {
        run_job([] {
            void* volatile first = std::malloc(64);  // volatile: the call is made, not optimised away
            std::free(first);
        });
    }
    ~ScratchThread() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    ScratchThread(const ScratchThread&) = delete;
    ScratchThread& operator=(const ScratchThread&) = delete;

    // Runs `work` there and returns what it returned (an exception it threw is thrown here).
    template <class F>
    auto run(F&& work) -> decltype(work()) {
        std::optional<decltype(work())> result;
        std::exception_ptr failed;
        run_job([&] {
            try {
                result.emplace(work());
            } catch (...) {
                failed = std::current_exception();
            }
        });
        if (failed) std::rethrow_exception(failed);
        return std::move(*result);
    }
    // Frees what the work made there too. Freed on the main thread, its small blocks would wait in that thread's
    // cache of freed blocks (glibc's tcache) and keep the pages of the scratch arena they belong to.
    template <class T>
    void free(T&& made) {
        run_job([&] { auto freed_here = std::move(made); });
    }

private:
    void run_job(std::function<void()> job) {
        std::unique_lock lock(mutex_);
        job_ = std::move(job);
        wake_.notify_all();
        wake_.wait(lock, [this] { return !job_; });
    }
    void serve() {
        std::unique_lock lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return stopping_ || job_; });
            if (!job_) return;
            job_();  // under the lock: the main thread waits for it anyway
            job_ = nullptr;
            wake_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::function<void()> job_;
    bool stopping_ = false;
    std::thread thread_;  // last: it starts once the rest is made
};

EventStoreOptions store_options(const AgentOptions& o) {
    EventStoreOptions so = o.store;
    if (so.path.empty()) so.path = (std::filesystem::path(o.state_dir) / "events.db").string();
    return so;
}

class Agent {
public:
    Agent(const AgentOptions& o, int signal_fd)
        : o_(o), signal_fd_(signal_fd), root_(o.root), recorder_(store_options(o)), followed_(o, root_, recorder_),
          drain_(o.slurm, recorder_), endpoints_(publication_, recorder_, [this] { return status(); }) {}
    int run();

private:
    int open_listeners();
    void stop_all();
    // A diagnosis as it was made, before it is published.
    struct Judged {
        Snapshot snapshot;  // its kernel log digested (digest_kernel_log)
        std::vector<XidCount> xid_counts;
        Diagnosis diagnosis;
        std::map<Layer, std::string> unread;  // layer -> why it could not be read
        std::string node_class;
    };
    // Collects the whole node in the child and diagnoses it; false when a signal came while it ran.
    bool diagnose_node(DiagnosisTrigger trigger);
    void rediagnose_kernel_log();
    // Diagnoses `s` (on scratch_).
    Judged judge(Snapshot s);
    // Judges it against the ledger, publishes it, records its events and hands it to the drain (main thread).
    void publish(Judged& j, DiagnosisTrigger trigger, double started_ms);
    // Reads the NVML watcher; returns whether its news calls for a new diagnosis.
    bool take_nvml_events();
    // What the agent knows of itself, from the servers' threads.
    AgentStatus status() const;

    const AgentOptions& o_;
    int signal_fd_;
    Root root_;
    int64_t started_ms_ = now_ms();
    SystemdNotifier systemd_;

    // Main thread only (or the scratch thread, while the main thread waits). The warning and error findings
    // recorded as open; what was last read of a layer that could not be read since stays in it (fail closed).
    // Declared before recorder_, so that it outlives a ledger writer the store still holds (EventStore::append).
    FindingLedger ledger_;
    Recorder recorder_;
    FollowedLog followed_;
    SlurmDrain drain_;
    Publication publication_;
    Endpoints endpoints_;
    std::vector<std::unique_ptr<HttpServer>> servers_;
    std::vector<std::string> serving_;  // set before the servers start

    bool collect_failing_ = false;
    // NVML events (main thread only, but for the counter): the recent ones go into every snapshot judged.
    NvmlEventWatcher nvml_watch_{o_.nvml_events};
    std::deque<NvmlEvent> nvml_recent_;
    NvmlEventCoalescer nvml_coalescer_;
    std::atomic<uint64_t> nvml_events_{0};
    ScratchThread scratch_;
};

int Agent::open_listeners() {
    HttpHandler handler = [this](const HttpRequest& r) { return endpoints_.handle(r); };
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

void Agent::stop_all() {
    followed_.stop();
    for (auto& s : servers_) s->stop();
    servers_.clear();
}

AgentStatus Agent::status() const {
    AgentStatus s;
    s.version = GPUDX_VERSION;
    s.started_ms = started_ms_;
    s.uptime_s = static_cast<double>(now_ms() - started_ms_) / 1000.0;
    s.serving = serving_;
    s.nvml_events = {.watching = nvml_watch_.enabled(), .received = nvml_events_.load()};
    followed_.describe(s);
    publication_.describe(s);
    recorder_.describe(s);
    if (o_.drain) s.drain = drain_.status();
    return s;
}

Agent::Judged Agent::judge(Snapshot s) {
    s.nvml_events.assign(nvml_recent_.begin(), nvml_recent_.end());
    Judged j;
    DiagnoseOptions options = o_.diagnose;
    auto held = hold_node_to(s, o_.baseline, o_.matrix);
    j.node_class = held.node_class;
    options.node_class = held.class_held_to;
    options.extra_findings.insert(options.extra_findings.end(), held.findings.begin(), held.findings.end());
    j.diagnosis = diagnose(s, options);
    // Fail closed: a layer that could not be read keeps the findings last read in it, judged again beside
    // what was read, so neither the verdict nor the node turns healthy because a read failed.
    for (const auto& l : j.diagnosis.layers)
        if (l.state == LayerState::not_evaluated) j.unread.emplace(l.layer, l.reason);
    if (auto carried = ledger_.carried(j.unread); !carried.empty()) {
        options.extra_findings.insert(options.extra_findings.end(), carried.begin(), carried.end());
        j.diagnosis = diagnose(s, options);
    }
    j.xid_counts = digest_kernel_log(s.kernel_log);
    j.snapshot = std::move(s);
    return j;
}

void Agent::publish(Judged& j, DiagnosisTrigger trigger, double started_ms) {
    // Copied into this thread's arena, packed (a storm's findings in a fraction of their memory): held until the
    // next diagnosis, by the ledger too.
    auto p = std::make_shared<Published>();
    p->snapshot = j.snapshot;
    p->xid_counts = j.xid_counts;
    p->hold(j.diagnosis);
    // Held packed from here on; the findings as made go now, so that a storm's findings as made and the events
    // they cause are never in memory at the same time (docs/agent.md, "The API at size"). Their pages, and the
    // kernel log's, go back before the events are made: freed, they stayed resident in the scratch arena under the
    // events made in the main one (10,000 findings: a peak of 54.7 MB, 47.4 MB with this).
    scratch_.free(std::move(j.diagnosis.findings));
    give_back_freed_memory();
    p->node_class = j.node_class;
    p->time_ms = now_ms();
    p->trigger = trigger;
    p->duration_ms = static_cast<double>(now_ms()) - started_ms;
    auto before = publication_.latest();
    // The ledger holds the open findings where the publication holds them.
    std::shared_ptr<const PackedFindings> findings(p, &p->findings());
    auto events = ledger_.advance(std::move(findings), j.unread, p->time_ms);
    publication_.publish(p);
    // What the scheduler should do changes with any event, and with the verdict alone (an unreadable layer).
    bool changed = !events.empty() || !before || before->exit_code() != p->exit_code();
    EventStore::OpenFindingsWriter open_findings;
    if (!events.empty() || !before)
        open_findings = [this](const EventStore::RowPut& put) { ledger_.save_entries(put); };
    recorder_.record(std::move(events), {}, std::move(open_findings));
    if (o_.drain && (changed || drain_.pending()))
        drain_.decide(p->diagnosis_head(SlurmDrain::kFindingsRead), j.unread);
}

void Agent::rediagnose_kernel_log() {
    auto before = publication_.latest();
    if (!before) return;
    double started = static_cast<double>(now_ms());
    Judged j = scratch_.run([&] {
        Snapshot s = before->snapshot;
        followed_.read_into(s);
        return judge(std::move(s));
    });
    publish(j, DiagnosisTrigger::kernel_log, started);
    scratch_.free(std::move(j));
}

bool Agent::diagnose_node(DiagnosisTrigger trigger) {
    double started = static_cast<double>(now_ms());
    bool stopping = false;
    auto judged = scratch_.run([&]() -> std::optional<Judged> {
        Collected c = collect_in_child(o_.snapshot_command, o_.snapshot_timeout, signal_fd_);
        if (c.stopping) {
            stopping = true;
            return std::nullopt;
        }
        if (!c.snapshot) {
            if (!collect_failing_)
                recorder_.note("collecting the node failed: " + c.problem + "; the kernel-log layer goes on");
            collect_failing_ = true;
            if (publication_.latest()) return std::nullopt;
            // Nothing to serve yet: the host layers in this process (no driver: no child to fork here).
            CollectOptions host_only = o_.collect;
            host_only.probe_driver = false;
            host_only.driver_not_probed_reason = "the agent's collection failed: " + c.problem;
            c.snapshot = take_snapshot(root_, host_only);
        } else {
            collect_failing_ = false;
            // The child read the followed file as it is now: the lines rotated away since are read here too.
            if (followed_.has_earlier_lines()) followed_.read_into(*c.snapshot);
        }
        return judge(std::move(*c.snapshot));
    });
    if (stopping) return false;
    if (judged) publish(*judged, trigger, started);
    scratch_.free(std::move(judged));
    return true;
}

bool Agent::take_nvml_events() {
    auto out = nvml_watch_.check(std::chrono::steady_clock::now());
    for (auto& n : out.notes) recorder_.note(std::move(n));
    // A storm is recorded as its first event and then counts (NvmlEventCoalescer), checked on every call so the
    // end of one is recorded too.
    int64_t t = now_ms();
    std::vector<AgentEvent> recorded = nvml_coalescer_.take(out.events, t);
    if (out.events.empty()) {
        if (!recorded.empty()) recorder_.record(std::move(recorded));
        return out.restarted_or_lost;
    }
    for (auto& e : out.events) {
        nvml_recent_.push_back(std::move(e));
        if (nvml_recent_.size() > kKeptNvmlEvents) nvml_recent_.pop_front();
    }
    nvml_events_.fetch_add(out.events.size(), std::memory_order_relaxed);
    recorder_.record(std::move(recorded));
    return true;
}

int Agent::run() {
    if (int rc = open_listeners(); rc != 0) return rc;
    recorder_.open();
    // What the store remembers of an earlier run: the open findings, the drain journal, a followed file's
    // earlier generations.
    FindingLedger::Restoring restoring;
    auto restored = recorder_.visit_open_findings(
        [&](std::string_view entry) { restoring.add(nlohmann::json::parse(entry, nullptr, false)); });
    if (!restored)
        recorder_.note("could not read the open findings the event store holds (" + restored.error().message +
                       "): a finding still present is recorded as appeared again");
    // None in the table: a store written by a gpudx before the open findings had one keeps them as one array.
    ledger_ = restored && *restored == 0
                  ? FindingLedger::from_json(recorder_.saved_state(EventStore::kLegacyOpenFindingsKey))
                  : std::move(restoring).finish();
    drain_.restore();
    auto earlier_lines = recorder_.saved_state(FollowedLog::saved_state_key());
    if (auto problem = recorder_.problem(); !problem.empty()) std::fprintf(stderr, "gpudx agent: %s\n", problem.c_str());
    // Followed (and NVML's events watched) before the first diagnosis, so nothing that happens while it runs is
    // missed.
    followed_.start(earlier_lines);
    take_nvml_events();
    recorder_.record({agent_note(fmt::format("gpudx agent {} started; following {}; serving {}", GPUDX_VERSION,
                                             followed_.source(),
                                             serving_.empty() ? std::string("nothing") : join_strings(serving_, ", ")),
                                 now_ms())});
    for (auto& s : servers_) s->start();
    if (!diagnose_node(DiagnosisTrigger::start)) {
        stop_all();
        return 0;
    }
    give_back_freed_memory();
    systemd_.notify(fmt::format("READY=1\nSTATUS=serving {}", join_strings(serving_, ", ")));
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
        pollfd p[3] = {{signal_fd_, POLLIN, 0}, {followed_.wake_fd(), POLLIN, 0}, {nvml_watch_.fd(), POLLIN, 0}};
        int n = ::poll(p, p[2].fd >= 0 ? 3 : 2, timeout);
        if (n < 0 && errno != EINTR) break;
        if (p[0].revents & POLLIN) break;
        // However many lines arrived since the last look, one re-read of the kernel log judges them all.
        if ((p[1].revents & POLLIN) && followed_.take()) {
            rediagnose_kernel_log();
            give_back_freed_memory();
        }
        if (take_nvml_events()) {
            next_full = std::min(next_full, std::max(clock::now(), last_nvml_full + o_.nvml_rediagnose_gap));
            nvml_called = true;
        }
        now = clock::now();
        if (now >= next_full) {
            if (nvml_called) last_nvml_full = now;
            if (!diagnose_node(nvml_called ? DiagnosisTrigger::nvml_event : DiagnosisTrigger::interval)) break;
            give_back_freed_memory();
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
    recorder_.record({agent_note("gpudx agent stopped", now_ms())});
    return 0;
}

}  // namespace

int run_agent(const AgentOptions& o) {
    // The signals that stop the agent are taken through a signalfd (by the main loop, and by a collection the
    // scratch thread waits on); every thread started from here on inherits the mask. A client gone mid-answer must
    // not kill the agent (SIGPIPE), nor a file-size limit reached by the event store (SIGXFSZ: the write fails and is
    // reported instead).
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
    // Free memory at the top of an arena goes back to the system past 128 KiB. By default glibc raises that
    // threshold to twice the largest mmapped block freed (an 8 MB answer: 16 MB), and malloc_trim never trims the
    // top of a thread's arena: a diagnosis's scratch (ScratchThread) then stayed resident, 11 MB of it. Setting it
    // also keeps the mmap threshold at 128 KiB: larger blocks (a big answer's text) are mapped and unmapped each
    // time, page faults an answer pays for the memory given back.
    ::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
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
