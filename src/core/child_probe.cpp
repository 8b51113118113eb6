#include "core/child_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace gpudx {

namespace {

constexpr size_t kMaxProbeOutput = 64 * 1024 * 1024;

void write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;  // parent gone: nothing useful left to do
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
}

// The child must not keep the parent's other descriptors (another probe's pipe would never see EOF, a
// caller's socket would stay open), nor write to the parent's stdout (it may be the snapshot JSON).
void isolate_child_descriptors(int keep_fd) {
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
        ::dup2(devnull, STDIN_FILENO);
        ::dup2(devnull, STDOUT_FILENO);
    }
    long rc = -1;
    // The kernel headers' number: glibc before 2.34 (the portable build's 2.31) has no SYS_close_range.
#ifdef __NR_close_range
    rc = keep_fd > 3 ? ::syscall(__NR_close_range, 3u, static_cast<unsigned>(keep_fd - 1), 0u) : 0;
    if (rc == 0) rc = ::syscall(__NR_close_range, static_cast<unsigned>(keep_fd + 1), ~0u, 0u);
#endif
    if (rc != 0)  // kernels before 5.9 (ENOSYS)
        for (int fd = 3; fd < 4096; ++fd)
            if (fd != keep_fd) ::close(fd);
}

// Reaps a child without ever blocking the caller: a process stuck in uninterruptible driver code cannot
// be reaped until the kernel lets it go, and gpudx must be able to exit before then.
void reap_in_background(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return;
    std::thread([pid] {
        int st = 0;
        while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    }).detach();
}

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

std::optional<unsigned> parse_lane(std::string_view s) {
    unsigned n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return n;
}

}  // namespace

std::vector<std::string> ProbeOutcome::calls_in_flight() const {
    std::vector<std::string> calls;
    for (auto& [lane, call] : busy_lanes) calls.push_back(call);
    if (calls.empty() && !last_call.empty()) calls.push_back(last_call);
    return calls;
}

void ProbeChannel::write_line(std::string_view tag, std::string_view text) {
    std::lock_guard lock(write_mutex_);
    std::string line;
    line.reserve(tag.size() + text.size() + 2);
    line.append(tag);
    if (!text.empty()) {
        line.push_back(' ');
        line.append(text);
    }
    line.push_back('\n');
    write_all(fd_, line.data(), line.size());
}

ProbeChannel::ProbeChannel(int fd, std::string name)
    : fd_(fd), name_(std::move(name)), tracing_(std::getenv("GPUDX_PROBE_TRACE") != nullptr),
      last_(std::chrono::steady_clock::now()) {}

void ProbeChannel::trace(std::optional<unsigned> lane, std::chrono::steady_clock::time_point& last,
                         std::string_view what) {
    if (!tracing_) return;
    auto now = std::chrono::steady_clock::now();
    std::string who = lane ? fmt::format(" lane {}", *lane) : std::string();
    std::string line = fmt::format("gpudx probe {}{} +{:.3f} ms {}\n", name_, who, ms_between(last, now), what);
    last = now;
    std::lock_guard lock(write_mutex_);
    write_all(STDERR_FILENO, line.data(), line.size());
}

void ProbeChannel::progress(std::string_view call) {
    trace(std::nullopt, last_, call);
    write_line("P", call);
}

ProbeChannel::Lane::Lane(ProbeChannel& ch, unsigned n) : ch_(ch), n_(n), last_(std::chrono::steady_clock::now()) {}

void ProbeChannel::Lane::progress(std::string_view call) {
    ch_.trace(n_, last_, call);
    ch_.write_line("L", fmt::format("{} {}", n_, call));
}

