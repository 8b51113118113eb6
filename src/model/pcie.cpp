#include "model/pcie.hpp"

namespace gpudx {

const PciDevice* find_pci_device(const PcieLayer& l, std::string_view address) {
    for (auto& d : l.devices)
        if (d.address == address) return &d;
    return nullptr;
}

std::vector<const PciDevice*> pcie_path_up(const PcieLayer& l, std::string_view address) {
    std::vector<const PciDevice*> out;
    for (const PciDevice* d = find_pci_device(l, address); d && out.size() < 32;
         d = d->parent.empty() ? nullptr : find_pci_device(l, d->parent))
        out.push_back(d);
    return out;
}

uint64_t aer_total(const std::map<std::string, uint64_t>& counters) {
    uint64_t sum = 0;
    for (auto& [name, n] : counters) {
        if (name.starts_with("TOTAL_ERR")) return n;
        sum += n;
    }
    return sum;
}

}  // namespace gpudx
