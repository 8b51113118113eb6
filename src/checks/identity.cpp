// identity.*: every disagreement between the sources that name a GPU (identity/join.hpp).
#include <fmt/format.h>

#include "checks/check_context.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "identity/join.hpp"

namespace gpudx {

namespace {

std::string procfs_path(const std::string& pci) { return "/proc/driver/nvidia/gpus/" + pci + "/information"; }

GpuRef ref(const IdentityRow& r) { return {r.uuid(), r.pci}; }

const char* kRestoreNextStep =
    "This is the signature of a CUDA process restored onto other GPUs (cuda-checkpoint with a device map): the "
    "UUID follows the new GPU but the PCI bus id is stale, so NVML and NCCL resolve the wrong card (or none). "
    "Restart the process without the device map, or start it under the gpudx shim "
    "(LD_PRELOAD=libgpudx_shim.so) before checkpointing so bus ids follow the UUID; check with `gpudx verify PID`.";

void check_cuda_rows(const Snapshot& s, const IdentityTable& t, std::vector<Finding>& out) {
    for (auto& d : s.cuda.caller.devices) {
        std::string call_bus = fmt::format("cuDeviceGetPCIBusId({})", d.ordinal);
        std::string call_uuid = fmt::format("cuDeviceGetUuid_v2({})", d.ordinal);
        if (d.pci.empty()) continue;
        auto* here = t.by_pci(d.pci);
        bool bus_known = here && (here->on_pcie || here->in_procfs || here->nvml_index);
        if (!bus_known && !(t.pcie_read || t.procfs_read || t.nvml_read)) continue;  // nothing to compare with
        if (!bus_known) {
            Finding f;
            f.id = "identity.cuda_bus_unknown";
            f.layer = Layer::driver;
            f.severity = Severity::error;
            f.subjects.push_back({d.uuid, d.pci});
            f.message = fmt::format("CUDA ordinal {} reports bus {}, which no other source has on this node", d.ordinal,
                                    d.pci);
            f.evidence = {{call_bus, d.bus_id}, {call_uuid, d.uuid}, {"/sys/bus/pci/devices", "no device at " + d.pci}};
            if (auto* owner = t.by_uuid(d.uuid))
                f.evidence.push_back({"UUID " + d.uuid, "is the GPU at " + owner->pci});
            f.next_step = std::string("A bus id from another node means the process was restored from elsewhere. ") +
                          kRestoreNextStep;
            out.push_back(std::move(f));
            continue;
        }
        std::string expected = !here->procfs_uuid.empty() ? here->procfs_uuid : here->nvml_uuid;
        std::string expected_src =
            !here->procfs_uuid.empty() ? procfs_path(here->pci) : fmt::format("nvmlDeviceGetUUID({})", here->nvml_index.value_or(0));
        if (!d.uuid.empty() && !expected.empty() && !same_uuid(expected, d.uuid)) {
            // A MIG instance's UUID is fine when it belongs to this GPU.
            bool mig_of_here = false;
            for (auto& m : here->mig_uuids)
                if (same_uuid(m, d.uuid)) mig_of_here = true;
            if (!mig_of_here) {
                auto* owner = t.by_uuid(d.uuid);
                Finding f;
                f.id = "identity.cuda_stale_bus_id";
                f.layer = Layer::driver;
                f.severity = Severity::error;
                f.subjects.push_back(ref(*here));
                if (owner && owner != here) f.subjects.push_back(ref(*owner));
                f.message = owner && owner != here
                                ? fmt::format("CUDA ordinal {} reports bus {} but the UUID of {} ({}): the bus id is stale",
                                              d.ordinal, d.pci, owner->pci, d.uuid)
                                : fmt::format("CUDA ordinal {} reports bus {} but UUID {}, which no GPU on this node has",
                                              d.ordinal, d.pci, d.uuid);
                f.evidence = {{call_bus, d.bus_id}, {call_uuid, d.uuid}, {expected_src, expected}};
                if (owner && owner != here)
                    f.evidence.push_back({owner->in_procfs ? procfs_path(owner->pci) : "nvmlDeviceGetPciInfo_v3",
                                          d.uuid + " at " + owner->pci});
                f.next_step = kRestoreNextStep;
                out.push_back(std::move(f));
            }
        }
        auto addr = PciAddress::parse(d.pci);
        if (addr && ((d.attr_domain && static_cast<uint32_t>(*d.attr_domain) != addr->domain) ||
                     (d.attr_bus && *d.attr_bus != addr->bus) || (d.attr_device && *d.attr_device != addr->device))) {
            Finding f;
            f.id = "identity.cuda_pci_attribute_mismatch";
            f.layer = Layer::driver;
            f.severity = Severity::error;
            f.subjects.push_back(ref(*here));
            f.message = fmt::format("CUDA ordinal {}: the PCI attributes (domain {}, bus {}, device {}) disagree with "
                                    "its bus id {}",
                                    d.ordinal, d.attr_domain.value_or(-1), d.attr_bus.value_or(-1),
                                    d.attr_device.value_or(-1), d.bus_id);
            f.evidence = {{call_bus, d.bus_id},
                          {fmt::format("cuDeviceGetAttribute(50/33/34, {})", d.ordinal),
                           fmt::format("{}/{}/{}", d.attr_domain.value_or(-1), d.attr_bus.value_or(-1),
                                       d.attr_device.value_or(-1))}};
            f.next_step = "Code that builds a bus id from the attributes (as the CUDA runtime's device properties "
                          "do) will name another card than cuDeviceGetPCIBusId. Restart the process; if it was "
                          "restored from a checkpoint, see identity.cuda_stale_bus_id.";
            out.push_back(std::move(f));
        }
    }
}

void check_nvml_rows(const IdentityTable& t, std::vector<Finding>& out) {
    for (auto& r : t.rows) {
        if (!r.nvml_index) continue;
        std::string call = fmt::format("nvmlDeviceGetUUID({})", *r.nvml_index);
        if (t.pcie_read && !r.on_pcie && !r.in_procfs) {
            Finding f;
            f.id = "identity.nvml_bus_unknown";
            f.layer = Layer::driver;
            f.severity = Severity::error;
            f.subjects.push_back(ref(r));
            f.message = fmt::format("NVML device {} reports bus {}, which is not on this node's PCIe bus", *r.nvml_index,
                                    r.nvml_bus_id);
            f.evidence = {{fmt::format("nvmlDeviceGetPciInfo_v3({})", *r.nvml_index), r.nvml_bus_id},
                          {"/sys/bus/pci/devices", "no device at " + r.pci}};
            f.next_step = "NVML and sysfs disagree about the hardware: in a container, check which /sys is mounted; "
                          "otherwise collect `gpudx gather` and report it.";
            out.push_back(std::move(f));
        }
        if (!r.procfs_uuid.empty() && !r.nvml_uuid.empty() && !same_uuid(r.procfs_uuid, r.nvml_uuid)) {
            Finding f;
            f.id = "identity.nvml_uuid_mismatch";
            f.layer = Layer::driver;
            f.severity = Severity::error;
            f.subjects.push_back({r.procfs_uuid, r.pci});
            f.message = fmt::format("GPU at {}: the kernel driver says UUID {}, NVML says {}", r.pci, r.procfs_uuid,
                                    r.nvml_uuid);
            f.evidence = {{procfs_path(r.pci), r.procfs_uuid}, {call, r.nvml_uuid}};
            f.next_step = "The loaded libnvidia-ml does not talk to this kernel driver (a container with another "
                          "node's libraries, or a stand-in). Check `gpudx diagnose` libraries layer.";
            out.push_back(std::move(f));
        }
        if (r.minor && r.nvml_minor && *r.minor != *r.nvml_minor && r.in_procfs) {
            Finding f;
            f.id = "identity.minor_mismatch";
            f.layer = Layer::driver;
            f.severity = Severity::warning;
            f.subjects.push_back(ref(r));
            f.message = fmt::format("GPU at {}: device minor {} in procfs, {} in NVML", r.pci, *r.minor, *r.nvml_minor);
            f.evidence = {{procfs_path(r.pci), fmt::format("Device Minor: {}", *r.minor)},
                          {fmt::format("nvmlDeviceGetMinorNumber({})", *r.nvml_index), std::to_string(*r.nvml_minor)}};
            f.next_step = "/dev/nvidiaN passed into containers by number may be another card; pass devices by UUID.";
            out.push_back(std::move(f));
        }
    }
}

void check_duplicate_uuids(const IdentityTable& t, std::vector<Finding>& out) {
    for (size_t i = 0; i < t.rows.size(); ++i)
        for (size_t j = i + 1; j < t.rows.size(); ++j) {
            const auto &a = t.rows[i], &b = t.rows[j];
            if (a.procfs_uuid.empty() && a.nvml_uuid.empty()) continue;
            std::string ua = a.uuid(), ub = b.uuid();
            if (!same_uuid(ua, ub)) continue;
            Finding f;
            f.id = "identity.duplicate_uuid";
            f.layer = Layer::driver;
            f.severity = Severity::error;
            f.subjects = {ref(a), ref(b)};
            f.message = fmt::format("UUID {} is reported at two PCI addresses: {} and {}", ua, a.pci, b.pci);
            f.evidence = {{a.in_procfs ? procfs_path(a.pci) : "NVML", ua + " at " + a.pci},
                          {b.in_procfs ? procfs_path(b.pci) : "NVML", ub + " at " + b.pci}};
            f.next_step = "Two cards cannot share a UUID: one source is stale (a restored process or a replayed "
                          "capture). Re-run on the live node.";
            out.push_back(std::move(f));
        }
}

// CUDA_VISIBLE_DEVICES: CUDA stops at the first entry that names no device, hiding the ones after it.
void check_visible_devices(const IdentityTable& t, std::vector<Finding>& out) {
    if (t.cuda_visible_devices == "<unset>") return;
    size_t gpu_count = 0;
    for (auto& r : t.rows)
        if (r.vendor == "nvidia" || r.in_procfs || r.nvml_index) ++gpu_count;
    if (gpu_count == 0) return;
    auto entries = split(t.cuda_visible_devices, ',');
    for (size_t i = 0; i < entries.size(); ++i) {
        std::string e(trim(entries[i]));
        if (e.empty()) break;
        bool numeric = parse_uint(e).has_value();
        std::string why;
        if (numeric) {
            if (*parse_uint(e) >= gpu_count) why = fmt::format("index {} but this node has {} GPU(s)", e, gpu_count);
        } else {
            std::string want = to_lower(e);
            if (want.rfind("gpu-", 0) != 0 && want.rfind("mig-", 0) != 0) want = "gpu-" + want;
            bool found = false;
            for (auto& r : t.rows) {
                std::vector<std::string> names = {r.procfs_uuid, r.nvml_uuid};
                names.insert(names.end(), r.mig_uuids.begin(), r.mig_uuids.end());
                for (auto& n : names)
                    if (!n.empty() && to_lower(n).rfind(want, 0) == 0) found = true;
            }
            if (!found) why = fmt::format("UUID {} is not on this node", e);
        }
        if (why.empty()) continue;
        Finding f;
        f.id = numeric ? "identity.visible_devices_index_out_of_range" : "identity.visible_devices_unknown_uuid";
        f.layer = Layer::allocation;
        f.severity = Severity::error;
        f.message = fmt::format("CUDA_VISIBLE_DEVICES entry {} names no GPU here ({}); CUDA ignores it and every "
                                "entry after it",
                                i, why);
        f.evidence = {{"CUDA_VISIBLE_DEVICES", t.cuda_visible_devices}};
        for (auto& r : t.rows)
            if (!r.uuid().empty()) f.evidence.push_back({"GPU on this node", r.uuid() + " at " + r.pci});
        f.next_step = "The job was given a GPU of another node, or a stale allocation. Check the scheduler's "
                      "allocation (Slurm gres, Kubernetes device plugin) and use UUIDs from `gpudx ids` on this node.";
        out.push_back(std::move(f));
        break;
    }
}

}  // namespace

void check_identity(const CheckContext& ctx, std::vector<Finding>& out) {
    IdentityTable t = join_identity(ctx.snapshot);
    check_cuda_rows(ctx.snapshot, t, out);
    check_nvml_rows(t, out);
    check_duplicate_uuids(t, out);
    check_visible_devices(t, out);
}

}  // namespace gpudx
