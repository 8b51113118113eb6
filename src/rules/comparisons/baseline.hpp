#pragma once
// Node records (`gpudx baseline`): what a healthy node looked like — which card sits where, its
// firmware and link, the driver stack around it — saved once and compared with every later snapshot,
// so a missing, moved or replaced card, a link trained lower, or a silent driver/kernel/VBIOS change
// is found before a job lands on the node (docs/baseline-matrix-fleet.md). The record: model/node_record.hpp.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/finding.hpp"
#include "model/node_record.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

// Everything the record needs, read from a snapshot: GPUs joined by PCI address across PCIe, procfs,
// NVML and CUDA; versions from the first layer that knows them. `recorded_at` is left empty.
NodeRecord make_node_record(const Snapshot& s);

// Small derivations shared with the matrix and the fleet report.
std::string driver_version_of(const Snapshot& s);
std::string fabric_manager_version_of(const Snapshot& s);

// Compares a snapshot with a saved record. Finding ids: baseline.gpu_missing, baseline.gpu_extra,
// baseline.gpu_moved, baseline.gpu_replaced, baseline.link_lower, baseline.vbios_changed,
// baseline.driver_changed, baseline.kernel_changed, baseline.cuda_changed, baseline.module_file_changed,
// baseline.library_changed, baseline.fabric_manager_changed, baseline.identity_unverified,
// baseline.xid_recurs_after_reboot (a reset/reboot Xid of the record's boot back on the same GPU in a later boot).
std::vector<Finding> diff_against_baseline(const NodeRecord& baseline, const Snapshot& now);
// Same, against a record made from the current snapshot; `source` names where the current values came from.
std::vector<Finding> diff_records(const NodeRecord& baseline, const NodeRecord& now, const std::string& baseline_path = {},
                                  const std::string& now_source = "snapshot");

// 0 no warning or error, 1 any error, 2 warnings only (the diagnose convention).
int exit_code_for(const std::vector<Finding>& findings);

}  // namespace gpudx
