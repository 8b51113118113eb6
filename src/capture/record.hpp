#pragma once
// Allocation records (`gpudx record`): at job start (a Slurm prolog), which physical GPUs a job was given —
// UUID, PCI address, the ordinal the job will see each one as — with the job, node and container image, as
// one JSON line appended to a log. Weeks later "GPU 3 of job 81723 threw Xid 79" can then be traced to a
// card by UUID and PCI address (docs/integration.md describes the format).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "collect/context.hpp"
#include "core/error.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

inline constexpr int kAllocationRecordSchemaVersion = 1;
inline constexpr std::string_view kAllocationRecordKind = "gpudx-allocation-record";

struct ContainerImage {
    std::string reference;  // as given (e.g. nvcr.io#nvidia/pytorch:24.05-py3); empty when only a digest is known
    std::string digest;     // "sha256:<64 hex>"; empty when unknown
    std::string source;     // the variable or file it came from
};

// A reader of files outside the snapshot (an OCI bundle's config.json); nullopt when unreadable.
using FileReader = std::function<std::optional<std::string>(const std::string& path)>;

// The job's container image from what the environment tells (docs/integration.md lists the sources, in
// order); nullopt when nothing names one.
std::optional<ContainerImage> container_image_from(const std::map<std::string, std::string>& env,
                                                   const FileReader& read_file);

struct AllocatedGpu {
    std::optional<unsigned> local_ordinal;  // the CUDA ordinal inside the job; none for an unresolved entry
    std::string entry;                      // the list entry as written ("2", "GPU-5530b5fd-...", "MIG-...")
    std::string uuid, pci;                  // empty when the entry names no GPU on this node
    std::optional<unsigned> minor;          // /dev/nvidiaN
    std::string mig_uuid;                   // when the entry is a MIG instance
};

struct AllocationRecord {
    std::string recorded_at, gpudx_version, node, host;
    std::optional<std::string> job_id, step_id, user, context;
    std::string variable;  // which variable gave the allocation; empty when none was set (every GPU)
    std::optional<std::string> value;
    std::string index_meaning;  // "device_minor" (Slurm, gres.conf), "pci_order" (CUDA, nvidia-smi) or ""
    std::vector<AllocatedGpu> gpus;
    std::optional<ContainerImage> image;
};

// Only what a record needs (host, PCIe, driver procfs, and NVML for MIG when options.probe_driver): a
// prolog delays the job, so the kernel log, libraries and device holders are not read. CUDA is never probed.
Snapshot collect_gpu_inventory(const Root& root, const CollectOptions& options);

// Joins the job's variables (SLURM_STEP_GPUS, SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES,
// the first one set) with the node's GPUs. `env` is the job's environment, not the snapshot's.
AllocationRecord build_allocation_record(const Snapshot& s, const std::map<std::string, std::string>& env,
                                         const std::string& node, const std::string& recorded_at,
                                         const FileReader& read_file);

nlohmann::ordered_json allocation_record_to_json(const AllocationRecord& r);

// Appends `line` + '\n' with one write(2) on an O_APPEND descriptor, so records from jobs starting at the
// same moment never interleave; creates missing parent directories. fsync when asked.
Result<void> append_line(const std::string& path, std::string_view line, bool sync);

}  // namespace gpudx
