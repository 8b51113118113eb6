#include "core/staging_dir.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "core/reap.hpp"

// close_range(2), Linux 5.9; the portable build's headers (glibc 2.31) may not name it. Older kernels answer
// ENOSYS and the descriptors are closed one by one.
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace gpudx {
namespace fs = std::filesystem;

namespace {

// What gpudx writes into the watcher's pipe once nothing is left for it to remove.
constexpr char kSettled = 's';
// How often the watcher looks at its parent when no death signal came (it comes at once on Linux).
constexpr int kParentPollMs = 500;

void remove_tree(const std::string& path, const std::string& parent_if_empty) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (!parent_if_empty.empty()) ::rmdir(parent_if_empty.c_str());  // fails, as it should, when not empty
}

void wake_on_parent_death(int) {}  // the signal only interrupts poll()

// Keeps `keep` (moved to descriptor 3) and /dev/null on 0, 1 and 2; closes every other descriptor gpudx had.
int keep_only(int keep) {
    if (keep != 3) {
        ::dup2(keep, 3);
        keep = 3;
    }
    if (::syscall(SYS_close_range, 4u, ~0u, 0u) != 0) {
        struct rlimit lim {};
        rlim_t last = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? std::min<rlim_t>(lim.rlim_cur, 1 << 16) : 1024;
        for (rlim_t fd = 4; fd < last; ++fd) ::close(static_cast<int>(fd));
    }
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
        for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
        if (null > 2) ::close(null);
    }
    return keep;
}

// The watcher's whole life: wait until gpudx says the folder is settled (exit), or is gone (remove it, exit).
[[noreturn]] void watch(int settled_fd, pid_t gpudx, const std::string& path, const std::string& parent_if_empty) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR2}) std::signal(sig, SIG_IGN);
    struct sigaction wake {};
    wake.sa_handler = wake_on_parent_death;
    ::sigaction(SIGUSR1, &wake, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGUSR1);
    settled_fd = keep_only(settled_fd);
    // gpudx may have ended between fork and prctl: then no signal will come, and the parent is already another.
    while (::getppid() == gpudx) {
        pollfd p{settled_fd, POLLIN, 0};
        int ready = ::poll(&p, 1, kParentPollMs);
        if (ready <= 0) continue;  // a timeout or the death signal: the loop's test asks again
        char c = 0;
        ssize_t n = ::read(settled_fd, &c, 1);
        if (n == 1 && c == kSettled) ::_exit(0);
        if (n == 0) break;  // every writer closed without settling: gpudx ended
    }
    remove_tree(path, parent_if_empty);
    ::_exit(0);
}

}  // namespace

Result<StagingDirectory> StagingDirectory::create(const std::string& dir, std::string_view prefix,
                                                  bool remove_dir_if_empty) {
    std::string tmpl = (fs::path(dir) / (std::string(prefix) + "XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) {
        int err = errno;
        return fail(fmt::format("cannot create a temporary folder in {}: {}", dir, std::strerror(err)), dir, err);
    }
    std::string parent = remove_dir_if_empty ? dir : std::string();
    int fds[2];
    pid_t watcher = -1;
    if (::pipe2(fds, O_CLOEXEC) == 0) {
        reap_finished();
        pid_t gpudx = ::getpid();
        watcher = ::fork();
        if (watcher == 0) {
            ::close(fds[1]);
            watch(fds[0], gpudx, tmpl, parent);
        }
        ::close(fds[0]);
        if (watcher < 0) {
            // No watcher (no process left to fork): the folder is still removed on every ordinary end.
            ::close(fds[1]);
            fds[1] = -1;
        }
    } else {
        fds[1] = -1;
    }
    return StagingDirectory(tmpl, parent, remove_dir_if_empty, watcher, fds[1]);
}

StagingDirectory::StagingDirectory(StagingDirectory&& other) noexcept
    : path_(std::move(other.path_)), parent_(std::move(other.parent_)), remove_parent_(other.remove_parent_),
      watcher_(other.watcher_), settled_fd_(other.settled_fd_) {
    other.path_.clear();
    other.watcher_ = -1;
    other.settled_fd_ = -1;
}

StagingDirectory::~StagingDirectory() { remove(); }

void StagingDirectory::settle() {
    if (settled_fd_ >= 0) {
        (void)!::write(settled_fd_, &kSettled, 1);
        ::close(settled_fd_);
        settled_fd_ = -1;
    }
    if (watcher_ > 0) {
        // It exits as soon as it reads the byte; one that does not is left to be reaped with the next child.
        if (!wait_for_exit(watcher_, std::chrono::milliseconds(2000))) reap_later(watcher_);
        watcher_ = -1;
    }
}

void StagingDirectory::remove() {
    if (path_.empty()) return;
    remove_tree(path_, remove_parent_ ? parent_ : std::string());
    path_.clear();
    settle();
}

Result<void> StagingDirectory::publish_into(const std::string& dest) {
    std::error_code ec;
    std::vector<fs::path> entries;
    for (auto it = fs::directory_iterator(path_, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
        entries.push_back(it->path());
    if (ec) return fail(fmt::format("cannot list {}: {}", path_, ec.message()), path_, ec.value());
    for (auto& entry : entries) {
        fs::path to = fs::path(dest) / entry.filename();
        if (::rename(entry.c_str(), to.c_str()) != 0) {
            int err = errno;
            return fail(fmt::format("cannot move {} to {}: {}", entry.string(), to.string(), std::strerror(err)),
                        to.string(), err);
        }
    }
    if (::rmdir(path_.c_str()) != 0) {
        int err = errno;
        return fail(fmt::format("cannot remove {}: {}", path_, std::strerror(err)), path_, err);
    }
    path_.clear();
    settle();
    return {};
}

}  // namespace gpudx
