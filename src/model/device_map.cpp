// How the checkpoint report names its GPUs.
#include "model/device_map.hpp"

#include <fmt/format.h>

namespace gpudx {

std::string describe_gpu(const CheckpointGpu& gpu) {
    std::string where = gpu.uuid;
    if (!gpu.pci.empty()) where += ", " + gpu.pci;
    return fmt::format("GPU {} ({})", gpu.index, where);
}

const CheckpointGpu* gpu_by_uuid(const std::vector<CheckpointGpu>& gpus, const std::string& uuid) {
    for (const auto& g : gpus)
        if (g.uuid == uuid) return &g;
    return nullptr;
}

}  // namespace gpudx
