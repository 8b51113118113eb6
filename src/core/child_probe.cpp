#include "core/child_probe.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/json_text.hpp"
#include "core/supervisor.hpp"

namespace gpudx {

namespace {

constexpr size_t kMaxProbeOutput = 64 * 1024 * 1024;

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
    write_all(fd_, line);  // a parent that is gone has nothing left to learn
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
    write_all(STDERR_FILENO, line);
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
    write_line("R", json_text(j));
}
void ProbeChannel::done() {
    trace(std::nullopt, last_, "(done)");
    write_line("E", {});
}

namespace {

constexpr size_t kMaxReadProblems = 10;

void read_problem(ProbeOutcome& out, std::string message) {
    if (out.read_problems.size() < kMaxReadProblems) out.read_problems.push_back(std::move(message));
    else if (out.read_problems.size() == kMaxReadProblems) out.read_problems.push_back("more unreadable lines, not listed");
}

}  // namespace

bool consume_probe_lines(std::string& buffer, ProbeOutcome& out) {
    bool ended = false;
    split_lines(buffer, [&](std::string_view line) {
        if (line.empty()) return;
        char tag = line[0];
        if (line.size() > 1 && line[1] != ' ') {
            read_problem(out, "a line that is not a probe message: " + excerpt(line));
            return;
        }
        std::string_view text = line.size() > 2 ? line.substr(2) : std::string_view{};
        if (tag == 'P') {
            out.last_call.assign(text);
        } else if (tag == 'L') {
            auto space = text.find(' ');
            auto lane = parse_lane(text.substr(0, space));
            if (!lane) {
                read_problem(out, "a lane line without a lane number: " + excerpt(line));
                return;
            }
            if (space == std::string_view::npos) out.busy_lanes.erase(*lane);
            else out.busy_lanes[*lane].assign(text.substr(space + 1));
        } else if (tag == 'R') {
            auto j = nlohmann::json::parse(text, nullptr, false);
            if (j.is_discarded()) read_problem(out, "a result that is not JSON (the one before it stands): " + excerpt(line));
            else out.result = std::move(j);
        } else if (tag == 'E') {
            ended = true;
        } else {
            read_problem(out, "a line that is not a probe message: " + excerpt(line));
        }
    });
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
        auto start = std::chrono::steady_clock::now();
        const ProbeSpec& spec = specs[i];
        auto child = Child::start([&spec](int fd) {
            ProbeChannel ch(fd, spec.name);
            // Fault-isolation boundary: a probe body. What it sent before throwing stands, so the child
            // still says it finished.
            try {
                spec.body(ch);
            } catch (...) {
            }
            ch.done();
            return 0;
        });
        if (!child) {
            out[i].message = fmt::format("{}: {}", child.error().path, child.error().message);
            continue;
        }
        run[i].child = std::move(*child);
        run[i].start = start;
        run[i].deadline = start + spec.deadline;
    }
    return started;
}

std::vector<ProbeOutcome> run_probes(const std::vector<ProbeSpec>& specs) { return start_probes(specs).wait(); }

std::vector<ProbeOutcome> RunningProbes::wait() {
    using std::chrono::milliseconds;
    auto& out = outcomes_;
    auto& run = processes_;
    // Ends probe i's reading; the child itself is ended by the caller.
    auto finish = [&](size_t i, ProbeEnd end, std::string message) {
        auto& r = run[i];
        out[i].end = end;
        if (!message.empty()) out[i].message = std::move(message);
        out[i].duration_ms = ms_between(r.start, std::chrono::steady_clock::now());
        const std::string& rest = r.child.received();
        if (!rest.empty() && rest.size() <= kMaxProbeOutput)
            read_problem(out[i], fmt::format("the last line was cut off after {} bytes: {}", rest.size(), excerpt(rest)));
    };

    while (true) {
        std::vector<pollfd> pfds;
        std::vector<size_t> which;
        auto now = std::chrono::steady_clock::now();
        int timeout_ms = -1;
        for (size_t i = 0; i < run.size(); ++i) {
            if (!run[i].child.running()) continue;
            if (now >= run[i].deadline) {
                finish(i, ProbeEnd::timed_out, {});
                run[i].child.kill(milliseconds(0));
                continue;
            }
            auto left = std::chrono::ceil<milliseconds>(run[i].deadline - now).count();
            if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
            pfds.push_back({run[i].child.fd(), POLLIN, 0});
            which.push_back(i);
        }
        if (pfds.empty()) break;
        int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        for (size_t k = 0; k < pfds.size(); ++k) {
            if (!pfds[k].revents) continue;
            size_t i = which[k];
            auto& child = run[i].child;
            auto got = child.read_available();
            if (got == Child::Read::nothing) continue;
            if (got == Child::Read::data) {
                if (consume_probe_lines(child.received(), out[i])) {
                    finish(i, ProbeEnd::finished, {});
                    child.finish(milliseconds(0), Child::IfLate::leave);
                } else if (child.received().size() > kMaxProbeOutput) {
                    finish(i, ProbeEnd::died, "probe wrote an oversized line; killed");
                    child.kill(milliseconds(0));
                }
                continue;
            }
            // EOF without "E": the child died inside a call (a crash in the driver, or killed).
            auto ended = child.finish(milliseconds(50), Child::IfLate::leave);
            std::string why = "probe process ended without finishing";
            if (ended.signaled())
                why = fmt::format("probe process killed by signal {} ({})", ended.signal(), strsignal(ended.signal()));
            else if (ended.reaped())
                why = fmt::format("probe process exited with status {}", ended.exit_code());
            finish(i, ProbeEnd::died, why);
        }
    }
    return std::move(out);
}

}  // namespace gpudx
