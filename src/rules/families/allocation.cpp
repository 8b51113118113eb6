// Which GPUs a job was given and which it can see: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, Slurm's variables.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "rules/engine/families.hpp"
#include "core/pci_address.hpp"
#include "identity/visible_devices.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"allocation.visible_by_index", Layer::allocation, Severity::warning, {C::environment, C::module},
     "CUDA_VISIBLE_DEVICES names GPUs by index instead of UUID"},
    {"allocation.index_without_pci_order", Layer::allocation, Severity::warning, {C::environment},
     "CUDA_VISIBLE_DEVICES uses indices while CUDA_DEVICE_ORDER is not PCI_BUS_ID"},
    {"allocation.visible_devices_invalid", Layer::allocation, Severity::error, {C::environment, C::module, C::nvml},
     "CUDA_VISIBLE_DEVICES has an entry that names no GPU, costing the job the GPUs after it (a warning when none "
     "are)",
     {RuleTag::identity}},
    {"allocation.mig_uuid_unverified", Layer::allocation, Severity::info, {C::environment, C::nvml},
     "a MIG instance UUID in the allocation cannot be checked without NVML's list", {RuleTag::identity}},
    {"allocation.uuid_not_on_node", Layer::allocation, Severity::error, {C::environment, C::module, C::nvml},
     "the allocation names a GPU UUID that no GPU on this node has", {RuleTag::identity}},
    {"allocation.stacked_mappings", Layer::allocation, Severity::warning, {C::environment, C::module},
     "CUDA_VISIBLE_DEVICES disagrees with Slurm's allocation: a second mapping on top of Slurm's"},
    {"allocation.visible_beyond_allocation", Layer::allocation, Severity::warning,
     {C::environment, C::nvml, C::devices, C::module},
     "the job can open GPUs beyond its Slurm allocation (info when only device node modes show it)"},
    {"allocation.no_visible_devices", Layer::allocation, Severity::warning, {C::environment},
     "CUDA_VISIBLE_DEVICES is set but empty"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

std::optional<std::string> var(const Snapshot& s, const std::string& name) {
    auto it = s.environment.variables.find(name);
    if (it == s.environment.variables.end()) return std::nullopt;
    return it->second;
}

Evidence env_evidence(const std::string& name, const std::string& value) {
    return {"environment " + name, value.empty() ? "\"\"" : value};
}

bool starts_with_mig_gpu(std::string_view text) {
    return text.size() > 8 && (text.starts_with("MIG-GPU-") || text.starts_with("mig-gpu-"));
}

std::vector<GpuRef> refs(const CheckContext& ctx, const std::vector<NodeGpu>& gpus, const std::vector<size_t>& idx) {
    std::vector<GpuRef> out;
    for (auto i : idx) out.push_back(ctx.gpu(gpus[i].pci));
    return out;
}

std::string uuid_list(const std::vector<NodeGpu>& gpus) {
    std::string s;
    for (auto& g : gpus) s += fmt::format("{}{} (index {}, {})", s.empty() ? "" : ", ", g.uuid, g.index, g.pci);
    return s;
}

void by_index(const CheckContext& ctx, const std::string& value, const VisibleDevices& cvd,
              const std::vector<NodeGpu>& gpus, std::vector<Finding>& out) {
    if (!cvd.has_indices()) return;
    auto matches = match_visible_devices(cvd, gpus);
    std::vector<size_t> named;
    std::string mapping;
    for (auto& m : matches) {
        if (m.entry.type != VisibleEntryType::index) continue;
        for (auto i : m.gpus) named.push_back(i);
        mapping += fmt::format("{}{} -> {}", mapping.empty() ? "" : ", ", m.entry.text,
                               m.gpus.empty() ? std::string("no such GPU") : describe(ctx.gpu(gpus[m.gpus[0]].pci)));
    }
    Finding f = rule("allocation.visible_by_index").finding({});
    f.subjects = refs(ctx, gpus, named);
    f.message = fmt::format("CUDA_VISIBLE_DEVICES={} names GPUs by index: indices change with enumeration order, "
                            "containers and stacked mappings, UUIDs do not (in PCI order here: {})",
                            value, mapping.empty() ? "unknown" : mapping);
    f.evidence.push_back(env_evidence("CUDA_VISIBLE_DEVICES", value));
    if (!gpus.empty()) f.evidence.push_back({"/proc/driver/nvidia/gpus", uuid_list(gpus)});
    f.next_step = "Allocate by UUID: CUDA_VISIBLE_DEVICES=GPU-... (Slurm: set AutoDetect=nvml in gres.conf so it "
                  "exports UUID-stable devices; Kubernetes: the device plugin's DEVICE_ID_STRATEGY=uuid).";
    out.push_back(std::move(f));

    auto order = var(ctx.snapshot, "CUDA_DEVICE_ORDER");
    if (order && *order == "PCI_BUS_ID") return;
    Finding o = rule("allocation.index_without_pci_order").finding({});
    o.subjects = refs(ctx, gpus, named);
    o.message = fmt::format("CUDA_VISIBLE_DEVICES uses indices while CUDA_DEVICE_ORDER is {}: CUDA then numbers GPUs "
                            "fastest first, which need not be nvidia-smi's (PCI) order",
                            order ? *order : std::string("unset (FASTEST_FIRST)"));
    o.evidence.push_back(env_evidence("CUDA_DEVICE_ORDER", value_or_unset(order)));
    o.evidence.push_back(env_evidence("CUDA_VISIBLE_DEVICES", value));
    o.next_step = "Export CUDA_DEVICE_ORDER=PCI_BUS_ID in the job environment, or better, use UUIDs.";
    out.push_back(std::move(o));
}

// Whether NVML's device list was read: only then are MIG instance UUIDs known (procfs does not list them).
bool nvml_read(const Snapshot& s) {
    return s.nvml.device_count.has_value() && (!s.nvml.init_result || *s.nvml.init_result == 0);
}

// CUDA honours CUDA_VISIBLE_DEVICES up to the first entry that names no device: that entry and every entry
// after it are ignored. The first such entry (bad syntax, an index past the last GPU, a UUID no GPU or MIG
// instance here has, when that can be known), and the GPUs named after it that CUDA therefore drops.
struct CutOff {
    std::optional<size_t> entry;  // position in cvd.entries
    std::vector<size_t> dropped;  // node GPUs named after it
};

CutOff cut_off(const Snapshot& s, const VisibleDevices& cvd, const std::vector<NodeGpu>& gpus) {
    CutOff c;
    bool migs_known = nvml_read(s);
    auto names_nothing = [&](const VisibleEntry& e) {
        if (e.type == VisibleEntryType::invalid) return true;
        if (gpus.empty()) return false;  // nothing to resolve against: only the syntax can be judged
        if (e.type == VisibleEntryType::mig_uuid && !migs_known && !starts_with_mig_gpu(e.text)) return false;
        VisibleDevices one;
        one.kind = VisibleDevicesKind::list;
        one.entries = {e};
        auto m = match_visible_devices(one, gpus);
        return m.empty() || m[0].gpus.empty();
    };
    for (size_t i = 0; i < cvd.entries.size(); ++i)
        if (names_nothing(cvd.entries[i])) {
            c.entry = i;
            break;
        }
    if (!c.entry || gpus.empty()) return c;
    for (size_t i = *c.entry + 1; i < cvd.entries.size(); ++i) {
        auto& e = cvd.entries[i];
        if (e.type == VisibleEntryType::invalid) continue;
        VisibleDevices one;
        one.kind = VisibleDevicesKind::list;
        one.entries = {e};
        for (auto& m : match_visible_devices(one, gpus))
            if (m.gpus.size() == 1 &&
                std::find(c.dropped.begin(), c.dropped.end(), m.gpus[0]) == c.dropped.end())
                c.dropped.push_back(m.gpus[0]);
    }
    return c;
}

void invalid_entries(const CheckContext& ctx, const std::string& value, const VisibleDevices& cvd,
                     const std::vector<NodeGpu>& gpus, std::vector<Finding>& out) {
    std::vector<std::string> problems;
    if (cvd.first_invalid) {
        auto& bad = cvd.entries[*cvd.first_invalid];
        problems.push_back(fmt::format("entry \"{}\" is not an index, GPU-UUID or MIG-UUID", bad.text));
    }
    if (!gpus.empty()) {
        for (auto& m : match_visible_devices(cvd, gpus)) {
            if (m.entry.type == VisibleEntryType::index && m.gpus.empty())
                problems.push_back(fmt::format("index {} does not exist: this node has {} GPUs", m.entry.text, gpus.size()));
            if (m.entry.type == VisibleEntryType::gpu_uuid && m.gpus.size() > 1)
                problems.push_back(fmt::format("\"{}\" is a prefix of {} GPUs' UUIDs", m.entry.text, m.gpus.size()));
        }
    }
    std::set<std::string> seen;
    for (auto& e : cvd.effective())
        if (!seen.insert(e.text).second) problems.push_back(fmt::format("\"{}\" is listed twice", e.text));
    if (problems.empty()) return;
    // An error when the bad entry costs the job GPUs it was meant to have (CUDA drops them); a warning when
    // nothing usable comes after it.
    auto cut = cut_off(ctx.snapshot, cvd, gpus);
    Finding f = rule("allocation.visible_devices_invalid")
                    .finding(cut.dropped.empty() ? Severity::warning : Severity::error, {});
    f.subjects = refs(ctx, gpus, cut.dropped);
    std::string joined;
    for (auto& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    std::string consequence;
    if (cut.entry) {
        std::string dropped;
        for (auto i : cut.dropped) dropped += (dropped.empty() ? "" : ", ") + describe(ctx.gpu(gpus[i].pci));
        consequence = fmt::format(". CUDA honours only the {} entr{} before \"{}\"{}", *cut.entry,
                                  *cut.entry == 1 ? "y" : "ies", cvd.entries[*cut.entry].text,
                                  dropped.empty() ? std::string(" (no GPU of this node is named after it)")
                                                  : ": it drops " + dropped + ", named after it");
    }
    f.message = "CUDA_VISIBLE_DEVICES is partly invalid: " + joined + consequence;
    f.evidence.push_back(env_evidence("CUDA_VISIBLE_DEVICES", value));
    if (!gpus.empty()) f.evidence.push_back({"/proc/driver/nvidia/gpus", uuid_list(gpus)});
    f.next_step = "Set CUDA_VISIBLE_DEVICES to a comma-separated list of this node's GPU UUIDs (`nvidia-smi -L`).";
    out.push_back(std::move(f));
}

// UUIDs a job was given that no GPU here carries: the allocation was made for another node or a replaced card.
// A MIG instance's UUID is known only from NVML: without NVML's list it is left unverified (info), never
// called absent; with it, a GPU in MIG mode without instances is covered (its list is empty).
void uuid_not_on_node(const CheckContext& ctx, const std::vector<NodeGpu>& gpus, std::vector<Finding>& out) {
    if (gpus.empty()) return;
    bool migs_known = nvml_read(ctx.snapshot);
    for (auto name : {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS"}) {
        auto value = var(ctx.snapshot, name);
        if (!value) continue;
        auto parsed = parse_visible_devices(value);
        for (auto& m : match_visible_devices(parsed, gpus)) {
            bool uuid = m.entry.type == VisibleEntryType::gpu_uuid;
            bool is_mig = m.entry.type == VisibleEntryType::mig_uuid;
            // The old form names its parent GPU (MIG-GPU-<uuid>/gi/ci), which procfs knows.
            bool mig_checkable = is_mig && (migs_known || starts_with_mig_gpu(m.entry.text));
            if (is_mig && !mig_checkable) {
                Finding f = rule("allocation.mig_uuid_unverified").finding({});
                f.message = fmt::format("{} names MIG instance {}, which cannot be checked: MIG instance UUIDs come "
                                        "from NVML, and NVML was not read",
                                        name, m.entry.text);
                f.evidence.push_back(env_evidence(name, *value));
                if (auto* c = ctx.snapshot.collector(Collector::nvml))
                    f.evidence.push_back({"nvml collector", c->message.empty() ? to_string(c->state) : c->message});
                f.next_step = "Run gpudx without --no-driver (on a capture: --driver-lib-dir with the stand-ins), or "
                              "compare with `nvidia-smi -L` on the node.";
                out.push_back(std::move(f));
                continue;
            }
            if (!(uuid || mig_checkable) || !m.gpus.empty()) continue;
            Finding f = rule("allocation.uuid_not_on_node").finding({});
            f.message = fmt::format("{} names {}, which is not a GPU on this node: the job will not get the card it "
                                    "was allocated{}",
                                    name, m.entry.text,
                                    std::string_view(name) == "CUDA_VISIBLE_DEVICES"
                                        ? " (CUDA stops at that entry: the devices listed after it are dropped too)"
                                        : "");
            f.evidence.push_back(env_evidence(name, *value));
            f.evidence.push_back({"/proc/driver/nvidia/gpus", uuid_list(gpus)});
            f.next_step = "Check the scheduler's record for this node (a card replaced or moved keeps its old UUID in "
                          "gres.conf / the device plugin's state); re-run the allocation or fix the node's inventory.";
            out.push_back(std::move(f));
        }
    }
}

// The allocation Slurm made, as GPUs on this node (indices follow the device minor, as gres.conf lists /dev/nvidiaN).
struct SlurmAllocation {
    std::string variable, value;
    VisibleDevices parsed;
    std::vector<size_t> gpus;
    bool resolved = true;
};

std::optional<SlurmAllocation> slurm_allocation(const CheckContext& ctx, const std::vector<NodeGpu>& gpus) {
    for (auto name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
        auto value = var(ctx.snapshot, name);
        if (!value || value->empty()) continue;
        SlurmAllocation a{name, *value, parse_visible_devices(value), {}, true};
        if (a.parsed.kind != VisibleDevicesKind::list) continue;
        for (auto& m : match_visible_devices(a.parsed, gpus, IndexMeaning::device_minor)) {
            if (m.gpus.size() == 1) a.gpus.push_back(m.gpus[0]);
            else a.resolved = false;
        }
        return a;
    }
    return std::nullopt;
}

void stacked_mappings(const CheckContext& ctx, const std::string& value, const VisibleDevices& cvd,
                      const std::vector<NodeGpu>& gpus, const SlurmAllocation& alloc, std::vector<Finding>& out) {
    if (cvd.kind != VisibleDevicesKind::list) return;
    auto mine = cvd.effective();
    auto theirs = alloc.parsed.effective();
    std::string why;
    if (mine.size() != theirs.size()) {
        why = fmt::format("it lists {} device(s) where Slurm allocated {}", mine.size(), theirs.size());
    } else if (cvd.has_indices()) {
        // Slurm exports either the allocation's own indices or, with ConstrainDevices, 0..n-1; anything else
        // means a second mapping was applied on top of Slurm's.
        bool same = true, renumbered = true;
        for (size_t i = 0; i < mine.size(); ++i) {
            if (mine[i].text != theirs[i].text) same = false;
            if (!mine[i].index || *mine[i].index != i) renumbered = false;
        }
        if (!same && !renumbered)
            why = "its indices are neither Slurm's indices nor Slurm's renumbering 0..N-1 of them";
    } else if (alloc.resolved && !gpus.empty()) {
        std::set<size_t> allowed(alloc.gpus.begin(), alloc.gpus.end());
        for (auto& m : match_visible_devices(cvd, gpus))
            for (auto i : m.gpus)
                if (!allowed.count(i)) why = fmt::format("{} is not one of the GPUs Slurm allocated", m.entry.text);
    }
    if (why.empty()) return;
    Finding f = rule("allocation.stacked_mappings").finding({});
    f.subjects = refs(ctx, gpus, alloc.gpus);
    f.message = fmt::format("CUDA_VISIBLE_DEVICES={} disagrees with Slurm's {}={}: {}. Indices inside a job are "
                            "relative to what Slurm already exposed, so a second mapping selects other cards than meant",
                            value, alloc.variable, alloc.value, why);
    f.evidence.push_back(env_evidence("CUDA_VISIBLE_DEVICES", value));
    f.evidence.push_back(env_evidence(alloc.variable, alloc.value));
    if (auto id = var(ctx.snapshot, "SLURM_JOB_ID")) f.evidence.push_back(env_evidence("SLURM_JOB_ID", *id));
    f.next_step = "Do not set CUDA_VISIBLE_DEVICES in the job script; request the GPUs through Slurm (--gpus, "
                  "--gpu-bind) and let it export the mapping.";
    out.push_back(std::move(f));
}

// The job can reach more GPUs than it was allocated: the device cgroup is not constraining it. NVML inside a
// confined job enumerates only the cards it may open, so its list is the strong evidence; device nodes alone
// only show file permissions (the cgroup may still deny the open), so they make an info finding.
void beyond_allocation(const CheckContext& ctx, const std::vector<NodeGpu>& gpus, const SlurmAllocation& alloc,
                       std::vector<Finding>& out) {
    if (!alloc.resolved || gpus.empty()) return;
    std::set<size_t> allowed(alloc.gpus.begin(), alloc.gpus.end());
    std::vector<size_t> extra;
    std::string seen;
    const auto& nvml = ctx.snapshot.nvml;
    bool from_nvml = nvml.device_count.has_value() && !nvml.devices.empty();
    for (size_t i = 0; i < gpus.size(); ++i) {
        if (allowed.count(i)) continue;
        if (from_nvml) {
            for (auto& d : nvml.devices)
                if (normalize_pci(d.pci) == gpus[i].pci) {
                    extra.push_back(i);
                    seen += fmt::format("{}NVML index {} ({})", seen.empty() ? "" : ", ", d.index, d.uuid);
                }
            continue;
        }
        if (!gpus[i].minor) continue;
        std::string path = fmt::format("/dev/nvidia{}", *gpus[i].minor);
        for (auto& n : ctx.snapshot.devices.nodes) {
            if (n.path != path || n.type == "missing") continue;
            if (n.caller_can_open && !*n.caller_can_open) continue;
            extra.push_back(i);
            seen += (seen.empty() ? "" : ", ") + path;
        }
    }
    if (extra.empty()) return;
    Finding f =
        rule("allocation.visible_beyond_allocation").finding(from_nvml ? Severity::warning : Severity::info, {});
    f.subjects = refs(ctx, gpus, extra);
    f.message = from_nvml ? fmt::format("the job was allocated {}={} but NVML can open {} more GPU(s): another job's "
                                        "cards are open to it",
                                        alloc.variable, alloc.value, extra.size())
                          : fmt::format("the job was allocated {}={} but {} more GPU node(s) are present and permitted "
                                        "by their mode ({}); unless the device cgroup denies them, other jobs' cards "
                                        "are open to it",
                                        alloc.variable, alloc.value, extra.size(), seen);
    f.evidence.push_back(env_evidence(alloc.variable, alloc.value));
    f.evidence.push_back({from_nvml ? "nvmlDeviceGetHandleByIndex_v2" : "/dev", seen});
    f.next_step = "Enable device confinement: ConstrainDevices=yes in cgroup.conf (Slurm), and check gres.conf lists "
                  "every /dev/nvidiaN.";
    out.push_back(std::move(f));
}

}  // namespace

void check_allocation(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    auto* st = s.collector(Collector::environment);
    if (!st || st->state != CollectorState::ok) return;
    auto gpus = node_gpus(s);
    auto cvd_value = var(s, "CUDA_VISIBLE_DEVICES");
    auto cvd = parse_visible_devices(cvd_value);
    if (cvd_value) {
        if (cvd.kind == VisibleDevicesKind::list) {
            by_index(ctx, *cvd_value, cvd, gpus, out);
            invalid_entries(ctx, *cvd_value, cvd, gpus, out);
        } else if (cvd.kind == VisibleDevicesKind::empty) {
            Finding f = rule("allocation.no_visible_devices").finding({});
            f.message = "CUDA_VISIBLE_DEVICES is set but empty: CUDA sees no GPU in this environment";
            f.evidence.push_back(env_evidence("CUDA_VISIBLE_DEVICES", ""));
            f.next_step = "Unset CUDA_VISIBLE_DEVICES or list the allocated GPUs' UUIDs; if the job asked for no GPU "
                          "this is expected.";
            out.push_back(std::move(f));
        }
    }
    uuid_not_on_node(ctx, gpus, out);
    if (auto alloc = slurm_allocation(ctx, gpus)) {
        if (cvd_value) stacked_mappings(ctx, *cvd_value, cvd, gpus, *alloc, out);
        beyond_allocation(ctx, gpus, *alloc, out);
    }
}

constinit const RuleFamily kAllocationFamily{"allocation", Layer::allocation, kRules, check_allocation};

}  // namespace gpudx
