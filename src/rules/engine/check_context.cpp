#include "rules/engine/check_context.hpp"

#include "core/pci_address.hpp"

namespace gpudx {

GpuRef CheckContext::gpu(std::string_view pci) const {
    GpuRef ref{{}, normalize_pci(pci)};
    for (auto& g : snapshot.module.nvidia_gpus)
        if (g.address == ref.pci && !g.uuid.empty()) return {g.uuid, ref.pci};
    for (auto& d : snapshot.nvml.devices)
        if (d.pci == ref.pci && !d.uuid.empty()) return {d.uuid, ref.pci};
    for (auto& d : snapshot.cuda.caller.devices)
        if (d.pci == ref.pci && !d.uuid.empty()) return {d.uuid, ref.pci};
    for (auto& g : snapshot.module.amd_gpus)  // ROCm's GPU-<unique_id>
        if (g.pci == ref.pci && !g.uuid.empty()) return {g.uuid, ref.pci};
    return ref;
}

}  // namespace gpudx
