#pragma once
// Ending a child without ever blocking on it: a process stuck in uninterruptible driver code cannot be reaped
// until the kernel lets it go, so the caller waits a bounded time and leaves the rest to be reaped later.
// Later means at the next child started (and whenever reap_finished() is called), never by a thread: a thread
// that starts or ends while another child is forked can hold the allocator's lock at the fork, and a child that
// inherits it locked blocks on its first allocation (seen with AddressSanitizer's allocator, which has no
// fork handlers in GCC 12: probe children blocked in operator new under `make test-sanitize`).
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

// Remembers `pid`, an unreaped child of this process, to be reaped once it has ended (reap_finished).
void reap_later(pid_t pid);
// Reaps every child left to reap_later that has ended since; never waits. Called before each child is started.
void reap_finished();

// Whether waitpid still knows `pid` as an unreaped child of this process.
bool still_ours(pid_t pid);

}  // namespace gpudx
