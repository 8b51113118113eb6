#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

// The sources of evidence a snapshot is collected from, named in it as their statuses are ("kernel_log",
// "nvml"); rules declare which ones they read.
enum class Collector : uint8_t {
    host, pcie, module, kernel_log, libraries, devices, environment, nvml, cuda, rocm_smi,
    processes,  // only with diagnose --pid / --slurm-job
};
inline constexpr Collector kAllCollectors[] = {
    Collector::host,    Collector::pcie,        Collector::module, Collector::kernel_log, Collector::libraries,
    Collector::devices, Collector::environment, Collector::nvml,   Collector::cuda,       Collector::rocm_smi,
    Collector::processes};
std::string_view to_string(Collector c);
std::optional<Collector> parse_collector(std::string_view name);

enum class CollectorState { ok, no_data, error, timed_out };

// One file or call a collector could not read, and why; the rest of its layer still counts.
struct ReadProblem {
    std::string path;
    std::string message;
};

// Every collector records how it went, so one failure never hides the others' results.
struct CollectorStatus {
    std::string name;  // to_string(Collector), as the snapshot writes it
    CollectorState state = CollectorState::no_data;
    std::string message;  // for no_data, error and timed_out: why
    std::string path;     // the file or call it concerns, when one
    double duration_ms = 0;
    std::vector<ReadProblem> problems;
};

const char* to_string(CollectorState s);

}  // namespace gpudx
