#pragma once
// The plain data a node yields: collectors fill it, checks read it, and it round-trips through JSON
// (docs/snapshot-format.md), so a snapshot saved on one node can be diagnosed anywhere.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "model/collector_status.hpp"
#include "model/devices.hpp"
#include "model/driver.hpp"
#include "model/environment.hpp"
#include "model/infiniband.hpp"
#include "model/kernel_log.hpp"
#include "model/libraries.hpp"
#include "model/module.hpp"
#include "model/pcie.hpp"
#include "model/process.hpp"
#include "model/services.hpp"

namespace gpudx {

inline constexpr int kSnapshotSchemaVersion = 1;

struct Snapshot {
    int schema_version = kSnapshotSchemaVersion;
    std::string gpudx_version;
    std::string collected_at;  // ISO 8601 UTC
    std::string root;          // what --root was
    HostInfo host;
    PcieLayer pcie;
    ModuleLayer module;
    KernelLog kernel_log;
    LibrariesLayer libraries;
    DevicesLayer devices;
    EnvironmentLayer environment;
    InfinibandLayer infiniband;  // absent from older snapshots: not read (its collector's status absent too)
    ServicesLayer services;      // likewise
    NvmlLayer nvml;
    CudaLayer cuda;
    RocmSmiLayer rocm_smi;  // in JSON only when probed (rocm_smi.probed)
    std::vector<CollectorStatus> collectors;
    std::vector<ProcessView> processes;  // `--pid`: each process's own view; in JSON only when there are some
    std::vector<NvmlEvent> nvml_events;  // the agent: NVML's recent events; in JSON only when there are some

    const CollectorStatus* collector(std::string_view name) const;
    const CollectorStatus* collector(Collector c) const;
    // That collector ran and its state is ok: its layer holds data to judge.
    bool collected(Collector c) const;
};

nlohmann::json snapshot_to_json(const Snapshot& s);
// Rejects a newer schema version or a document that is not a gpudx snapshot with a clear message.
Result<Snapshot> snapshot_from_json(const nlohmann::json& j);
Result<Snapshot> load_snapshot_file(const std::string& path);

}  // namespace gpudx
