#include "model/services.hpp"

#include <algorithm>

namespace gpudx {

std::string_view SystemdUnit::property(std::string_view key) const {
    auto it = properties.find(std::string(key));
    return it == properties.end() ? std::string_view() : std::string_view(it->second);
}

bool has_nvswitch(const PcieLayer& pcie, const DevicesLayer& devices) {
    if (!pcie.nvswitches.empty()) return true;
    return std::any_of(devices.nodes.begin(), devices.nodes.end(), [](const DeviceNode& n) {
        return n.path.starts_with("/dev/nvidia-nvswitch") && n.type != "missing";
    });
}

}  // namespace gpudx
