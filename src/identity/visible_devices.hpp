#pragma once
// The values that select GPUs for a process or container: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES,
// ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, SLURM_JOB_GPUS. Pure parsing and matching; no I/O.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

struct Snapshot;

enum class VisibleDevicesKind {
    unset,  // variable not set: every device
    all,    // "all"
    none,   // "none" (container toolkit: driver mounted, no GPU)
    void_,  // "void" (container toolkit: nothing injected)
    empty,  // "" : no device at all (CUDA) / nothing injected (toolkit)
    list,   // comma-separated entries
};

enum class VisibleEntryType { index, gpu_uuid, mig_uuid, invalid };

struct VisibleEntry {
    std::string text;  // as written, trimmed
    VisibleEntryType type = VisibleEntryType::invalid;
    std::optional<unsigned> index;  // for index entries
};

struct VisibleDevices {
    VisibleDevicesKind kind = VisibleDevicesKind::unset;
    std::vector<VisibleEntry> entries;  // every entry written, the invalid ones included
    // CUDA stops at the first invalid entry: devices after it are not visible. Index of that entry, if any.
    std::optional<size_t> first_invalid;
    bool has_indices() const;
    bool has_uuids() const;  // GPU or MIG UUIDs
    // The entries CUDA honours: those before the first invalid one.
    std::vector<VisibleEntry> effective() const;
};

// nullopt value: the variable is unset.
VisibleDevices parse_visible_devices(const std::optional<std::string>& value);
const char* to_string(VisibleDevicesKind k);

// A GPU as the matcher needs it: UUID ("GPU-..."), PCI address, and its index in PCI order on this node.
struct NodeGpu {
    std::string uuid;
    std::string pci;
    unsigned index = 0;             // position in PCI order: nvidia-smi's index, CUDA's under PCI_BUS_ID
    std::optional<unsigned> minor;  // /dev/nvidiaN: what Slurm's gres.conf indices usually follow
    std::vector<std::string> mig_uuids;
};

// The node's NVIDIA GPUs in PCI order, from the driver's procfs (else NVML), with MIG UUIDs from NVML.
std::vector<NodeGpu> node_gpus(const Snapshot& s);

// How an index entry names a GPU.
enum class IndexMeaning { pci_order, device_minor };

struct VisibleMatch {
    VisibleEntry entry;
    std::vector<size_t> gpus;  // positions in the node list: one when matched, several when a prefix is ambiguous
    bool mig = false;          // matched a MIG instance of that GPU
};

// Matches each effective entry to node GPUs: index by position in PCI order, GPU-UUID by full UUID or unique
// prefix (case-insensitive), MIG-UUID against the GPUs' MIG lists.
std::vector<VisibleMatch> match_visible_devices(const VisibleDevices& v, const std::vector<NodeGpu>& gpus,
                                               IndexMeaning indices = IndexMeaning::pci_order);

// The ROCm selectors (docs/amd.md). ROCr enumerates the GPU agents in KFD topology node order and keeps those
// ROCR_VISIBLE_DEVICES names (indices into that order, or GPU-<unique id hex> UUIDs), in the order written; HIP then
// keeps those HIP_VISIBLE_DEVICES names among ROCr's (CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset: HIP
// honours it too, which matters on a host with both vendors). As for CUDA, an entry that names no GPU ends the list.
struct AmdNodeGpu {
    std::string uuid;  // GPU-<16 hex digits>; empty when the ASIC has no unique id
    std::string pci;
};

struct AmdSelection {
    std::string hip_variable;  // HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, or empty when neither is set
    std::vector<std::optional<unsigned>> rocr_index;  // per GPU given: its index among ROCr's agents; nullopt hidden
    std::vector<std::optional<unsigned>> hip_index;   // per GPU given: its HIP device ordinal; nullopt hidden
    std::vector<std::string> rocr_unmatched;  // ROCR_VISIBLE_DEVICES entries that name no GPU
    std::vector<std::string> hip_unmatched;   // entries of hip_variable that name no GPU ROCr kept
};

// `gpus` in ROCr's enumeration order (KFD node order); nullopt values: the variable is unset.
AmdSelection select_amd_gpus(const std::vector<AmdNodeGpu>& gpus, const std::optional<std::string>& rocr,
                             const std::optional<std::string>& hip, const std::optional<std::string>& cuda);

}  // namespace gpudx
