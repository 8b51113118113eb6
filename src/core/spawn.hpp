#pragma once
// Another program run with its output on a pipe the caller reads: scontrol, the agent's own collection and
// NVML event children, the acceptance probes. posix_spawn, not fork: these callers may have threads, and a
// forked child of a threaded process can inherit a lock another thread held (core/supervisor.hpp runs gpudx's
// own code in forked children; this runs programs).
//   - stdin is /dev/null; stdout (and stderr, as asked) go to the pipe;
//   - the program starts with no signal blocked and SIGPIPE and SIGXFSZ at their defaults, whatever the
//     caller blocks or ignores (the agent blocks SIGTERM and ignores SIGPIPE);
//   - in its own process group, so a kill reaches what it started too (a wrapper script's children).
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace gpudx {

struct SpawnOptions {
    enum class Stderr { inherit, pipe, discard };
    Stderr stderr_to = Stderr::inherit;
    bool search_path = false;  // argv[0] looked up in PATH (posix_spawnp)
    bool own_process_group = true;
    // The whole environment of the program, "NAME=value" each; none: the caller's.
    std::optional<std::vector<std::string>> environment;
};

class SpawnedProgram {
public:
    // The error's path is argv[0]; its message says which call failed.
    static Result<SpawnedProgram> start(const std::vector<std::string>& argv, const SpawnOptions& o = {});

    SpawnedProgram() = default;
    SpawnedProgram(SpawnedProgram&& other) noexcept;
    SpawnedProgram& operator=(SpawnedProgram&& other) noexcept;
    SpawnedProgram(const SpawnedProgram&) = delete;
    SpawnedProgram& operator=(const SpawnedProgram&) = delete;
    // A program still running is killed; one the kernel does not let go within kKilledChildGrace is reaped
    // in the background.
    ~SpawnedProgram();

    pid_t pid() const { return pid_; }
    // The read end of its output; -1 once closed.
    int fd() const { return fd_; }
    bool running() const { return pid_ > 0; }

    enum class Read { data, nothing, closed, failed };
    // Appends what the program wrote to `into`, waiting until `deadline` for something to arrive; `closed`:
    // EOF (it exited or closed its output).
    Read read_until(std::string& into, std::chrono::steady_clock::time_point deadline);
    // One read without waiting, for a caller that polls fd() itself.
    Read read_available(std::string& into);

    // SIGKILL to the program (and its process group).
    void kill();
    // Closes the output and waits up to `within` for the program to end: waitpid's status, none when it is
    // still running (kill() it, or leave it to the destructor).
    std::optional<int> wait(std::chrono::milliseconds within);

private:
    void end();
    void close_output();
    pid_t pid_ = -1;
    int fd_ = -1;
    bool group_ = false;
};

// How a program ended, as one phrase: "exited 3", "was killed by signal 9".
std::string describe_exit_status(int status);

}  // namespace gpudx
