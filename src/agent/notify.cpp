#include "agent/notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/text.hpp"

namespace gpudx {

SystemdNotifier::SystemdNotifier() {
    if (const char* s = std::getenv("NOTIFY_SOCKET"); s && (*s == '/' || *s == '@')) socket_ = s;
    const char* usec = std::getenv("WATCHDOG_USEC");
    const char* pid = std::getenv("WATCHDOG_PID");
    if (usec && (!pid || parse_int(pid).value_or(-1) == ::getpid()))
        if (auto us = parse_uint(usec); us && *us > 0) watchdog_ = std::chrono::milliseconds(*us / 2000);
}

bool SystemdNotifier::notify(std::string_view state) const {
    if (socket_.empty() || socket_.size() >= sizeof(sockaddr_un::sun_path)) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_.data(), socket_.size());
    if (socket_[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_.size());
    int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), len);
    ::close(fd);
    return sent == static_cast<ssize_t>(state.size());
}

}  // namespace gpudx
