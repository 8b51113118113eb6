#pragma once
// One collector per source of evidence. Each fills its layer and returns how it went;
// parse_* functions beside each reader are pure (text in, struct out) and unit-tested with literal text.
#include <functional>
#include <memory>

#include "collect/context.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

// The host collectors, one per row of GPUDX_HOST_COLLECTORS (model/collector_status.hpp), each defined in its own
// file: collect_host(const CollectContext&, HostInfo&), collect_pcie(..., PcieLayer&) ... collect_environment.
#define GPUDX_DECLARE_HOST_COLLECTOR(name) \
    CollectorStatus collect_##name(const CollectContext&, decltype(Snapshot::name)&);
GPUDX_HOST_COLLECTORS(GPUDX_DECLARE_HOST_COLLECTOR)
#undef GPUDX_DECLARE_HOST_COLLECTOR

// Runs the host collector `c` (a row of GPUDX_HOST_COLLECTORS) into its layer of `s`, through run_collector.
CollectorStatus run_host_collector(Collector c, const CollectContext& ctx, Snapshot& s);
// NVML and CUDA, each under options.driver_deadline; statuses named "nvml" and "cuda". With `rocm_smi`, and when
// the node has a KFD topology (an AMD GPU driver), ROCm SMI too beside them, status "rocm_smi".
std::vector<CollectorStatus> collect_driver(const CollectContext&, NvmlLayer&, CudaLayer&,
                                            RocmSmiLayer* rocm_smi = nullptr);

// collect_driver in two halves, for a caller that collects other layers meanwhile: start_driver_probes forks the
// probe children and must run before the caller starts threads (core/child_probe.hpp says why);
// finish_driver_probes reads them, from any thread.
struct DriverProbes;
struct DriverProbesDeleter {
    void operator()(DriverProbes*) const;
};
using StartedDriverProbes = std::unique_ptr<DriverProbes, DriverProbesDeleter>;
StartedDriverProbes start_driver_probes(const CollectContext&, bool ask_rocm_smi);
std::vector<CollectorStatus> finish_driver_probes(const CollectContext&, StartedDriverProbes, NvmlLayer&, CudaLayer&,
                                                  RocmSmiLayer* rocm_smi);

// Every layer; never throws; one collector's failure never loses the others.
Snapshot take_snapshot(const Root& root, const CollectOptions& options);

// What a /proc/PID/cgroup file says about a container (runtime, id, cgroup), added to what earlier evidence found.
void add_container_from_cgroup(const Root& root, const std::string& path, ContainerInfo& c);

// Helpers for collectors.
CollectorStatus status_ok(Collector c);
CollectorStatus status_no_data(Collector c, std::string why, std::string path = {});
CollectorStatus status_error(Collector c, const Error& e);

// Runs one collector, timed, and turns anything it throws into its error status rather than a lost run (a
// fault-isolation boundary, docs/error-policy.md).
CollectorStatus run_collector(Collector c, const std::function<CollectorStatus()>& collect);

}  // namespace gpudx