void ProbeChannel::Lane::finished() {
    ch_.trace(n_, last_, "(lane done)");
    ch_.write_line("L", std::to_string(n_));
}
void ProbeChannel::result(const nlohmann::json& j) {
    // dump() escapes control characters, so the document stays on one line; invalid UTF-8 is replaced.
    write_line("R", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}
void ProbeChannel::done() {
    trace(std::nullopt, last_, "(done)");
    write_line("E", {});
}

bool consume_probe_lines(std::string& buffer, ProbeOutcome& out) {
    bool ended = false;
    size_t start = 0;
    while (true) {
        size_t nl = buffer.find('\n', start);
        if (nl == std::string::npos) break;
        std::string_view line(buffer.data() + start, nl - start);
        start = nl + 1;
        if (line.empty()) continue;
        char tag = line[0];
        std::string_view text = line.size() > 2 ? line.substr(2) : std::string_view{};
        if (tag == 'P') {
            out.last_call.assign(text);
        } else if (tag == 'L') {
            auto space = text.find(' ');
            auto lane = parse_lane(text.substr(0, space));
            if (!lane) continue;
            if (space == std::string_view::npos) out.busy_lanes.erase(*lane);
            else out.busy_lanes[*lane].assign(text.substr(space + 1));
        } else if (tag == 'R') {
            auto j = nlohmann::json::parse(text, nullptr, false);
            if (!j.is_discarded()) out.result = std::move(j);
        } else if (tag == 'E') {
            ended = true;
        }
    }
    buffer.erase(0, start);
    return ended;
}

RunningProbes start_probes(const std::vector<ProbeSpec>& specs) {
    RunningProbes started;
    auto& out = started.outcomes_;
    auto& run = started.processes_;
    out.resize(specs.size());
    run.resize(specs.size());

    // Fork every child before reading from any, so that they run concurrently.
    for (size_t i = 0; i < specs.size(); ++i) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) {
            out[i].message = fmt::format("pipe: {}", std::strerror(errno));
            continue;
        }
        auto start = std::chrono::steady_clock::now();
        pid_t pid = ::fork();
        if (pid < 0) {
            out[i].message = fmt::format("fork: {}", std::strerror(errno));
            ::close(fds[0]);
            ::close(fds[1]);
            continue;
        }
        if (pid == 0) {
            // Child: only this probe's work, then _exit (no atexit handlers, no parent's destructors).
            ::signal(SIGPIPE, SIG_DFL);
            // A crash in the driver must end the child by its signal, which the parent reports; a handler
            // inherited from the parent (a sanitizer's, a crash reporter's) would turn it into an exit status.
            for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, SIG_DFL);
            isolate_child_descriptors(fds[1]);
            ProbeChannel ch(fds[1], specs[i].name);
            try {
                specs[i].body(ch);
            } catch (...) {
            }
            ch.done();
            ::_exit(0);
        }
        ::close(fds[1]);
        run[i].pid = pid;
        run[i].fd = fds[0];
        run[i].start = start;
        run[i].deadline = start + specs[i].deadline;
        run[i].open = true;
    }
    return started;
}

RunningProbes::~RunningProbes() {
    for (auto& r : processes_) {
        if (!r.open) continue;
        ::kill(r.pid, SIGKILL);
        ::close(r.fd);
        reap_in_background(r.pid);
    }
}

std::vector<ProbeOutcome> run_probes(const std::vector<ProbeSpec>& specs) { return start_probes(specs).wait(); }

std::vector<ProbeOutcome> RunningProbes::wait() {
    auto& out = outcomes_;
    auto& run = processes_;
    auto finish = [&](size_t i, ProbeEnd end, std::string message) {
        auto& r = run[i];
        out[i].end = end;
        if (!message.empty()) out[i].message = std::move(message);
        out[i].duration_ms = ms_between(r.start, std::chrono::steady_clock::now());
        ::close(r.fd);
        r.open = false;
    };

    while (true) {
        std::vector<pollfd> pfds;
        std::vector<size_t> which;
        auto now = std::chrono::steady_clock::now();
        int timeout_ms = -1;
        for (size_t i = 0; i < run.size(); ++i) {
            if (!run[i].open) continue;
            if (now >= run[i].deadline) {
                ::kill(run[i].pid, SIGKILL);
                finish(i, ProbeEnd::timed_out, {});
                reap_in_background(run[i].pid);
                continue;
            }
            auto left = std::chrono::ceil<std::chrono::milliseconds>(run[i].deadline - now).count();
            if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
            pfds.push_back({run[i].fd, POLLIN, 0});
            which.push_back(i);
        }
        if (pfds.empty()) break;
        int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        for (size_t k = 0; k < pfds.size(); ++k) {
            if (!pfds[k].revents) continue;
            size_t i = which[k];
            auto& r = run[i];
            char buf[65536];
            ssize_t got = ::read(r.fd, buf, sizeof buf);
            if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (got > 0) {
                r.buffer.append(buf, static_cast<size_t>(got));
                bool ended = consume_probe_lines(r.buffer, out[i]);
                if (ended) {
                    finish(i, ProbeEnd::finished, {});
                    reap_in_background(r.pid);
                } else if (r.buffer.size() > kMaxProbeOutput) {
                    ::kill(r.pid, SIGKILL);
                    finish(i, ProbeEnd::died, "probe wrote an oversized line; killed");
                    reap_in_background(r.pid);
                }
                continue;
            }
            // EOF without "E": the child died inside a call (a crash in the driver, or killed).
            std::string why = "probe process ended without finishing";
            int status = 0;
            bool reaped = false;
            for (int tries = 0; tries < 50; ++tries) {
                pid_t w = ::waitpid(r.pid, &status, WNOHANG);
                if (w == r.pid) {
                    reaped = true;
                    if (WIFSIGNALED(status))
                        why = fmt::format("probe process killed by signal {} ({})", WTERMSIG(status),
                                          strsignal(WTERMSIG(status)));
                    else if (WIFEXITED(status))
                        why = fmt::format("probe process exited with status {}", WEXITSTATUS(status));
                    break;
                }
                if (w < 0) break;
                ::usleep(1000);
            }
            finish(i, ProbeEnd::died, why);
            if (!reaped) reap_in_background(r.pid);
        }
    }
    return std::move(out);
}

}  // namespace gpudx
