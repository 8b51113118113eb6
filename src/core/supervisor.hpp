#pragma once
// Work that can hang or crash gpudx (a driver call into a wedged GPU, a kernel launch, a CUDA checkpoint)
// runs in a forked child that gpudx supervises, so that gpudx itself always answers:
//   - fork before threads: a child of a multi-threaded process inherits every lock another thread held at
//     the fork (the allocator's under ASan, the loader's, a stream's) and can block on one forever before
//     its first call, a false "unresponsive driver". Start children in the thread that will read them,
//     before starting any other.
//   - a deadline on every read, then SIGKILL;
//   - a reap that never blocks gpudx: a process stuck in uninterruptible driver code cannot be reaped until
//     the kernel lets it go, so one that is not gone soon after SIGKILL is left to be reaped later, by no thread (core/reap.hpp);
//   - framed results: the child writes one line per message (JSON dumped on one line, or a probe's tagged
//     lines, core/child_probe.hpp); the parent splits them off with split_lines and reports a line it cannot
//     read as a read problem, never drops it.
// Users: the driver probes (core/child_probe.hpp), the checkpoint worker and the accept watchdog.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "core/reap.hpp"

namespace gpudx {

// Writes all of `data`; false when the reader is gone. A socket is written with MSG_NOSIGNAL, so a child
// that died is an error the parent reports rather than a SIGPIPE that ends gpudx; on a pipe the writer's own
// SIGPIPE disposition applies (a child's is the default: a child whose parent stopped reading has nothing left
// to do).
bool write_all(int fd, std::string_view data);

// One frame: the document dumped on one line (dump() escapes control characters; invalid UTF-8 is replaced).
std::string json_line(const nlohmann::json& j);

// Calls on_line(std::string_view) for every complete line at the front of `buffer`, without its newline, then
// drops those lines: what stays is a frame still being written (or, once the child has ended, a truncated one).
template <class OnLine>
void split_lines(std::string& buffer, OnLine&& on_line) {
    size_t start = 0;
    for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1)
        on_line(std::string_view(buffer).substr(start, nl - start));
    buffer.erase(0, start);
}

// The first bytes of a line a child wrote, safe to print inside a message.
std::string excerpt(std::string_view line);

// How a child ended, as far as waitpid could tell.
struct ChildExit {
    std::optional<int> status;  // waitpid's; none when it was not gone in time (it is reaped later)
    bool reaped() const { return status.has_value(); }
    bool signaled() const;
    int signal() const;     // when signaled()
    int exit_code() const;  // otherwise
};

// The exit status of a child whose body threw (EX_SOFTWARE): the body is the child's fault-isolation
// boundary, so the exception ends the child, never reaches code the parent owns.
inline constexpr int kChildBodyThrew = 70;

enum class ChannelKind {
    pipe,    // the child writes, the parent reads
    socket,  // both ways: requests and answers
};

// A forked child and the parent's end of its channel. Destroying one still running kills it (its reap left
// to the background).
class Child {
public:
    // `body` runs in the child with its end of the channel; what it returns is the exit status. The child
    // keeps only that descriptor (stdin and stdout go to /dev/null: gpudx's stdout may be the report, and
    // another child's pipe kept open would never see EOF), crash signals end it by their default action (so
    // the parent can report the signal, not a handler's exit status), and it ends with _exit (no atexit
    // handlers, no destructors of the parent's objects, no driver teardown at exit that can block).
    // The error's path names the call that failed ("pipe", "socketpair", "fork").
    static Result<Child> start(const std::function<int(int fd)>& body, ChannelKind channel = ChannelKind::pipe);

    Child() = default;
    Child(Child&& other) noexcept;
    Child& operator=(Child&& other) noexcept;
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child();

    pid_t pid() const { return pid_; }
    int fd() const { return fd_; }
    // Still to be ended with finish() or kill().
    bool running() const { return pid_ > 0; }

    // Sends one line on a socket channel; false when the child is gone.
    bool send(std::string_view line);

    // `data`: bytes were appended to received(); `nothing`: none there to read (read_until: the deadline
    // passed); `closed`: EOF, the child exited or closed its end; `failed`: error() says why.
    enum class Read { data, nothing, closed, failed };
    // One read of what the child wrote, for a caller that polls several children's fd() itself.
    Read read_available();
    // Waits until the child writes, closes its end, or `deadline` passes.
    Read read_until(std::chrono::steady_clock::time_point deadline);
    // The bytes read and not yet split off (split_lines).
    std::string& received() { return received_; }
    // Why the last read failed.
    const std::string& error() const { return error_; }

    // What becomes of a child that has not ended within the wait: killed, or left to end on its own (one that
    // announced it is done and is only exiting).
    enum class IfLate { kill, leave };
    // Closes the channel (a worker reads that as "finish"), then waits up to `within` for the child to end.
    // A child not gone by then is never waited for any longer: it is reaped later (core/reap.hpp).
    ChildExit finish(std::chrono::milliseconds within, IfLate late = IfLate::kill);
    // SIGKILL, then waits up to `within` for the kernel to let the child go.
    ChildExit kill(std::chrono::milliseconds within = kKilledChildGrace);

private:
    void close_channel();
    pid_t pid_ = -1;
    int fd_ = -1;
    std::string received_;
    std::string error_;
};

}  // namespace gpudx
