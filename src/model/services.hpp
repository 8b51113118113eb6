#pragma once
// The systemd services the GPU stack needs on some nodes (nvidia-fabricmanager on NVSwitch systems, nvidia-imex
// where multi-node NVLink is set up), as `systemctl show` reports them. Asked only on a node with NVSwitches;
// the collector: collect/services.cpp, the rules: rules/families/services.cpp, docs/host-health.md.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/devices.hpp"
#include "model/pcie.hpp"

namespace gpudx {

inline constexpr std::string_view kFabricManagerUnit = "nvidia-fabricmanager.service";
inline constexpr std::string_view kImexUnit = "nvidia-imex.service";

struct SystemdUnit {
    std::string name;  // its Id: nvidia-fabricmanager.service
    // Each property as systemctl printed it: LoadState (loaded, not-found), UnitFileState (enabled, disabled),
    // ActiveState (active, failed, inactive, activating), SubState, Result (success, exit-code, timeout ...),
    // ExecMainStatus, ActiveEnterTimestamp, InactiveEnterTimestamp.
    std::map<std::string, std::string> properties;

    // The property's value, empty when systemctl did not print it.
    std::string_view property(std::string_view key) const;
};

struct ServicesLayer {
    std::vector<SystemdUnit> units;  // in the order asked
    std::string source;              // "systemctl show", or the capture file the answer was replayed from
};

// True when the node has an NVSwitch: one on PCIe, or an /dev/nvidia-nvswitch* node. Only then is systemd asked.
bool has_nvswitch(const PcieLayer& pcie, const DevicesLayer& devices);

}  // namespace gpudx
