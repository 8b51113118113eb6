#include "agent/follow.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collect/kernel_log_parse.hpp"


namespace gpudx {
namespace {

// A /dev/kmsg record is at most about 8 KiB (LOG_LINE_MAX plus its dictionary).
constexpr size_t kKmsgRecord = 16 * 1024;
constexpr size_t kReadChunk = 64 * 1024;

bool stop_requested(const pollfd& stop) { return (stop.revents & (POLLIN | POLLHUP | POLLERR)) != 0; }

// Waits for `fd` (or nothing, fd < 0) or the stop descriptor; false when asked to stop.
bool wait_for(int fd, int stop_fd, int timeout_ms) {
    pollfd p[2] = {{stop_fd, POLLIN, 0}, {fd, POLLIN, 0}};
    for (;;) {
        int n = ::poll(p, fd >= 0 ? 2 : 1, timeout_ms);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        return !stop_requested(p[0]);
    }
}

}  // namespace

std::optional<uint64_t> KmsgSequence::parse(std::string_view record) { return kmsg_sequence(record); }

uint64_t KmsgSequence::advance(uint64_t seq) {
    uint64_t lost = 0;
    if (last_ && seq > *last_ + 1) lost = seq - *last_ - 1;
    last_ = seq;
    return lost;
}

void LineSplitter::feed(std::string_view bytes, const std::function<void(std::string_view)>& line) {
    while (!bytes.empty()) {
        auto nl = bytes.find('\n');
        if (nl == std::string_view::npos) {
            partial_.append(bytes);
            while (partial_.size() >= max_line_) {
                line(std::string_view(partial_).substr(0, max_line_));
                partial_.erase(0, max_line_);
            }
            return;
        }
        if (partial_.empty()) {
            line(bytes.substr(0, nl));
        } else {
            partial_.append(bytes.substr(0, nl));
            line(partial_);
            partial_.clear();
        }
        bytes.remove_prefix(nl + 1);
    }
}

void LineSplitter::flush(const std::function<void(std::string_view)>& line) {
    if (!partial_.empty()) line(partial_);
    partial_.clear();
}

void follow_kmsg(const std::string& path, int stop_fd, const FollowSink& sink) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        sink.note(fmt::format("cannot follow {}: {}{}", path, std::strerror(err),
                              err == EPERM || err == EACCES ? " (run as root, or follow a file with --kernel-log)" : ""));
        return;
    }
    // The ring's past is the initial diagnosis's: handed to initial_line when the caller keeps it (a fresh
    // descriptor reads from the oldest record), skipped otherwise.
    if (!sink.initial_line) ::lseek(fd, 0, SEEK_END);
    KmsgSequence seq;
    bool overrun = false;
    std::vector<char> record(kKmsgRecord);
    const std::function<void(std::string_view)>* deliver = sink.initial_line ? &sink.initial_line : &sink.line;
    bool first_wait = true;
    // The first pass reads what is there without waiting; after it, every record is a new one.
    while (std::exchange(first_wait, false) || wait_for(fd, stop_fd, -1)) {
        for (;;) {
            ssize_t n = ::read(fd, record.data(), record.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EPIPE) {
                // The ring overwrote records we had not read: the next read returns the oldest one left, and
                // the gap in sequence numbers says how many were lost.
                overrun = true;
                continue;
            }
            if (n < 0 && errno == EAGAIN) {
                deliver = &sink.line;
                break;
            }
            if (n <= 0) {
                int err = n < 0 ? errno : 0;
                sink.note(fmt::format("stopped following {}: {}", path, err ? std::strerror(err) : "end of file"));
                ::close(fd);
                return;
            }
            std::string_view rec(record.data(), static_cast<size_t>(n));
            // The first line is the record; " KEY=VALUE" lines after it are its dictionary.
            auto first = rec.substr(0, rec.find('\n'));
            if (auto s = KmsgSequence::parse(first)) {
                uint64_t lost = seq.advance(*s);
                if (lost > 0 || overrun) {
                    sink.lost(lost);
                    sink.note(fmt::format("{}: the kernel's ring buffer overran: {} record{} lost before record {}",
                                          path, lost, lost == 1 ? "" : "s", *s));
                }
                overrun = false;
            }
            (*deliver)(first);
        }
    }
    ::close(fd);
}

