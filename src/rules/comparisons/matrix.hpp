#pragma once
// The compatibility matrix (`gpudx matrix check`): a TOML file of node classes. A class says which nodes
// it covers (GPU model and count, hostname patterns) and the set they were tested with (driver branches
// and versions, kernels, VBIOS, Fabric Manager, CUDA) plus acceptance floors. Anything outside the tested
// set is a divergence. Schema and examples: docs/baseline-matrix-fleet.md, examples/matrix.toml.
#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/finding.hpp"
#include "core/error.hpp"
#include "model/accept_thresholds.hpp"
#include "model/snapshot.hpp"
#include "rules/comparisons/baseline.hpp"

namespace gpudx {

inline constexpr int kMatrixSchemaVersion = 1;

struct CalendarDate {
    int year = 0, month = 0, day = 0;
    auto operator<=>(const CalendarDate&) const = default;
    std::string str() const;  // 2026-06-30
    static std::optional<CalendarDate> parse(std::string_view text);  // YYYY-MM-DD
};
CalendarDate today_utc();

struct ClassMatch {
    std::string gpu_model;               // glob over the GPU model ("NVIDIA H200*"); empty: any
    std::optional<unsigned> gpu_count;   // GPUs a node of the class has; fewer is a divergence
    std::vector<std::string> hostnames;  // globs; empty: any hostname
};

// Allowed values; an empty list means "not constrained". Entries are globs, compared case-insensitively.
struct TestedSet {
    std::vector<std::string> driver_branches;  // "580"
    std::vector<std::string> driver_versions;  // "580.159.04", "580.*"
    std::vector<std::string> kernels;          // "6.18.44-fc-v657-gpu", "6.18.*"
    std::vector<std::string> vbios;            // "96.00.a5.00.1a"
    std::vector<std::string> fabric_manager;   // Fabric Manager versions
    std::vector<std::string> cuda;             // CUDA driver API version "13.0"
};

struct NodeClass {
    std::string name;
    std::string owner;
    std::string description;
    CalendarDate review_by;
    ClassMatch match;
    TestedSet tested;
    std::optional<AcceptThresholds> accept;
    unsigned line = 0;  // where the class starts in the file
};

struct Matrix {
    std::string path;
    std::vector<NodeClass> classes;  // file order: the first class that fits wins
};

// Parses and validates matrix TOML. A syntax error, an unknown key, a wrong type or a missing required
// key is an error whose message starts with "SOURCE:LINE:" (source = the file name given).
Result<Matrix> parse_matrix(std::string_view toml_text, std::string_view source_name);
Result<Matrix> load_matrix(const std::string& path);

// Which class a node belongs to. Candidates are the classes whose hostname patterns and GPU model fit; among
// them the first whose GPU count equals the node's, else the one with the smallest count above it (the node
// lost cards), else the first. When no class fits by model, a class that fits by hostname alone is taken
// (the GPU model is then a divergence).
struct Classification {
    const NodeClass* node_class = nullptr;
    bool model_mismatch = false;           // chosen by hostname only
    std::vector<std::string> also_fitting;  // other classes that fit, for the operator to disambiguate
};
Classification classify_node(const Matrix& m, const NodeRecord& node);

struct MatrixCheck {
    const NodeClass* node_class = nullptr;
    std::vector<std::string> also_fitting;
    // Finding ids: matrix.no_class, matrix.review_overdue, matrix.gpu_model, matrix.gpu_count,
    // matrix.driver_untested, matrix.kernel_untested, matrix.vbios_untested, matrix.fabric_manager_untested,
    // matrix.cuda_untested, matrix.value_unknown (info: the class constrains a value the snapshot lacks).
    std::vector<Finding> findings;
    int exit_code = 0;  // 0 conforming, 1 an error divergence (cards missing), 2 warnings only
};
MatrixCheck check_node_against_matrix(const Matrix& m, const NodeRecord& node, const CalendarDate& today);
MatrixCheck check_against_matrix(const Matrix& m, const Snapshot& s, const CalendarDate& today);

// The acceptance floors of the class this node belongs to; nullopt when no class fits or it sets none.
std::optional<AcceptThresholds> thresholds_for(const Matrix& m, const Snapshot& s);
const NodeClass* class_for(const Matrix& m, const Snapshot& s);

// Case-insensitive shell glob (fnmatch) over any of `patterns`.
bool matches_any(const std::vector<std::string>& patterns, std::string_view value);

nlohmann::json matrix_check_to_json(const Matrix& m, const NodeRecord& node, const MatrixCheck& c);

}  // namespace gpudx
