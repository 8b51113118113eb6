#pragma once
// `gpudx fleet report`: many saved snapshots held against the compatibility matrix. Nodes are grouped by
// class; per class the report gives the nodes that diverge and how, the spread of driver, kernel, VBIOS
// and CUDA versions, nodes with fewer GPUs than their class, and Xid counts by code and node. Files that
// are truncated or are not snapshots are named and skipped; the rest is still reported.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "rules/baseline.hpp"
#include "rules/matrix.hpp"

namespace gpudx {

struct FleetXid {
    std::string pci;
    int code = 0;
};

// What the report needs from one snapshot file.
struct FleetNode {
    std::string file;
    std::string collected_at;
    NodeRecord record;
    std::vector<FleetXid> xids;
};

// Reads only the fields the report uses, with a SAX reader that builds no JSON document (the kernel log's
// lines, device holders, environment and collector details are only lexed). Errors name the problem
// ("truncated, not valid JSON: ...", "not a gpudx snapshot ...", "snapshot does not match the schema: ...").
Result<FleetNode> parse_fleet_snapshot(std::string_view json_text);
// The snapshot with only its FleetFields (model/snapshot_keys.hpp) read, the rest left at the defaults.
Result<Snapshot> read_fleet_fields(std::string_view json_text);
Result<FleetNode> read_fleet_snapshot(const std::string& path, std::string& buffer);

struct FleetProblem {
    std::string file;
    std::string reason;
};

// Files named, and the *.json files under directories named (recursively), in a stable order. Paths that
// do not exist are added to `problems`.
std::vector<std::string> expand_fleet_inputs(const std::vector<std::string>& args, std::vector<FleetProblem>& problems);

struct FleetNodeDivergence {
    std::string node, file;
    std::vector<Finding> findings;  // warnings and errors from the matrix check, the class-level review excluded
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
    size_t nodes = 0, conforming = 0;
    VersionCounts drivers, kernels, cuda, fabric_manager;  // per node
    VersionCounts vbios;                                   // per GPU
    std::map<std::string, size_t> divergence_nodes;        // finding id -> nodes with it
    std::vector<FleetNodeDivergence> diverging;
    std::vector<FleetMissingGpus> missing;
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
    int exit_code = 0;  // 0 all conform; 1 a node lost cards or has a wrong model; 2 other divergence or skipped input
};

struct FleetOptions {
    unsigned jobs = 2;  // parsing threads
    CalendarDate today = today_utc();
    // Called from the collecting thread as files finish (done, total); for a progress line on a terminal.
    std::function<void(size_t, size_t)> progress;
};

// Reads `files` on a small thread pool and builds the report. Never throws for bad input.
FleetReport build_fleet_report(const Matrix& matrix, const std::vector<std::string>& files,
                               std::vector<FleetProblem> input_problems, const FleetOptions& options);
// Builds the report from nodes already read (unit tests; nodes in the order given).
FleetReport summarize_fleet(const Matrix& matrix, std::vector<FleetNode> nodes, std::vector<FleetProblem> skipped,
                            const CalendarDate& today);

nlohmann::json fleet_report_to_json(const FleetReport& r);

}  // namespace gpudx
