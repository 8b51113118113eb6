#pragma once
// The services collector: systemd's view of the units the NVSwitch fabric needs, asked only on a node that has
// NVSwitches (after the PCIe and device-node collectors have run, which tell). Under --root, the capture's record.
#include <string_view>
#include <vector>

#include "collect/context.hpp"
#include "model/collector_status.hpp"
#include "model/devices.hpp"
#include "model/pcie.hpp"
#include "model/services.hpp"

namespace gpudx {

// Where gather keeps systemctl's answer, and where a replay reads it (docs/capture-format.md).
inline constexpr std::string_view kSystemctlShowRecord = "/_commands/systemctl-show.txt";
// The properties asked of each unit.
inline constexpr std::string_view kSystemdProperties =
    "Id,LoadState,UnitFileState,ActiveState,SubState,Result,ExecMainStatus,ActiveEnterTimestamp,InactiveEnterTimestamp";

// `systemctl show -p Id,...` of several units: blocks of KEY=VALUE lines parted by blank lines, one per unit, each
// named by its Id. A block without an Id is skipped.
std::vector<SystemdUnit> parse_systemctl_show(std::string_view text);
// The same format, written back (what gather records).
std::string format_systemctl_show(const std::vector<SystemdUnit>& units);

// Asks systemd (live) or the capture (replay) about the fabric manager and IMEX units, under a deadline; on a node
// without NVSwitches asks nothing and says so (no_data).
CollectorStatus collect_services(const CollectContext& ctx, const PcieLayer& pcie, const DevicesLayer& devices,
                                 ServicesLayer& layer);

}  // namespace gpudx
