#include "rules/comparisons/held_to.hpp"

#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"

namespace gpudx {

HeldTo hold_node_to(const Snapshot& s, const std::optional<NodeRecord>& baseline, const std::optional<Matrix>& matrix) {
    HeldTo out;
    if (baseline) out.findings = diff_against_baseline(*baseline, s);
    if (matrix) {
        auto check = check_against_matrix(*matrix, s, today_utc());
        if (check.node_class) out.node_class = check.node_class->name;
        for (auto& f : check.findings) out.findings.push_back(std::move(f));
    }
    return out;
}

}  // namespace gpudx
