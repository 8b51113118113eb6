#pragma once
// `gpudx fleet report`: many saved snapshots held against the compatibility matrix. Nodes are grouped by
// class; per class the report gives the nodes that diverge and how, the spread of driver, kernel, VBIOS
// and CUDA versions, nodes with fewer GPUs than their class, each node's health (its findings: from a saved
// diagnosis of the node, or the rules run on its snapshot) by finding id, and Xid counts by code and node.
// Files that are truncated or are neither snapshots nor diagnoses are named and skipped; the rest is still
// reported. The report: model/fleet.hpp.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "model/fleet.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"

namespace gpudx {

struct FleetXid {
    std::string pci;
    int code = 0;
};

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
// the health is unknown (health_error says why), as from parse_fleet_snapshot and health_from_snapshot. With a
// matrix, the rules judge as `diagnose --matrix` does: the facts the node's class expects (its GPUs' NVLinks, its
// InfiniBand ports) are the matrix check's divergences, not findings of its health again.
Result<FleetNode> judge_fleet_snapshot(std::string_view json_text, const Matrix* matrix = nullptr);
Result<FleetNode> read_fleet_snapshot(const std::string& path, std::string& buffer);

// A saved diagnosis read from its JSON; errors name the problem ("saved diagnosis does not match its format:
// findings[2].severity ...").
Result<FleetDiagnosis> parse_fleet_diagnosis(std::string_view json_text);
// A snapshot (judged: judge_fleet_snapshot) or a saved diagnosis, told apart by their keys (a diagnosis has
// "verdict" and "findings").
using FleetInput = std::variant<FleetNode, FleetDiagnosis>;
Result<FleetInput> read_fleet_input(const std::string& path, std::string& buffer, const Matrix* matrix = nullptr);

// The node's health from its snapshot: the whole snapshot read and the rules run on it (rules/engine/diagnose.hpp),
// the warning and error findings kept; node_class as DiagnoseOptions::node_class.
Result<std::vector<Finding>> health_from_snapshot(std::string_view json_text, const NodeClass* node_class = nullptr);
// Gives each node the newest saved diagnosis of its hostname, when that is not older than its snapshot; a
// diagnosis with no snapshot of its host becomes a node of its own (has_snapshot false). Diagnoses left out
// (older than the snapshot, or than another diagnosis of the host) are returned as (file, newer file).
std::vector<std::pair<std::string, std::string>> attach_diagnoses(std::vector<FleetNode>& nodes,
                                                                  std::vector<FleetDiagnosis> diagnoses);

// Files named, and the *.json files under directories named (recursively), in a stable order. Paths that
// do not exist are added to `problems`.
std::vector<std::string> expand_fleet_inputs(const std::vector<std::string>& args, std::vector<FleetProblem>& problems);

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

}  // namespace gpudx
