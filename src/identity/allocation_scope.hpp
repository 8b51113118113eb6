#pragma once
// Which of the node's GPUs this process was given: a container's NVIDIA_VISIBLE_DEVICES, a Slurm job's
// SLURM_STEP_GPUS / SLURM_JOB_GPUS. A GPU outside that allocation is not this process's to judge: NVML in a
// confined job or a container lists only the cards it may open, and a container has no device node for a
// card it was not given.
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

struct Snapshot;

struct GpuScope {
    bool limited = false;            // false: no allocation known, every GPU of the node is in scope
    std::vector<std::string> pci;    // normalised addresses of the allocated GPUs (when limited)
    std::string source;              // "SLURM_JOB_GPUS=0", "NVIDIA_VISIBLE_DEVICES=GPU-..." (when limited)
    bool contains(std::string_view pci) const;
};

struct ScopeSources {
    bool container = true;  // NVIDIA_VISIBLE_DEVICES, inside a container only (outside one it selects nothing)
    bool slurm = true;      // SLURM_STEP_GPUS, else SLURM_JOB_GPUS (indices are device minors, as gres.conf)
};

// Both sources limited: the GPUs in both. A value that names no GPU this node can resolve (no procfs and no
// NVML list to match it against) leaves the scope unlimited: nothing can be judged outside it.
GpuScope gpu_scope(const Snapshot& s, ScopeSources sources = {});

}  // namespace gpudx
