#pragma once
// systemd's notification protocol (sd_notify(3)), for `Type=notify` and the watchdog: one datagram of
// "KEY=VALUE" lines to the unix socket named by $NOTIFY_SOCKET ("@name" is the abstract namespace). Written
// here, a dozen lines, instead of linking libsystemd: libsystemd has no static archive in Debian, and the
// protocol is stable and documented as an interface (docs/agent.md).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

class SystemdNotifier {
public:
    // Reads $NOTIFY_SOCKET and $WATCHDOG_USEC (and $WATCHDOG_PID, which must be this process when set).
    SystemdNotifier();
    bool enabled() const { return !socket_.empty(); }
    // How often to send WATCHDOG=1: half the watchdog's timeout, as sd_watchdog_enabled(3) advises; none
    // when systemd set no watchdog.
    std::optional<std::chrono::milliseconds> watchdog_interval() const { return watchdog_; }
    // Sends the lines ("READY=1\nSTATUS=..."); false when there is no socket or the send failed.
    bool notify(std::string_view state) const;

private:
    std::string socket_;
    std::optional<std::chrono::milliseconds> watchdog_;
};

}  // namespace gpudx
