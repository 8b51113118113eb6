#include "agent/follow.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>


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

std::optional<uint64_t> KmsgSequence::parse(std::string_view record) {
    auto comma = record.find(',');
    if (comma == std::string_view::npos) return std::nullopt;
    auto rest = record.substr(comma + 1);
    auto end = rest.find_first_of(",;");
    if (end == std::string_view::npos || end == 0) return std::nullopt;
    uint64_t seq = 0;
    for (char c : rest.substr(0, end)) {
        if (c < '0' || c > '9') return std::nullopt;
        seq = seq * 10 + static_cast<uint64_t>(c - '0');
    }
    return seq;
}

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
    // Only what the kernel logs from now on: the ring's past is the initial diagnosis's.
    ::lseek(fd, 0, SEEK_END);
    KmsgSequence seq;
    bool overrun = false;
    std::vector<char> record(kKmsgRecord);
    while (wait_for(fd, stop_fd, -1)) {
        for (;;) {
            ssize_t n = ::read(fd, record.data(), record.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EPIPE) {
                // The ring overwrote records we had not read: the next read returns the oldest one left, and
                // the gap in sequence numbers says how many were lost.
                overrun = true;
                continue;
            }
            if (n < 0 && errno == EAGAIN) break;
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
            sink.line(first);
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

    // At start: the file's present content is the initial diagnosis's, so follow from its end.
    void open_at_end() {
        if (open_file() && fd_ >= 0) offset_ = ::lseek(fd_, 0, SEEK_END);
    }

    // Brings the follow up to date with the file under the name now.
    void check() {
        struct stat st{};
        if (::stat(path_.c_str(), &st) != 0) {
            // Gone from its name (removed, or renamed away by a rotation): what is still written to the open
            // file is read until a new one takes the name, as tail -F does.
            int err = errno;
            read_to_end();
            vanished_ = fd_ >= 0 || had_file_;
            report(fmt::format("{}: {}; following it again when it reappears", path_, std::strerror(err)));
            return;
        }
        if (fd_ >= 0 && (vanished_ || st.st_ino != ino_ || st.st_dev != dev_)) {
            read_to_end();  // the rotated-away file's last lines
            split_.flush(sink_.line);
            close_file();
            sink_.note(fmt::format("{}: replaced by a new file (rotated); following the new one from its start", path_));
            if (!open_file()) return;
        } else if (fd_ < 0) {
            if (!open_file()) return;
            if (had_file_before_) sink_.note(fmt::format("{}: following again, from its start", path_));
        } else if (st.st_size < offset_) {
            sink_.note(fmt::format("{}: truncated (to {} bytes from {}); reading it again from its start", path_,
                                   static_cast<long long>(st.st_size), static_cast<long long>(offset_)));
            split_.clear();
            offset_ = 0;
            ::lseek(fd_, 0, SEEK_SET);
        }
        read_to_end();
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

    void read_to_end() {
        if (fd_ < 0) return;
        for (;;) {
            ssize_t n = ::read(fd_, buf_.data(), buf_.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                report(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
                return;
            }
            if (n == 0) return;
            offset_ += n;
            split_.feed(std::string_view(buf_.data(), static_cast<size_t>(n)), sink_.line);
        }
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
    f.open_at_end();
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
