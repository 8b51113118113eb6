// The JSON of a checkpoint's GPUs: the checkpoint report and the checkpoint worker's answers.
#include "model/device_map.hpp"

#include <nlohmann/json.hpp>

namespace gpudx {

using nlohmann::json;

json gpu_to_json(const CheckpointGpu& g) {
    json j = {{"index", g.index}, {"uuid", g.uuid}, {"pci", g.pci}, {"model", g.model}};
    j["free_memory"] = g.free_memory ? json(*g.free_memory) : json(nullptr);
    j["total_memory"] = g.total_memory ? json(*g.total_memory) : json(nullptr);
    return j;
}
CheckpointGpu gpu_from_json(const json& j) {
    CheckpointGpu g;
    g.index = j.value("index", 0);
    g.uuid = j.value("uuid", "");
    g.pci = j.value("pci", "");
    g.model = j.value("model", "");
    if (j.contains("free_memory") && j["free_memory"].is_number()) g.free_memory = j["free_memory"].get<uint64_t>();
    if (j.contains("total_memory") && j["total_memory"].is_number()) g.total_memory = j["total_memory"].get<uint64_t>();
    return g;
}

}  // namespace gpudx
