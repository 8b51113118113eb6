// What a check of one node against the matrix found, as JSON (`gpudx matrix check --format json`).
#include "model/matrix.hpp"

#include <nlohmann/json.hpp>

namespace gpudx {

nlohmann::json matrix_check_to_json(const Matrix& m, const NodeRecord& node, const MatrixCheck& c) {
    nlohmann::json j;
    j["matrix"] = m.path;
    j["hostname"] = node.hostname;
    j["class"] = c.node_class ? nlohmann::json(c.node_class->name) : nlohmann::json(nullptr);
    if (c.node_class) {
        j["owner"] = c.node_class->owner;
        j["review_by"] = c.node_class->review_by.str();
    }
    j["also_fitting"] = c.also_fitting;
    auto& fs = j["findings"] = nlohmann::json::array();
    for (auto& f : c.findings) fs.push_back(finding_to_json(f));
    j["exit_code"] = c.exit_code;
    return j;
}

}  // namespace gpudx
