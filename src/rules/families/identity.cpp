// identity.*: every disagreement between the sources that name a GPU (identity/join.hpp).
#include <fmt/format.h>

#include "rules/engine/families.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "identity/join.hpp"

namespace gpudx {

namespace {

// Filed under the driver layer: the sources that disagree are the driver's answers (CUDA, NVML) against the
// kernel driver's procfs and sysfs. Each is about which GPU is which (RuleTag::identity).
using C = Collector;
constexpr Rule kRules[] = {
    {"identity.cuda_bus_unknown", Layer::driver, Severity::error, {C::cuda, C::pcie, C::module, C::nvml},
     "a CUDA device reports a PCI bus id no other source has on this node",
     {RuleTag::identity}},
    {"identity.cuda_stale_bus_id", Layer::driver, Severity::error, {C::cuda, C::module, C::nvml},
     "a CUDA device reports the bus id of one GPU with the UUID of another (a restored process)",
     {RuleTag::identity}},
    {"identity.cuda_pci_attribute_mismatch", Layer::driver, Severity::error, {C::cuda},
     "a CUDA device's PCI domain, bus and device attributes disagree with its bus id",
     {RuleTag::identity}},
    {"identity.nvml_bus_unknown", Layer::driver, Severity::error, {C::nvml, C::pcie, C::module},
     "an NVML device reports a bus id that is not on this node's PCIe bus",
     {RuleTag::identity}},
    {"identity.nvml_uuid_mismatch", Layer::driver, Severity::error, {C::nvml, C::module},
     "NVML and the kernel driver name the GPU at one address by different UUIDs",
     {RuleTag::identity}},
    {"identity.minor_mismatch", Layer::driver, Severity::warning, {C::nvml, C::module},
     "NVML and procfs give a GPU different device minors",
     {RuleTag::identity}},
    {"identity.duplicate_uuid", Layer::driver, Severity::error, {C::module, C::nvml},
     "one UUID is reported at two PCI addresses",
     {RuleTag::identity}},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

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
            Finding f = rule("identity.cuda_bus_unknown").finding({});
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
                Finding f = rule("identity.cuda_stale_bus_id").finding({});
                f.subjects.push_back(ref(*here));
                if (owner && owner != here) f.subjects.push_back(ref(*owner));
                bool nvml_agrees = !here->procfs_uuid.empty() && same_uuid(here->nvml_uuid, d.uuid);
                f.message = owner && owner != here
                                ? fmt::format("CUDA ordinal {} reports bus {} but the UUID of {} ({}): the bus id is stale",
                                              d.ordinal, d.pci, owner->pci, d.uuid)
                            : nvml_agrees
                                ? fmt::format("CUDA ordinal {} reports bus {} with UUID {}, as NVML does, but the kernel "
                                              "driver has {} there",
                                              d.ordinal, d.pci, d.uuid, here->procfs_uuid)
                                : fmt::format("CUDA ordinal {} reports bus {} but UUID {}, which no GPU on this node has",
                                              d.ordinal, d.pci, d.uuid);
                f.evidence = {{call_bus, d.bus_id}, {call_uuid, d.uuid}, {expected_src, expected}};
                if (owner && owner != here)
                    f.evidence.push_back({owner->in_procfs ? procfs_path(owner->pci) : "nvmlDeviceGetPciInfo_v3",
                                          d.uuid + " at " + owner->pci});
                // NVML giving the same UUID as CUDA at this address means the user-space driver agrees with
                // itself and it is the kernel driver's procfs that differs: not a restored process but libraries
                // that talk to another driver (another node's libraries in a container, a replayed capture).
                if (nvml_agrees) {
                    f.evidence.push_back({fmt::format("nvmlDeviceGetUUID({})", here->nvml_index.value_or(0)),
                                          here->nvml_uuid});
                    f.next_step = "NVML agrees with CUDA here, so this is not a restored process: the user-space driver "
                                  "(NVML and CUDA) answers for other GPUs than the kernel driver's procfs lists. The "
                                  "loaded libnvidia-ml/libcuda do not talk to this node's kernel driver (a container "
                                  "with another node's libraries, or a capture replayed with another node's answers); "
                                  "see identity.nvml_uuid_mismatch and the libraries layer.";
                } else {
                    f.next_step = kRestoreNextStep;
                }
                out.push_back(std::move(f));
            }
        }
        auto addr = PciAddress::parse(d.pci);
        if (addr && ((d.attr_domain && static_cast<uint32_t>(*d.attr_domain) != addr->domain) ||
                     (d.attr_bus && *d.attr_bus != addr->bus) || (d.attr_device && *d.attr_device != addr->device))) {
            Finding f = rule("identity.cuda_pci_attribute_mismatch").finding({});
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
            Finding f = rule("identity.nvml_bus_unknown").finding({});
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
            Finding f = rule("identity.nvml_uuid_mismatch").finding({});
            f.subjects.push_back({r.procfs_uuid, r.pci});
            f.message = fmt::format("GPU at {}: the kernel driver says UUID {}, NVML says {}", r.pci, r.procfs_uuid,
                                    r.nvml_uuid);
            f.evidence = {{procfs_path(r.pci), r.procfs_uuid}, {call, r.nvml_uuid}};
            f.next_step = "The loaded libnvidia-ml does not talk to this kernel driver (a container with another "
                          "node's libraries, or a stand-in). Check `gpudx diagnose` libraries layer.";
            out.push_back(std::move(f));
        }
        if (r.minor && r.nvml_minor && *r.minor != *r.nvml_minor && r.in_procfs) {
            Finding f = rule("identity.minor_mismatch").finding({});
            f.subjects.push_back(ref(r));
            f.message = fmt::format("GPU at {}: device minor {} in procfs, {} in NVML", r.pci, *r.minor, *r.nvml_minor);
            f.evidence = {{procfs_path(r.pci), fmt::format("Device Minor: {}", *r.minor)},
                          {fmt::format("nvmlDeviceGetMinorNumber({})", *r.nvml_index), std::to_string(*r.nvml_minor)}};
            f.next_step = "/dev/nvidiaN passed into containers by number may be another card; pass devices by UUID.";
            out.push_back(std::move(f));
        }
    }
}

