#include "core/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_text.hpp"
#include "core/reap.hpp"
#include "core/text.hpp"

namespace gpudx {

namespace {

// The child must not keep the parent's other descriptors (another child's pipe would never see EOF, a
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

[[noreturn]] void run_child(const std::function<int(int)>& body, int fd) {
    ::signal(SIGPIPE, SIG_DFL);
    // A crash in the driver must end the child by its signal, which the parent reports; a handler
    // inherited from the parent (a sanitizer's, a crash reporter's) would turn it into an exit status.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, SIG_DFL);
    isolate_child_descriptors(fd);
    int code = kChildBodyThrew;
    // Fault-isolation boundary: the child's body. Its exception ends the child with a status the parent
    // reports; unwinding further would run the parent's code in the child.
    try {
        code = body(fd);
    } catch (...) {
    }
    ::_exit(code);
}

}  // namespace

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK) n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

std::string json_line(const nlohmann::json& j) {
    return json_text(j) + "\n";
}

std::string excerpt(std::string_view line) { return "\"" + strip_control(fit(line, 80)) + "\""; }

bool ChildExit::signaled() const { return status && WIFSIGNALED(*status); }
int ChildExit::signal() const { return status ? WTERMSIG(*status) : 0; }
int ChildExit::exit_code() const { return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : 0; }

Result<Child> Child::start(const std::function<int(int fd)>& body, ChannelKind channel) {
    int fds[2];
    bool made = channel == ChannelKind::socket ? ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0
                                               : ::pipe2(fds, O_CLOEXEC) == 0;
    if (!made) return fail(std::strerror(errno), channel == ChannelKind::socket ? "socketpair" : "pipe", errno);
    reap_finished();  // the children earlier ones left behind (core/reap.hpp): no thread of ours reaps them
    // What the parent has buffered must not be written a second time by a child that flushes stdio.
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) {
        int err = errno;
        ::close(fds[0]);
        ::close(fds[1]);
        return fail(std::strerror(err), "fork", err);
    }
    // Parent reads fds[0]; the child writes (and, on a socket, reads) fds[1].
    if (pid == 0) run_child(body, fds[1]);
    ::close(fds[1]);
    Child c;
    c.pid_ = pid;
    c.fd_ = fds[0];
    return c;
}

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
    if (this != &other) {
        if (running()) kill(std::chrono::milliseconds(0));
        close_channel();
        pid_ = std::exchange(other.pid_, -1);
        fd_ = std::exchange(other.fd_, -1);
        received_ = std::move(other.received_);
        error_ = std::move(other.error_);
    }
    return *this;
}

Child::~Child() {
    if (running()) kill(std::chrono::milliseconds(0));
    close_channel();
}

void Child::close_channel() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

bool Child::send(std::string_view line) { return fd_ >= 0 && write_all(fd_, line); }

Child::Read Child::read_available() {
    char buf[65536];
    ssize_t got = ::read(fd_, buf, sizeof buf);
    if (got > 0) {
        received_.append(buf, static_cast<size_t>(got));
        return Read::data;
    }
    if (got == 0) return Read::closed;
    if (errno == EINTR || errno == EAGAIN) return Read::nothing;
    error_ = fmt::format("read failed: {}", std::strerror(errno));
    return Read::failed;
}

Child::Read Child::read_until(std::chrono::steady_clock::time_point deadline) {
    while (true) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return Read::nothing;
        pollfd p{fd_, POLLIN, 0};
        // Woken at least every second, so a clock that jumps cannot stretch the wait.
        int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error_ = fmt::format("poll failed: {}", std::strerror(errno));
            return Read::failed;
        }
        if (n == 0) continue;
        if (auto r = read_available(); r != Read::nothing) return r;
    }
}

ChildExit Child::finish(std::chrono::milliseconds within, IfLate late) {
    close_channel();
    ChildExit ended;
    if (!running()) return ended;
    ended.status = wait_for_exit(pid_, within);
    if (!ended.reaped() && still_ours(pid_)) {
        if (late == IfLate::kill) ::kill(pid_, SIGKILL);
        reap_later(pid_);
    }
    pid_ = -1;
    return ended;
}

ChildExit Child::kill(std::chrono::milliseconds within) {
    if (running()) ::kill(pid_, SIGKILL);
    return finish(within, IfLate::leave);
}

}  // namespace gpudx
