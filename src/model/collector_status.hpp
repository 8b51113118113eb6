#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/named_enum.hpp"

namespace gpudx {

// The sources of evidence a snapshot is collected from, named in it as their statuses are ("kernel_log",
// "nvml"); rules declare which ones they read. Declared here, once:
//
// The host collectors, in the order a snapshot lists them (take_snapshot runs them side by side): each reads one
// layer of the node into the snapshot's member of its name (Snapshot::pcie ...) with collect_<name>(ctx, layer),
// defined in its own file of collect/ and registered from this list (collect/collectors.hpp). A new one is a row
// here, its layer in the snapshot, its file and its test; it may read nothing another collector writes.
#define GPUDX_HOST_COLLECTORS(X) \
    X(host) X(pcie) X(module) X(kernel_log) X(libraries) X(devices) X(environment) X(infiniband)
// Then the services the NVSwitch fabric needs (collect/services.hpp: asked only when the host layers show an
// NVSwitch), the driver libraries, each probed in a child under its deadline (collect_driver), and the processes of
// diagnose --pid / --slurm-job.
#define GPUDX_COLLECTORS(X) GPUDX_HOST_COLLECTORS(X) X(services) X(nvml) X(cuda) X(rocm_smi) X(processes)
GPUDX_NAMED_ENUM(Collector, GPUDX_COLLECTORS)

inline constexpr auto kAllCollectors = values_of(kCollectorNames);
constexpr std::string_view to_string(Collector c) { return name_of(c); }
constexpr std::optional<Collector> parse_collector(std::string_view name) { return parse_name<Collector>(name); }

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
