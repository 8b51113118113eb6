#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/root.hpp"

namespace gpudx {

struct CollectOptions {
    // A saved kernel log to read instead of /dev/kmsg (or a capture's _commands/dmesg.txt).
    std::optional<std::string> kernel_log_file;
    // What the agent read of the log before (docs/agent.md): a followed file's earlier generations (rotated,
    // truncated or rewritten away), read before the file as it is now; or /dev/kmsg records, of which those
    // the ring has overwritten since (numbered before its oldest) are read first. So nothing the agent read
    // is lost to a rotation or a ring that wrapped. Called once, it hands each line to `take`, oldest first, where
    // the agent keeps them (up to 20,000 lines, not copied at each re-read); empty: none.
    std::function<void(const std::function<void(std::string_view line)>& take)> kernel_log_earlier_lines;
    // Keep kernel-log lines at or after this many seconds since boot, or this wall time; empty: current boot.
    std::string since;
    // The environment of the job being diagnosed: the process environment on a live root, the capture's
    // _commands/environment.txt on a replayed one (see load_environment).
    std::map<std::string, std::string> environment;
    // Deadline for each driver layer (NVML, CUDA).
    std::chrono::milliseconds driver_deadline{5000};
    // The GPU health's second sample, this long after the first when the first calls for it; 0: one sample.
    unsigned health_interval_ms = 1000;
    // Counters judged by their growth (AER, InfiniBand port errors) are read a second time this long after the
    // first, and only when the first reading shows errors (docs/host-health.md); 0: never a second reading.
    // Set from --health-interval, as the GPU health's second sample is.
    std::chrono::milliseconds counter_interval{1000};
    bool probe_driver = true;   // false: skip NVML and CUDA (host layers only)
    // Why the driver layers were not probed, recorded as the nvml and cuda collectors' message; empty: --no-driver.
    std::string driver_not_probed_reason;
    bool all_devices = false;   // also evaluate CUDA with CUDA_VISIBLE_DEVICES/CUDA_DEVICE_ORDER unset
    bool probe_cuda = true;     // false: NVML only (cuInit alone costs ~430 ms on an H200 node)
    // Directory holding the stand-in or real driver libraries to load instead of the loader's choice.
    std::optional<std::string> driver_library_dir;
    // Words whose kernel-log lines are kept beside the parser's own topics: the signature catalogue's gates.
    std::vector<std::string> kernel_log_words;
    // Processes to read as each sees the GPU stack (`--pid`, `--slurm-job`): the snapshot's processes.
    std::vector<int> pids;
};

struct CollectContext {
    const Root& root;
    const CollectOptions& options;
};

// Environment variables as the job sees them: the live process environment, or the capture's record.
std::map<std::string, std::string> load_environment(const Root& root);

}  // namespace gpudx
