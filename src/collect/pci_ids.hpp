#pragma once
// Vendor and device names from the pci.ids database, looked up for only the ids a node has:
// the file is ~1.4 MB and sorted by vendor, so a targeted search beats parsing it whole.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/root.hpp"

namespace gpudx {

struct PciIdNames {
    std::map<uint16_t, std::string> vendors;
    std::map<std::pair<uint16_t, uint16_t>, std::string> devices;  // (vendor, device) -> name
};

// Names for the wanted (vendor, device) pairs from pci.ids text; ids it does not list are left out.
PciIdNames parse_pci_ids(std::string_view text, const std::vector<std::pair<uint16_t, uint16_t>>& wanted);

// The first pci.ids found in the root (/usr/share/misc, /usr/share/hwdata, /usr/share/pci.ids); empty
// names when none is installed, which is normal on minimal images.
PciIdNames lookup_pci_ids(const Root& root, const std::vector<std::pair<uint16_t, uint16_t>>& wanted);

}  // namespace gpudx
