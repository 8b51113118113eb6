#pragma once
// The agent's watcher of NVML events: `gpudx nvml-events` run as a child (gpu_api/nvml/events.hpp), its lines
// read in the agent's main loop. A child that goes quiet past its limit (a setup call or a wait inside a wedged
// driver) is killed and started again later; the agent never waits on the driver itself.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/spawn.hpp"
#include "model/driver.hpp"

namespace gpudx {

// One line of the child, read.
struct NvmlWatchLine {
    enum class Kind { call, ready, event, alive, error, unavailable, unreadable };
    Kind kind = Kind::unreadable;
    std::string call;    // call, error
    std::string reason;  // error, unavailable; unreadable: what was wrong
    NvmlEvent event;     // event
    std::vector<std::string> watching;  // ready: "GPU-... (0000:..): xid, double_bit_ecc" per registered GPU
};

// Parses one line; one that is not a line of the protocol is `unreadable`, with an excerpt.
NvmlWatchLine parse_nvml_watch_line(std::string_view line);

struct NvmlWatchOptions {
    std::vector<std::string> command;          // `gpudx nvml-events ...`; empty: no watcher
    std::chrono::milliseconds quiet_limit{10000};  // no line for this long: hung
    std::chrono::milliseconds restart_after{60000};
};

class NvmlEventWatcher {
public:
    using Clock = std::chrono::steady_clock;
    explicit NvmlEventWatcher(NvmlWatchOptions o) : o_(std::move(o)) {}

    bool enabled() const { return !o_.command.empty(); }
    // The child's output to poll, -1 when none runs.
    int fd() const { return child_.running() ? child_.fd() : -1; }
    // When check() must next run (a restart due, the quiet limit), none when nothing is pending.
    std::optional<Clock::time_point> next_check() const;

    // What happened, for the agent to note, record or act on.
    struct Outcome {
        std::vector<NvmlEvent> events;
        std::vector<std::string> notes;  // started, ready, unavailable, hung, ended, errors
        bool restarted_or_lost = false;  // a child ended or was killed: the driver layers deserve a new look
    };
    // Starts the child when due, reads what it wrote, and kills it when it has been quiet too long.
    Outcome check(Clock::time_point now);

private:
    void start(Clock::time_point now, Outcome& out);
    void ended(Clock::time_point now, std::string why, Outcome& out);
    void take(const NvmlWatchLine& l, Outcome& out);

    NvmlWatchOptions o_;
    SpawnedProgram child_;
    std::string buffer_;
    Clock::time_point last_heard_{};
    std::string last_call_;
    std::optional<Clock::time_point> start_at_ = Clock::time_point{};  // due at once
    std::string last_unavailable_, last_error_;
    bool ready_ = false;
};

}  // namespace gpudx
