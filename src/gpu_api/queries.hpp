#pragma once
// The driver probes, one per library (gpu_api/nvml, gpu_api/cuda, gpu_api/rocm_smi). query_* run inside a
// forked probe child (core/child_probe.hpp) and report the layer as JSON; collect_driver
// (collect/collectors.hpp) runs them under the deadline.
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/driver.hpp"

namespace gpudx {

class ProbeChannel;

struct NvmlQueryOptions {
    std::optional<std::string> library_dir;
    // The GPU health's second sample comes this long after the first, and only when the first showed something
    // one sample cannot judge (docs/gpu-health.md); 0: one sample only.
    unsigned health_interval_ms = 1000;
    // The probe's own deadline: a second sample that could not finish well inside it is not taken.
    unsigned deadline_ms = 5000;
};

struct CudaQueryOptions {
    std::optional<std::string> library_dir;
    // CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER to set before cuInit; nullopt: unset.
    std::optional<std::string> cuda_visible_devices;
    std::optional<std::string> cuda_device_order;
};

struct RocmSmiQueryOptions {
    std::optional<std::string> library_dir;
    // As for NVML: the second health sample's interval (0: one sample) and the probe's deadline.
    unsigned health_interval_ms = 1000;
    unsigned deadline_ms = 5000;
};

// Child side: load, query, and send the layer (as JSON) through the channel as it fills.
void query_nvml(const NvmlQueryOptions& options, ProbeChannel& channel);
// Sends a CudaLayer whose `caller` view holds this evaluation.
void query_cuda(const CudaQueryOptions& options, ProbeChannel& channel);
// Sends a RocmSmiLayer (librocm_smi64: AMD GPUs).
void query_rocm_smi(const RocmSmiQueryOptions& options, ProbeChannel& channel);

// What a gather stores as _driver/answers.json, and what the stand-in libraries replay: the layers as
// the probe saw them (docs/driver-layers.md, "Stand-ins and recorded answers").
// The ROCm SMI answers are included when they were asked.
nlohmann::json record_driver_answers(const NvmlLayer& nvml, const CudaLayer& cuda, const RocmSmiLayer& rocm_smi = {});

}  // namespace gpudx
