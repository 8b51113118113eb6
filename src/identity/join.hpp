#pragma once
// One row per physical GPU, keyed by its PCI address, joining every source that names it: sysfs
// (address, slot, NUMA node), procfs (UUID, minor), /dev nodes, NVML (index, UUID, bus id), the CUDA
// driver under the caller's CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER (ordinal, UUID, bus id), MIG UUIDs;
// for AMD GPUs amdgpu's DRM card and render minor, the KFD node and ROCm's UUID (GPU-<unique_id hex>), with
// the indices ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES give them.
// Bus ids are compared parsed (PciAddress), UUIDs case-insensitively; never index against index.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/snapshot.hpp"

namespace gpudx {

struct IdentityRow {
    std::string pci;  // normalised dddd:bb:dd.f: the key
    bool on_pcie = false;
    std::string vendor;  // "nvidia", "amd", "" when only a driver reported it
    std::string slot;
    std::optional<int32_t> numa_node;
    std::string model;

    // /proc/driver/nvidia/gpus/<pci>/information
    bool in_procfs = false;
    std::string procfs_uuid;
    std::optional<uint32_t> minor;
    std::string dev_node;       // /dev/nvidiaN when the devices layer saw it
    bool dev_node_missing = false;  // the devices layer was read and has no node for this minor

    // NVML
    std::optional<unsigned> nvml_index;
    std::string nvml_uuid, nvml_bus_id;
    std::optional<unsigned> nvml_minor;
    std::vector<std::string> mig_uuids;

    // CUDA driver under the caller's environment, joined by the bus id CUDA reports.
    std::optional<int> cuda_ordinal;
    std::string cuda_uuid, cuda_bus_id;

    // AMD: amdgpu's DRM card and KFD node (module.amd_gpus), and the ROCm selectors of the environment.
    std::string amd_uuid;                   // GPU-<unique_id hex>, as ROCm names it
    std::string card;                       // card1
    std::optional<uint32_t> render_minor;   // /dev/dri/renderD<minor>
    std::optional<unsigned> kfd_node;
    std::optional<uint32_t> kfd_gpu_id;
    std::optional<unsigned> rocr_enum_index;  // ROCr's index with nothing hidden (KFD node order)
    std::optional<unsigned> rocr_index;       // index under ROCR_VISIBLE_DEVICES; nullopt: hidden
    std::optional<unsigned> hip_index;        // HIP ordinal under ROCR_ and HIP_VISIBLE_DEVICES; nullopt: hidden

    // The UUID to name this GPU by: procfs, else NVML, else CUDA, else ROCm's.
    std::string uuid() const;
};

struct IdentityTable {
    std::vector<IdentityRow> rows;  // sorted by PCI address
    // The variables the CUDA ordinals were evaluated under (model/environment.hpp); nullopt: unset.
    std::optional<std::string> cuda_visible_devices, cuda_device_order;
    bool pcie_read = false, nvml_read = false, cuda_read = false, procfs_read = false;
    // AMD: the KFD topology was listed; the ROCm selectors as the environment holds them.
    bool kfd_read = false;
    bool amd = false;  // at least one AMD row
    std::optional<std::string> rocr_visible_devices, hip_visible_devices;
    std::string hip_selector;  // HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES (HIP honours it), or empty
    std::vector<std::string> rocr_unmatched, hip_unmatched;  // selector entries that name no AMD GPU here

    const IdentityRow* by_pci(std::string_view pci) const;
    // The row whose procfs or NVML UUID (or a MIG UUID) is `uuid`; nullptr when none.
    const IdentityRow* by_uuid(std::string_view uuid) const;
};

IdentityTable join_identity(const Snapshot& s);

// UUIDs equal ignoring case and the "GPU-"/"MIG-" prefix.
bool same_uuid(std::string_view a, std::string_view b);

nlohmann::json identity_to_json(const IdentityTable& t);
std::string render_identity_text(const IdentityTable& t);
std::string render_identity_csv(const IdentityTable& t);

}  // namespace gpudx