namespace {

// One file followed under its name, across truncation and rotation.
class FileFollower {
public:
    FileFollower(std::string path, const FollowSink& sink) : path_(std::move(path)), sink_(sink) {}
    ~FileFollower() { close_file(); }

    // At start: the file's present content is the initial diagnosis's; its lines go to initial_line, so the
    // caller holds the whole generation should it be rotated or truncated away.
    void open_at_start() {
        if (!open_file()) return;
        if (!sink_.initial_line) {
            offset_ = ::lseek(fd_, 0, SEEK_END);
            tail_ = edge_bytes(std::max<off_t>(0, offset_ - static_cast<off_t>(kEdgeBytes)), kEdgeBytes);
            head_ = edge_bytes(0, static_cast<size_t>(std::min<off_t>(offset_, kEdgeBytes)));
            return;
        }
        // Only what was there when it was opened is initial: a line written while it is read is a new one. A
        // last line still being written stays in the splitter: its end comes through line() as one line.
        struct stat st{};
        off_t initial_end = ::fstat(fd_, &st) == 0 ? st.st_size : 0;
        read_to_end(sink_.initial_line, initial_end);
    }

    // Brings the follow up to date with the file under the name now.
    void check() {
        struct stat st{};
        if (::stat(path_.c_str(), &st) != 0) {
            // Gone from its name (removed, or renamed away by a rotation): what is still written to the open
            // file is read until a new one takes the name, as tail -F does.
            int err = errno;
            read_to_end(sink_.line);
            vanished_ = fd_ >= 0 || had_file_;
            report(fmt::format("{}: {}; following it again when it reappears", path_, std::strerror(err)));
            return;
        }
        if (fd_ >= 0 && (vanished_ || st.st_ino != ino_ || st.st_dev != dev_)) {
            read_to_end(sink_.line);  // the rotated-away file's last lines
            split_.flush(sink_.line);
            close_file();
            end_generation();
            sink_.note(fmt::format("{}: replaced by a new file (rotated); following the new one from its start", path_));
            if (!open_file()) return;
        } else if (fd_ < 0) {
            if (!open_file()) return;
            if (had_file_before_) sink_.note(fmt::format("{}: following again, from its start", path_));
        } else if (st.st_size < offset_ || rewritten()) {
            sink_.note(st.st_size < offset_
                           ? fmt::format("{}: truncated (to {} bytes from {}); reading it again from its start", path_,
                                         static_cast<long long>(st.st_size), static_cast<long long>(offset_))
                           : fmt::format("{}: rewritten in place (its bytes are no longer those read); reading it again "
                                         "from its start",
                                         path_));
            split_.flush(sink_.line);
            end_generation();
            offset_ = 0;
            ::lseek(fd_, 0, SEEK_SET);
        }
        read_to_end(sink_.line);
    }

private:
    bool open_file() {
        int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            report(fmt::format("cannot read {}: {}; following it again when it changes", path_, std::strerror(errno)));
            return false;
        }
        struct stat st{};
        ::fstat(fd, &st);
        fd_ = fd;
        ino_ = st.st_ino;
        dev_ = st.st_dev;
        offset_ = 0;
        head_.clear();
        tail_.clear();
        had_file_before_ = had_file_;
        had_file_ = true;
        vanished_ = false;
        last_problem_.clear();
        return true;
    }

    void close_file() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

