#pragma once
// Text renderers of the node-record and matrix comparisons (`gpudx baseline`, `gpudx matrix`).
#include <string>
#include <vector>

#include "model/finding.hpp"
#include "model/matrix.hpp"
#include "model/node_record.hpp"

namespace gpudx {

// Findings as text: one block per finding, errors first.
std::string render_findings_text(const std::vector<Finding>& findings, bool color = false);

std::string render_matrix_check_text(const Matrix& m, const NodeRecord& node, const MatrixCheck& c, bool color = false);

}  // namespace gpudx
