#pragma once
// `gpudx fleet report`: many saved snapshots held against the compatibility matrix. Nodes are grouped by
// class; per class the report gives the nodes that diverge and how, the spread of driver, kernel, VBIOS
// and CUDA versions, nodes with fewer GPUs than their class, each node's health (its findings: from a saved
// diagnosis of the node, or the rules run on its snapshot) by finding id, and Xid counts by code and node.
// Files that are truncated or are neither snapshots nor diagnoses are named and skipped; the rest is still
// reported.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"

namespace gpudx {

struct FleetXid {
    std::string pci;
    int code = 0;
};

// Where a node's health (its findings) came from.
enum class HealthSource {
    none,       // not known: the rules could not run on the snapshot (health_error says why)
    diagnosis,  // a saved `gpudx diagnose --format json` (or an agent's /v1/status) of the node
    snapshot,   // the rules run on the node's snapshot by the report
};
const char* to_string(HealthSource s);

// What the report needs from one node: its snapshot file, or only a saved diagnosis of it.
struct FleetNode {
    std::string file;
    std::string collected_at;
    NodeRecord record;
    std::vector<FleetXid> xids;
    bool has_snapshot = true;  // false: only a saved diagnosis was given (versions and GPUs unknown)
    HealthSource health_source = HealthSource::none;
    std::string health_file;      // the diagnosis file, or the snapshot the rules ran on
    std::string health_error;     // why health_source is none
    std::vector<Finding> health;  // the warning and error findings, without evidence and next steps
};

// A saved diagnosis: `gpudx diagnose --format json`, or `/v1/status` of a running agent saved as a file.
struct FleetDiagnosis {
    std::string file, host, collected_at;
    std::vector<Finding> findings;  // warnings and errors only, as FleetNode::health
};

// Reads only the fields the report uses, with a SAX reader that builds no JSON document (the kernel log's
// lines, device holders, environment and collector details are only lexed). Errors name the problem
// ("truncated, not valid JSON: ...", "not a gpudx snapshot ...", "snapshot does not match the schema: ...").
Result<FleetNode> parse_fleet_snapshot(std::string_view json_text);
// The snapshot with only its FleetFields (model/snapshot_keys.hpp) read, the rest left at the defaults.
Result<Snapshot> read_fleet_fields(std::string_view json_text);
// The whole snapshot by the same streaming reader: what snapshot_from_json gives for a snapshot gpudx wrote, at
// about a third of its cost (no document is built, nor copied).
Result<Snapshot> read_whole_snapshot(std::string_view json_text);
// The node and its health from one read of its snapshot: the whole snapshot, reduced to the record and judged
// by the rules. When a field the record does not need is not what the schema says, the record is still made and
// the health is unknown (health_error says why), as from parse_fleet_snapshot and health_from_snapshot.
Result<FleetNode> judge_fleet_snapshot(std::string_view json_text);
Result<FleetNode> read_fleet_snapshot(const std::string& path, std::string& buffer);

// A saved diagnosis read from its JSON; errors name the problem ("saved diagnosis does not match its format:
// findings[2].severity ...").
Result<FleetDiagnosis> parse_fleet_diagnosis(std::string_view json_text);
// A snapshot (judged: judge_fleet_snapshot) or a saved diagnosis, told apart by their keys (a diagnosis has
// "verdict" and "findings").
using FleetInput = std::variant<FleetNode, FleetDiagnosis>;
Result<FleetInput> read_fleet_input(const std::string& path, std::string& buffer);

// The node's health from its snapshot: the whole snapshot read and the rules run on it (rules/engine/diagnose.hpp),
// the warning and error findings kept.
Result<std::vector<Finding>> health_from_snapshot(std::string_view json_text);
// Gives each node the newest saved diagnosis of its hostname, when that is not older than its snapshot; a
// diagnosis with no snapshot of its host becomes a node of its own (has_snapshot false). Diagnoses left out
// (older than the snapshot, or than another diagnosis of the host) are returned as (file, newer file).
std::vector<std::pair<std::string, std::string>> attach_diagnoses(std::vector<FleetNode>& nodes,
                                                                  std::vector<FleetDiagnosis> diagnoses);

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
