#pragma once
// AMD GPUs as the amdgpu driver and its KFD (the kernel side of ROCm) present them: the DRM cards under
// /sys/class/drm and the KFD topology under /sys/class/kfd/kfd/topology (docs/amd.md). Part of the module
// layer, beside the NVIDIA driver's procfs view.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

// /sys/class/kfd/kfd/topology/nodes/N: one HSA node, a CPU (gpu_id 0) or a GPU.
struct KfdNode {
    unsigned node = 0;                  // N, the directory's number: ROCr enumerates GPU agents in this order
    std::optional<uint32_t> gpu_id;     // nodes/N/gpu_id; 0 for a CPU node
    std::string name;                   // nodes/N/name, e.g. gfx942; empty for a CPU node
    std::string pci;                    // normalised address from `domain` and `location_id`; empty for a CPU node
    std::string unique_id;              // properties unique_id (decimal there) as 16 hex digits; empty when absent or 0
    std::optional<uint32_t> drm_render_minor;
    std::optional<uint32_t> vendor_id, device_id;
    std::optional<uint32_t> simd_count;
    std::optional<uint32_t> gfx_target_version;  // e.g. 90402 for gfx942
    // Every "name value" line of nodes/N/properties, the value as written (64-bit values stay exact in JSON).
    std::map<std::string, std::string> properties;
};

// One AMD GPU: its DRM card and render node, joined with its KFD node by PCI address.
struct AmdGpu {
    std::string pci;                        // normalised dddd:bb:dd.f: the key
    std::string card;                       // "card1": /sys/class/drm/card1
    std::optional<uint32_t> render_minor;   // 128 for /dev/dri/renderD128 (from /sys/class/drm/renderD*, else KFD)
    std::string unique_id;                  // 16 hex digits: device/unique_id, else KFD's unique_id; empty when unknown
    std::string uuid;                       // "GPU-" + unique_id, as ROCR_VISIBLE_DEVICES and rocminfo write it
    std::string vbios_version;              // device/vbios_version
    std::string product_name;               // device/product_name, when the board reports one
    std::map<std::string, std::string> firmware;  // device/fw_version/<name>_fw_version -> value as written
    bool in_kfd = false;                    // a KFD topology node has this PCI address
    std::optional<unsigned> kfd_node;
    std::optional<uint32_t> kfd_gpu_id;
    std::string gfx_target;                 // "gfx942" (KFD node name)
    std::optional<uint32_t> simd_count;
    std::optional<unsigned> rocr_index;     // position among KFD GPU nodes: ROCr's index with nothing hidden
};

}  // namespace gpudx
