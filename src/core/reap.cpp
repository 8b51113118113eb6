#include "core/reap.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <mutex>
#include <vector>

namespace gpudx {

std::optional<int> wait_for_exit(pid_t pid, std::chrono::milliseconds within) {
    auto end = std::chrono::steady_clock::now() + within;
    while (true) {
        int status = 0;
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return std::nullopt;  // not a child of ours: nothing to wait for
        if (std::chrono::steady_clock::now() >= end) return std::nullopt;
        ::usleep(1000);
    }
}

namespace {
std::mutex pending_mutex;
std::vector<pid_t> pending;
}  // namespace

void reap_later(pid_t pid) {
    std::lock_guard lock(pending_mutex);
    pending.push_back(pid);
}

void reap_finished() {
    std::lock_guard lock(pending_mutex);
    std::erase_if(pending, [](pid_t pid) {
        int status = 0;
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        return r == pid || (r < 0 && errno != EINTR);  // reaped, or not a child of ours any more
    });
}

bool still_ours(pid_t pid) {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

}  // namespace gpudx
