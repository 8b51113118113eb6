#pragma once
// Driver calls can hang forever (a wedged GPU, a driver waiting on a lock held by a dead process).
// Each driver probe therefore runs in a child forked and watched by the supervisor (core/supervisor.hpp) that
// reports over a pipe, line by line:
//   "P <call>"     about to make this call (so a hang names it)
//   "L <n> <call>" the same from lane n: one of several threads of the child making calls side by side
//   "L <n>"        lane n has finished its calls
//   "R <json>"     the results so far (a later R replaces an earlier one)
//   "E"            finished
// The parent reads with poll() until the deadline, then SIGKILLs the child and never waits on it
// longer than it can afford: a child stuck in the kernel is left to be reaped later (core/reap.hpp).
// A line it cannot read (an R that is not JSON, an unknown tag, a last line cut off) is kept as a read problem.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/supervisor.hpp"

namespace gpudx {

// The child's end of the pipe. With GPUDX_PROBE_TRACE set in the environment, every call is also written
// to stderr with the time the previous one took, to find where a slow driver spends its time:
//   gpudx probe nvml +3.214 ms nvmlInit_v2   (the 3.214 ms were spent in the call before it)
//   gpudx probe nvml lane 1 +6.795 ms nvmlDeviceGetUUID(1)   (a lane's lines time that lane's calls)
// Thread-safe: lanes write from their own threads.
class ProbeChannel {
public:
    explicit ProbeChannel(int fd, std::string name = {});
    void progress(std::string_view call);
    void result(const nlohmann::json& j);
    void done();

    // One thread's calls, announced as its own: when lanes run side by side, the parent must know each one's
    // call in flight, not only the last announced.
    class Lane {
    public:
        void progress(std::string_view call);
        void finished();

    private:
        friend class ProbeChannel;
        Lane(ProbeChannel& ch, unsigned n);
        ProbeChannel& ch_;
        unsigned n_;
        std::chrono::steady_clock::time_point last_;
    };
    Lane lane(unsigned n) { return Lane(*this, n); }

private:
    void write_line(std::string_view tag, std::string_view text);
    // `lane`: the lane that made the call, none for the main thread.
    void trace(std::optional<unsigned> lane, std::chrono::steady_clock::time_point& last, std::string_view what);
    int fd_;
    std::string name_;
    bool tracing_ = false;
    std::chrono::steady_clock::time_point last_;
    std::mutex write_mutex_;
};

struct ProbeSpec {
    std::string name;  // for messages: "nvml", "cuda", "cuda(all)"
    std::function<void(ProbeChannel&)> body;  // runs in the child
    std::chrono::milliseconds deadline{5000};
};

enum class ProbeEnd { finished, timed_out, died, not_started };

struct ProbeOutcome {
    ProbeEnd end = ProbeEnd::not_started;
    std::optional<nlohmann::json> result;  // the last R line
    std::string last_call;                 // the last P line
    std::map<unsigned, std::string> busy_lanes;  // lane -> its call in flight, for lanes not yet finished
    std::string message;                   // for died / not_started: why
    std::vector<std::string> read_problems;  // lines that could not be read, each with an excerpt
    double duration_ms = 0;

    // The calls that had not returned when the probe was stopped: each busy lane's, else the last P line's
    // (a lane runs while the main thread waits for it, so a busy lane is where the child is stuck).
    std::vector<std::string> calls_in_flight() const;
};

// One forked probe child as the parent reads it.
struct ProbeProcess {
    Child child;
    std::chrono::steady_clock::time_point start, deadline;
};

// Probe children already forked, still to be read. Forking happens in start_probes, in the caller's thread:
// call it before starting other threads (core/supervisor.hpp says why). Children never waited for are killed.
class RunningProbes {
public:
    // Reads every child until it has finished or hit its deadline (then it is killed); any thread may call it.
    std::vector<ProbeOutcome> wait();

private:
    friend RunningProbes start_probes(const std::vector<ProbeSpec>& specs);
    std::vector<ProbeProcess> processes_;
    std::vector<ProbeOutcome> outcomes_;
};

// Forks every probe at once (they run concurrently).
RunningProbes start_probes(const std::vector<ProbeSpec>& specs);
// start_probes, then wait: returns when each has finished or hit its deadline.
std::vector<ProbeOutcome> run_probes(const std::vector<ProbeSpec>& specs);

// Pure: splits complete lines off `buffer` and applies them to `out` (a line it cannot read becomes one of
// out.read_problems); returns true when "E" was seen.
bool consume_probe_lines(std::string& buffer, ProbeOutcome& out);

}  // namespace gpudx
