#include "identity/allocation_scope.hpp"

#include <algorithm>

#include "core/pci_address.hpp"
#include "identity/visible_devices.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

bool GpuScope::contains(std::string_view address) const {
    if (!limited) return true;
    auto want = normalize_pci(address);
    return std::find(pci.begin(), pci.end(), want) != pci.end();
}

namespace {

std::optional<std::string> var(const Snapshot& s, const std::string& name) {
    auto it = s.environment.variables.find(name);
    if (it == s.environment.variables.end()) return std::nullopt;
    return it->second;
}

// The GPUs one variable selects; nullopt when it does not limit anything.
std::optional<GpuScope> scope_of(const Snapshot& s, const std::vector<NodeGpu>& gpus, const std::string& name,
                                 IndexMeaning indices) {
    auto value = var(s, name);
    if (!value) return std::nullopt;
    auto parsed = parse_visible_devices(value);
    GpuScope out;
    out.source = name + "=" + *value;
    switch (parsed.kind) {
        case VisibleDevicesKind::unset:
        case VisibleDevicesKind::all: return std::nullopt;
        case VisibleDevicesKind::none:
        case VisibleDevicesKind::void_:
        case VisibleDevicesKind::empty: out.limited = true; return out;
        case VisibleDevicesKind::list: break;
    }
    if (gpus.empty()) return std::nullopt;  // nothing to resolve the entries against
    out.limited = true;
    for (auto& m : match_visible_devices(parsed, gpus, indices))
        if (m.gpus.size() == 1) out.pci.push_back(normalize_pci(gpus[m.gpus[0]].pci));
    return out;
}

}  // namespace

GpuScope gpu_scope(const Snapshot& s, ScopeSources sources) {
    auto gpus = node_gpus(s);
    std::optional<GpuScope> container, slurm;
    if (sources.container && s.environment.container.in_container)
        container = scope_of(s, gpus, "NVIDIA_VISIBLE_DEVICES", IndexMeaning::pci_order);
    if (sources.slurm) {
        for (auto name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
            auto value = var(s, name);
            if (!value || value->empty()) continue;
            slurm = scope_of(s, gpus, name, IndexMeaning::device_minor);
            break;
        }
    }
    if (container && slurm) {
        GpuScope both;
        both.limited = true;
        both.source = container->source + ", " + slurm->source;
        for (auto& p : container->pci)
            if (slurm->contains(p)) both.pci.push_back(p);
        return both;
    }
    if (container) return *container;
    if (slurm) return *slurm;
    return {};
}

}  // namespace gpudx