    // Reads to the end of the file, or to `until` bytes.
    void read_to_end(const std::function<void(std::string_view)>& line, std::optional<off_t> until = std::nullopt) {
        if (fd_ < 0) return;
        for (;;) {
            size_t want = buf_.size();
            if (until) {
                if (offset_ >= *until) break;
                want = std::min(want, static_cast<size_t>(*until - offset_));
            }
            ssize_t n = ::read(fd_, buf_.data(), want);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                report(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
                break;
            }
            if (n == 0) break;
            std::string_view got(buf_.data(), static_cast<size_t>(n));
            remember_edges(got);
            offset_ += n;
            split_.feed(got, line);
        }
    }
    void end_generation() {
        split_.clear();
        head_.clear();
        tail_.clear();
        if (sink_.generation_ended) sink_.generation_ended();
    }

    // The bytes at the file's start and the last ones read, as they were read: a file rewritten in place shows
    // in one of them even when its size grew past what was read (a copytruncate and a large write at once) or
    // stayed the same. A log only ever appends, so neither changes while it is followed.
    void remember_edges(std::string_view got) {
        if (offset_ < static_cast<off_t>(kEdgeBytes))
            head_.append(got.substr(0, std::min(got.size(), kEdgeBytes - static_cast<size_t>(offset_))));
        tail_.append(got);
        if (tail_.size() > kEdgeBytes) tail_.erase(0, tail_.size() - kEdgeBytes);
    }
    std::string edge_bytes(off_t at, size_t n) const {
        std::string out(n, '\0');
        ssize_t got = ::pread(fd_, out.data(), n, at);
        out.resize(got > 0 ? static_cast<size_t>(got) : 0);
        return out;
    }
    bool rewritten() const {
        if (fd_ < 0 || offset_ == 0) return false;
        return edge_bytes(0, head_.size()) != head_ ||
               edge_bytes(offset_ - static_cast<off_t>(tail_.size()), tail_.size()) != tail_;
    }

    // A problem is said once, not at every change of the directory while it lasts.
    void report(std::string message) {
        if (message == last_problem_) return;
        last_problem_ = message;
        sink_.note(std::move(message));
    }

    std::string path_;
    const FollowSink& sink_;
    int fd_ = -1;
    ino_t ino_ = 0;
    dev_t dev_ = 0;
    off_t offset_ = 0;
    bool had_file_ = false, had_file_before_ = false;
    bool vanished_ = false;  // the name was gone since the file was opened: what takes it is a new file
    std::string last_problem_;
    static constexpr size_t kEdgeBytes = 4096;
    std::string head_, tail_;  // the file's first bytes and the last ones read, as read (remember_edges)
    LineSplitter split_;
    std::vector<char> buf_ = std::vector<char>(kReadChunk);
};

}  // namespace

void follow_file(const std::string& path, int stop_fd, const FollowSink& sink) {
    FileFollower f(path, sink);
    std::string dir = std::filesystem::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (in < 0) {
        sink.note(fmt::format("cannot follow {}: inotify: {}", path, std::strerror(errno)));
        return;
    }
    // The directory's watch sees writes to the file, its truncation, and every way it can be replaced or removed.
    constexpr uint32_t kMask = IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                               IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF;
    int wd = ::inotify_add_watch(in, dir.c_str(), kMask);
    f.open_at_start();
    std::vector<char> events(64 * 1024);
    for (;;) {
        // Only while the directory is missing is there nothing to watch: look again once a second then.
        if (!wait_for(in, stop_fd, wd < 0 ? 1000 : -1)) break;
        while (::read(in, events.data(), events.size()) > 0) {
        }
        if (wd < 0) wd = ::inotify_add_watch(in, dir.c_str(), kMask);
        f.check();
        // The directory itself removed or moved: its watch is gone (IN_IGNORED); set it again when it is back.
        struct stat st{};
        if (wd >= 0 && ::stat(dir.c_str(), &st) != 0) {
            ::inotify_rm_watch(in, wd);
            wd = -1;
        }
    }
    ::close(in);
}

}  // namespace gpudx
