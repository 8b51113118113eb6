#pragma once
// Ending a child without ever blocking on it: a process stuck in uninterruptible driver code cannot be reaped
// until the kernel lets it go, so the caller waits a bounded time and leaves the rest to a detached thread.
// Used by the supervisor's forked children and by spawned programs (core/supervisor.hpp, core/spawn.hpp).
#include <sys/types.h>

#include <chrono>
#include <optional>

namespace gpudx {

// The wait after SIGKILL: a child in user space is gone within microseconds, one still there after this is
// stuck in the kernel driver.
inline constexpr std::chrono::milliseconds kKilledChildGrace{2000};

// waitpid's status once `pid` has ended, polling for at most `within`; none when it has not ended by then
// (or is not a child of this process).
std::optional<int> wait_for_exit(pid_t pid, std::chrono::milliseconds within);

// A detached thread waits for `pid`, so it never stays a zombie however long the kernel holds it.
void reap_in_background(pid_t pid);

// Whether waitpid still knows `pid` as an unreaped child of this process.
bool still_ours(pid_t pid);

}  // namespace gpudx
