#include "core/reap.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <thread>

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

void reap_in_background(pid_t pid) {
    std::thread([pid] {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }).detach();
}

bool still_ours(pid_t pid) {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

}  // namespace gpudx
