#pragma once
// Renderers for the systems operators already run. Each takes the same snapshot and diagnosis.
#include <string>
#include <string_view>

#include "model/diagnosis.hpp"
#include "model/node_record.hpp"
#include "model/slurm_reason.hpp"
#include "model/snapshot.hpp"
#include "render/prometheus.hpp"  // escape_prometheus_label

namespace gpudx {

// Xid events in the kernel-log window by code and GPU, as gpudx_xid_events_total gives them.
struct XidCount {
    int code = 0;
    std::string pci;
    uint64_t count = 0;
};
// Counted from the kernel log's tallies (every event, even past the cap on kept events), else from its events (a
// snapshot of an older gpudx); by code, then PCI address.
std::vector<XidCount> xid_counts(const KernelLog& log);

// What the Prometheus exposition adds beyond the snapshot and the diagnosis.
struct PrometheusOptions {
    NodeRecord node;         // the node's versions and GPUs, for the info metrics: make_node_record of the snapshot
    std::string node_class;  // the node's class in the compatibility matrix (`--matrix`); empty: none given or none fits
    // Counted already: used instead of xid_counts(s.kernel_log) (the agent keeps these, not the kernel log's tallies).
    const std::vector<XidCount>* xid_counts = nullptr;
};

// Prometheus text exposition for node_exporter's textfile collector and the agent's /metrics
// (docs/output-formats.md). Every label's values are bounded per node: no per-event labels.
std::string render_prometheus(const Snapshot& s, const Diagnosis& d, const PrometheusOptions& o);
// The same, the gpudx_finding series read from `findings` (`d`'s own are not read): the agent's /metrics, which
// reads them from its pack, no copy of every finding per scrape. So do the one-line formats below.
std::string render_prometheus(const Snapshot& s, const Diagnosis& d, FindingsView findings, const PrometheusOptions& o);

// The reason Slurm shows for a drained node, "gpudx: <check id> <GPU UUID> <PCI address>", for the most severe
// error (the UUID shortened when the whole would not fit). None when there is no error. Reads the first two
// findings only (sorted, the most severe first), kSlurmReasonFindingsRead: the agent's drain relies on it
// (SlurmDrain::kFindingsRead).
inline constexpr size_t kSlurmReasonFindingsRead = 2;
std::optional<SlurmReason> slurm_reason(const Diagnosis& d);

// node-problem-detector custom plugin: message of at most 80 characters; exit 0 OK, 1 problem, 2 unknown.
struct PluginResult {
    int exit_code;
    std::string message;
};
PluginResult node_problem_detector(const Diagnosis& d);
PluginResult node_problem_detector(const Diagnosis& d, FindingsView findings);

// Nagios/Icinga plugin: "GPUDX CRITICAL - ... | perfdata"; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
PluginResult nagios(const Snapshot& s, const Diagnosis& d);
PluginResult nagios(const Snapshot& s, const Diagnosis& d, FindingsView findings);

}  // namespace gpudx