// Where a row's UUID (IdentityRow::uuid()) comes from.
std::string uuid_source(const IdentityRow& r) {
    if (!r.procfs_uuid.empty()) return procfs_path(r.pci);
    if (!r.nvml_uuid.empty()) return fmt::format("nvmlDeviceGetUUID({})", r.nvml_index.value_or(0));
    return fmt::format("cuDeviceGetUuid_v2({})", r.cuda_ordinal.value_or(0));
}

// Two addresses claiming one UUID, as the driver sees the hardware (procfs or NVML). A row only CUDA names
// carries the UUID of the GPU the process runs on at a bus id of its own: that is a stale or unknown bus id
// (identity.cuda_stale_bus_id, identity.cuda_bus_unknown), not a second card.
void check_duplicate_uuids(const IdentityTable& t, std::vector<Finding>& out) {
    auto driver_named = [](const IdentityRow& r) { return !r.procfs_uuid.empty() || !r.nvml_uuid.empty(); };
    for (size_t i = 0; i < t.rows.size(); ++i)
        for (size_t j = i + 1; j < t.rows.size(); ++j) {
            const auto &a = t.rows[i], &b = t.rows[j];
            if (!driver_named(a) || !driver_named(b)) continue;
            std::string ua = a.uuid(), ub = b.uuid();
            if (!same_uuid(ua, ub)) continue;
            Finding f = rule("identity.duplicate_uuid").finding({});
            f.subjects = {ref(a), ref(b)};
            f.message = fmt::format("UUID {} is reported at two PCI addresses: {} and {}", ua, a.pci, b.pci);
            f.evidence = {{uuid_source(a), ua + " at " + a.pci}, {uuid_source(b), ub + " at " + b.pci}};
            f.next_step = "Two cards cannot share a UUID: one source is stale (a restored process or a replayed "
                          "capture). Re-run on the live node.";
            out.push_back(std::move(f));
        }
}

}  // namespace

void check_identity(const CheckContext& ctx, std::vector<Finding>& out) {
    IdentityTable t = join_identity(ctx.snapshot);
    check_cuda_rows(ctx.snapshot, t, out);
    check_nvml_rows(t, out);
    check_duplicate_uuids(t, out);
    // CUDA_VISIBLE_DEVICES entries that name no GPU here are the allocation family's (allocation.uuid_not_on_node,
    // allocation.visible_devices_invalid).
}

constinit const RuleFamily kIdentityFamily{"identity", Layer::driver, kRules, check_identity};

}  // namespace gpudx
