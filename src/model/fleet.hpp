#pragma once
// The fleet report (`gpudx fleet report`, docs/baseline-matrix-fleet.md): per class of the compatibility matrix the
// nodes that diverge and how, the spread of versions, nodes with fewer GPUs than their class, each node's health by
// finding id, and Xid counts by code and node; as JSON. fleet/fleet.hpp reads the snapshots and builds it;
// render/fleet.hpp prints it as text and CSV.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/finding.hpp"

namespace gpudx {

// Where a node's health (its findings) came from.
enum class HealthSource {
    none,       // not known: the rules could not run on the snapshot (health_error says why)
    diagnosis,  // a saved `gpudx diagnose --format json` (or an agent's /v1/status) of the node
    snapshot,   // the rules run on the node's snapshot by the report
};
const char* to_string(HealthSource s);

// A file the report could not use, and why.
struct FleetProblem {
    std::string file;
    std::string reason;
};

struct FleetNodeDivergence {
    std::string node, file;
    std::vector<Finding> findings;  // warnings and errors from the matrix check, the class-level review excluded
};

// A node whose health has a warning or an error finding, or is unknown.
struct FleetUnhealthyNode {
    std::string node, file;  // file: where its findings came from
    HealthSource source = HealthSource::none;
    std::string error;  // source none: why
    std::vector<Finding> findings;
};

struct FleetFindingCount {
    Severity severity = Severity::warning;
    Layer layer = Layer::pcie;
    size_t nodes = 0;
};

struct FleetMissingGpus {
    std::string node, file;
    size_t seen = 0, expected = 0;
};

using VersionCounts = std::map<std::string, size_t>;  // version -> count ("" counts as "unknown")

struct FleetClassReport {
    std::string name;  // "(unclassified)" for nodes no class fits
    std::string owner;
    std::string review_by;
    bool review_overdue = false;
    std::optional<unsigned> expected_gpus;
    size_t nodes = 0, conforming = 0;  // conforming: within the tested set and no warning or error finding
    size_t healthy = 0;                // health known, no warning or error finding
    size_t health_unknown = 0;         // the rules could not run on the snapshot
    size_t health_only = 0;            // known only from a saved diagnosis: versions unknown, matrix not checked
    VersionCounts drivers, kernels, cuda, fabric_manager;  // per node
    VersionCounts vbios;                                   // per GPU
    std::map<std::string, size_t> divergence_nodes;        // finding id -> nodes with it
    std::vector<FleetNodeDivergence> diverging;
    std::vector<FleetMissingGpus> missing;
    std::map<std::string, FleetFindingCount> finding_nodes;  // finding id -> nodes with it
    std::vector<FleetUnhealthyNode> unhealthy;
};

struct FleetXidNode {
    std::string node, file, node_class;
    std::map<int, size_t> by_code;
    size_t total = 0;
};

struct FleetReport {
    std::string matrix_path;
    std::string generated_at;
    size_t inputs = 0;  // files considered
    size_t nodes = 0;   // snapshots read and counted
    std::vector<FleetProblem> skipped;
    std::vector<std::pair<std::string, std::string>> superseded;  // (older file, newer file) of the same hostname
    std::vector<FleetClassReport> classes;  // matrix order, then (unclassified) when any node fits no class
    std::map<int, size_t> xids_by_code;
    std::map<int, size_t> xid_nodes_by_code;  // nodes that logged each code
    std::vector<FleetXidNode> xids_by_node;   // most Xids first
    double read_seconds = 0;
    size_t health_saved = 0, health_computed = 0, health_unknown = 0;  // nodes by where their health came from
    // 0 all conform; 1 a node lost cards, has a wrong model or an error finding; 2 other divergence, a warning
    // finding, health unknown or skipped input
    int exit_code = 0;
};

nlohmann::json fleet_report_to_json(const FleetReport& r);

}  // namespace gpudx
