#pragma once
// A node record (`gpudx baseline save`, docs/baseline-matrix-fleet.md): what a healthy node looked like — which
// card sits where, its firmware and link, the driver stack around it — as the JSON file later snapshots are held
// against. rules/comparisons/baseline.hpp makes records and compares them; the matrix and the fleet report
// classify nodes by them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.hpp"

namespace gpudx {

inline constexpr int kNodeRecordSchemaVersion = 1;
inline constexpr std::string_view kNodeRecordKind = "gpudx-node-record";

struct RecordedLink {
    std::optional<double> speed_gts;
    std::optional<uint32_t> width;
    bool operator==(const RecordedLink&) const = default;
};

// One NVLink of a GPU as NVML reported it: whether it was active and, for an active link, the device at its
// other end. An unread remote end is empty: it is never taken for a change.
struct RecordedNvlink {
    unsigned link = 0;
    bool active = false;
    std::string remote_pci;   // normalised; empty when not read (NVML answers Not Supported on some systems)
    std::string remote_type;  // "gpu", "nvswitch", "ibmnpu", "unknown"; empty when not read
};

struct RecordedGpu {
    std::string uuid;  // empty when no source knew it (driver not loaded)
    std::string pci;   // normalised dddd:bb:dd.f
    std::string slot;  // physical slot name, empty when the platform exposes none
    std::string model;
    std::string vbios;  // as procfs writes it (lower case); compare case-insensitively
    RecordedLink link_max, link_current;
    std::optional<int32_t> numa_node;
    std::optional<uint32_t> minor;
    // The GPU's NVLinks by link number; nullopt when not read (no NVML answer for this GPU, an older snapshot or
    // record). Empty: NVML says the GPU has none (Not Supported, or a link count of 0).
    std::optional<std::vector<RecordedNvlink>> nvlinks;
    std::optional<unsigned> nvlink_count;  // links the GPU has (NVML); more than `nvlinks` holds: some not read
};

struct RecordedLibrary {
    std::string soname;
    std::string path;  // what the loader would open
    std::string version;
};

// An Xid in the kernel log at the time of the record whose NVIDIA bucket asks for a GPU reset or a reboot
// (XidBucket::recovery): if it comes back in a later boot, the reset or reboot did not clear it.
struct RecordedXid {
    std::string uuid;  // empty when no source knew it
    std::string pci;
    int code = 0;
    std::string recovery;  // "reset" or "reboot"
    uint64_t count = 0;
    std::string last_text;
};

// An InfiniBand or RoCE port (/sys/class/infiniband) as the node showed it.
struct RecordedIbPort {
    std::string device;  // mlx5_0
    std::string pci;     // the adapter's normalised address; empty for a software device
    uint32_t port = 0;
    bool active = false;            // logical state ACTIVE: the port carries traffic
    std::string state, phys_state;  // "ACTIVE", "LinkUp", as the kernel names them
    std::string link_layer;         // "InfiniBand", or "Ethernet" for RoCE
    std::string rate;               // "400 Gb/sec (4X NDR)", as written
    std::optional<double> rate_gbps;
};

struct NodeRecord {
    int schema_version = kNodeRecordSchemaVersion;
    std::string recorded_at;       // when the record was made (ISO 8601 UTC)
    std::string snapshot_taken_at; // collected_at of the snapshot it came from
    std::string gpudx_version;
    std::string hostname;
    std::string kernel_release;
    std::string driver_version;  // 580.159.04; empty when no layer knew it
    std::string driver_branch;   // 580
    std::string module_file;     // the nvidia.ko the running kernel would load
    std::string module_file_version;
    std::vector<RecordedLibrary> libraries;  // libcuda.so.1, libnvidia-ml.so.1 ... as resolved
    std::string fabric_manager;  // version when the snapshot shows one; empty when unknown
    std::optional<int> cuda_driver_version;  // 13000 means CUDA 13.0
    std::vector<RecordedGpu> gpus;  // sorted by PCI address
    std::string boot_id;  // /proc/sys/kernel/random/boot_id of the boot the record was made in; empty when unknown
    std::vector<RecordedXid> recovery_xids;  // the record's boot's reset/reboot Xids (kernel-log window), by GPU and code
    // The InfiniBand/RoCE ports, by device and port; nullopt when their collector did not run or failed (an older
    // snapshot or record). Empty: the node has none (no /sys/class/infiniband: no RDMA driver, or no adapter).
    std::optional<std::vector<RecordedIbPort>> ib_ports;
};

std::string driver_branch_of(std::string_view driver_version);  // "580.159.04" -> "580"
std::string cuda_version_text(std::optional<int> cuda_driver_version);  // 13000 -> "13.0", nullopt -> ""
// The GPU model most GPUs of the record share (procfs/NVML name), empty when none is known.
std::string dominant_gpu_model(const NodeRecord& r);

nlohmann::json node_record_to_json(const NodeRecord& r);
Result<NodeRecord> node_record_from_json(const nlohmann::json& j);
Result<NodeRecord> load_node_record(const std::string& path);

}  // namespace gpudx
