#pragma once
// The compatibility matrix (`gpudx matrix check`): a TOML file of node classes. A class says which nodes
// it covers (GPU model and count, hostname patterns) and the set they were tested with (driver branches
// and versions, kernels, VBIOS, Fabric Manager, CUDA) plus acceptance floors. Anything outside the tested
// set is a divergence. Schema and examples: docs/baseline-matrix-fleet.md, examples/matrix.toml. The matrix and
// what a check of a node finds: model/matrix.hpp.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "model/accept_thresholds.hpp"
#include "model/matrix.hpp"
#include "model/node_record.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

inline constexpr int kMatrixSchemaVersion = 1;

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

MatrixCheck check_node_against_matrix(const Matrix& m, const NodeRecord& node, const CalendarDate& today);
MatrixCheck check_against_matrix(const Matrix& m, const Snapshot& s, const CalendarDate& today);

// The acceptance floors of the class this node belongs to; nullopt when no class fits or it sets none.
std::optional<AcceptThresholds> thresholds_for(const Matrix& m, const Snapshot& s);
const NodeClass* class_for(const Matrix& m, const Snapshot& s);

// The facts a class's expectations settle, which the rule families then leave to the matrix (one finding per fact,
// DiagnoseOptions::node_class): a GPU with fewer NVLinks active than nvlinks_active (matrix.nvlinks_below; links not
// read may be the missing ones), and the InfiniBand/RoCE ports an [[class.expect.infiniband]] entry covers.
bool nvlinks_below_class(const NodeClass& c, size_t active, size_t not_read);
bool ib_port_expected(const IbPortExpectation& e, std::string_view device, std::string_view link_layer);
bool class_expects_ib_port(const NodeClass& c, std::string_view device, std::string_view link_layer);

// Case-insensitive shell glob (fnmatch) over any of `patterns`.
bool matches_any(const std::vector<std::string>& patterns, std::string_view value);

}  // namespace gpudx
