#include "agent/collection.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "agent/follow.hpp"
#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/reap.hpp"
#include "core/spawn.hpp"
#include "core/text.hpp"

namespace gpudx {

bool kernel_line_matters(std::string_view line, const std::vector<std::string>& words) {
    auto format = detect_line_format(line);
    std::string_view message = line;
    if (format != KernelLogFormat::unknown) {
        auto parsed = parse_log_line(line, format);
        if (parsed.continuation) return false;
        if (parsed.recognised) message = parsed.message;
    }
    if (classify_topic(message)) return true;
    std::string lower = to_lower(message);
    for (const auto& w : words)
        if (!w.empty() && lower.find(to_lower(w)) != std::string::npos) return true;
    return false;
}

namespace {

// Lines of earlier generations of a followed file kept for the diagnosis (the oldest go first, said as a note), and
// of the generation under the name now (or of /dev/kmsg): only lines that matter are kept, and a node that logs
// 20,000 of them between rotations has bigger news.
constexpr long kKeptEarlierLines = 20000;

}  // namespace

Collected collect_in_child(const std::vector<std::string>& command, std::chrono::milliseconds timeout, int signal_fd) {
    Collected out;
    if (command.empty()) {
        out.problem = "no snapshot command";
        return out;
    }
    // The agent blocks SIGTERM and ignores SIGPIPE; SpawnedProgram starts the child as any program starts.
    auto child = SpawnedProgram::start(command);
    if (!child) {
        out.problem = fmt::format("cannot run {}: {}", command[0], child.error().message);
        return out;
    }
    std::string text;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    bool killed = false;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            out.problem = fmt::format("the collection did not finish within {} s (killed)", timeout.count() / 1000);
            killed = true;
            break;
        }
        pollfd p[2] = {{child->fd(), POLLIN, 0}, {signal_fd, POLLIN, 0}};
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

const char* FollowedLog::saved_state_key() { return "kernel_log_earlier_lines"; }

void FollowedLog::keep_generation_line(std::string_view line) {
    // One line in, the oldest out once full: a storm holds the bound, not up to twice it as a vector trimmed in
    // halves would.
    generation_lines_.emplace_back(line);
    if (static_cast<long>(generation_lines_.size()) > kKeptEarlierLines) generation_lines_.pop_front();
}

void FollowedLog::wake() {
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
}

void FollowedLog::start(const nlohmann::json& saved) {
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    bool file = o_.collect.kernel_log_file.has_value();
    if (file) {
        source_ = *o_.collect.kernel_log_file;
    } else if (!root_.is_live() && root_.exists("/_commands/dmesg.txt")) {
        // A capture: its saved log is what the diagnosis reads, so it is what is followed.
        auto p = root_.host_path("/_commands/dmesg.txt");
        source_ = p ? p->string() : std::string();
        file = true;
    } else {
        auto p = root_.host_path("/dev/kmsg");
        source_ = p ? p->string() : std::string("/dev/kmsg");
    }
    following_file_ = file;
    // The earlier generations the previous run kept, if it followed the same file: rotated away before this
    // start, they are in no file this run reads.
    if (file && saved.is_object() && saved.value("source", "") == source_)
        if (auto lines = saved.find("lines"); lines != saved.end() && lines->is_array())
            for (const auto& l : *lines)
                if (l.is_string()) earlier_lines_.push_back(l.get<std::string>());
    saved_earlier_lines_ = earlier_lines_.size();
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
            wake();
        };
        sink.note = [this](std::string message) {
            {
                std::lock_guard lock(inbox_mutex_);
                inbox_notes_.push_back(std::move(message));
            }
            wake();
        };
        sink.lost = [this](uint64_t n) { kmsg_lost_.fetch_add(n, std::memory_order_relaxed); };
        // The lines that matter of each generation of a followed file (or of the kmsg ring), so one rotated,
        // truncated or overwritten away is still judged (read_into): the source no longer holds them.
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
            wake();
        };
        if (file) follow_file(source_, stop_, sink);
        else follow_kmsg(source_, stop_, sink);
    });
}

void FollowedLog::stop() {
    if (follower_.joinable()) {
        uint64_t one = 1;
        (void)!::write(stop_, &one, sizeof one);
        follower_.join();
    }
    if (stop_ >= 0) ::close(stop_);
    if (wake_ >= 0) ::close(wake_);
    stop_ = wake_ = -1;
}

bool FollowedLog::take() {
    uint64_t count = 0;
    (void)!::read(wake_, &count, sizeof count);
    uint64_t matched = 0;
    std::vector<std::string> notes;
    {
        std::lock_guard lock(inbox_mutex_);
        std::swap(matched, inbox_matched_);
        std::swap(notes, inbox_notes_);
    }
    for (auto& n : notes) recorder_.note(std::move(n));
    return matched > 0;
}

bool FollowedLog::has_earlier_lines() {
    std::lock_guard lock(inbox_mutex_);
    return following_file_ ? !earlier_lines_.empty() : !generation_lines_.empty();
}

void FollowedLog::read_into(Snapshot& s) {
    CollectOptions options = o_.collect;
    uint64_t dropped = 0;
    // Saved when a generation ended since the last save (rare: a rotation), so a restart still judges them.
    std::optional<nlohmann::json> saved;
    {
        std::lock_guard lock(inbox_mutex_);
        std::swap(dropped, earlier_lines_dropped_);
        if (following_file_ && (earlier_lines_.size() != saved_earlier_lines_ || dropped > 0)) {
            saved = nlohmann::json{{"source", source_}, {"lines", earlier_lines_}};
            saved_earlier_lines_ = earlier_lines_.size();
        }
    }
    if (dropped > 0)
        recorder_.note(fmt::format("{} kernel-log lines of rotated-away generations of {} were dropped (more than {} kept)",
                                   dropped, source_, kKeptEarlierLines));
    if (saved) recorder_.record({}, {{saved_state_key(), json_text(*saved)}});
    // The kept lines are read where they are, under the inbox's lock: the follower waits while the collector takes
    // them (one pass), instead of the 20,000 lines being copied at every re-read.
    options.kernel_log_earlier_lines = [this](const std::function<void(std::string_view)>& take) {
        std::lock_guard lock(inbox_mutex_);
        if (following_file_)
            for (const auto& l : earlier_lines_) take(l);
        else
            for (const auto& l : generation_lines_) take(l);
    };
    CollectContext ctx{root_, options};
    KernelLog log;
    CollectorStatus st = collect_kernel_log(ctx, log);
    s.kernel_log = std::move(log);
    bool replaced = false;
    for (auto& c : s.collectors)
        if (c.name == st.name) c = st, replaced = true;
    if (!replaced) s.collectors.push_back(st);
}

void FollowedLog::describe(AgentStatus& s) const {
    s.kernel_log = {.source = source_,
                    .lines_read = lines_read_.load(),
                    .lines_matched = lines_matched_.load(),
                    .kmsg_records_lost = kmsg_lost_.load()};
}

}  // namespace gpudx
