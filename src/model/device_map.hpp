#pragma once
// The GPUs of a checkpoint's node and the device map of its restore, as the checkpoint report holds them
// (model/checkpoint.hpp): which GPU each checkpointed GPU comes back on. actions/device_map.hpp parses and checks
// a map the user gives.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gpudx {

// One GPU of this node as the checkpoint driver sees it, with CUDA_VISIBLE_DEVICES ignored.
struct CheckpointGpu {
    int index = 0;       // position in PCI order: the NVML index, and the CUDA ordinal under CUDA_DEVICE_ORDER=PCI_BUS_ID
    std::string uuid;    // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    std::string pci;     // normalised dddd:bb:dd.f; empty when the driver did not say
    std::string model;   // cuDeviceGetName
    std::optional<uint64_t> free_memory;   // bytes (NVML); unknown without NVML
    std::optional<uint64_t> total_memory;  // bytes
};

struct GpuPair {
    std::string old_uuid, new_uuid;
    bool operator==(const GpuPair&) const = default;
};

// "GPU 0 (GPU-7e37…, 0000:00:06.0)": how messages name a GPU, never by a bare number.
std::string describe_gpu(const CheckpointGpu& gpu);
// The GPU of that UUID among those the driver listed, or none.
const CheckpointGpu* gpu_by_uuid(const std::vector<CheckpointGpu>& gpus, const std::string& uuid);

nlohmann::json gpu_to_json(const CheckpointGpu& g);
CheckpointGpu gpu_from_json(const nlohmann::json& j);

}  // namespace gpudx
