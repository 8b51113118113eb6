// Small derivations of a node record, shared by its JSON, the comparisons and the reports.
#include "model/node_record.hpp"

#include <map>

#include <fmt/format.h>

namespace gpudx {

std::string driver_branch_of(std::string_view v) {
    auto dot = v.find('.');
    return std::string(v.substr(0, dot));
}

std::string cuda_version_text(std::optional<int> v) {
    if (!v) return {};
    return fmt::format("{}.{}", *v / 1000, (*v % 1000) / 10);
}

std::string dominant_gpu_model(const NodeRecord& r) {
    std::map<std::string, size_t> counts;
    for (auto& g : r.gpus)
        if (!g.model.empty()) ++counts[g.model];
    std::string best;
    size_t best_n = 0;
    for (auto& [model, n] : counts)
        if (n > best_n) best = model, best_n = n;
    return best;
}

}  // namespace gpudx
