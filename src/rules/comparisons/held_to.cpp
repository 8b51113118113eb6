#include "rules/comparisons/held_to.hpp"

#include <algorithm>

#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"

namespace gpudx {

namespace {

// A GPU with no NVLink left is one fact: the class's count says it (matrix.nvlinks_below), the record's
// baseline.nvlink_lost does not say it again.
void drop_lost_links_the_class_names(std::vector<Finding>& findings) {
    std::vector<GpuRef> named;
    for (auto& f : findings)
        if (f.id == "matrix.nvlinks_below") named.insert(named.end(), f.subjects.begin(), f.subjects.end());
    std::erase_if(findings, [&](const Finding& f) {
        return f.id == "baseline.nvlink_lost" && !f.subjects.empty() &&
               std::find(named.begin(), named.end(), f.subjects.front()) != named.end();
    });
}

}  // namespace

HeldTo hold_node_to(const Snapshot& s, const std::optional<NodeRecord>& baseline, const std::optional<Matrix>& matrix) {
    HeldTo out;
    if (baseline) out.findings = diff_against_baseline(*baseline, s);
    if (matrix) {
        auto check = check_against_matrix(*matrix, s, today_utc());
        if (check.node_class) out.node_class = check.node_class->name;
        out.class_held_to = check.node_class;
        for (auto& f : check.findings) out.findings.push_back(std::move(f));
        drop_lost_links_the_class_names(out.findings);
    }
    return out;
}

}  // namespace gpudx
