#pragma once
// InfiniBand and RoCE ports (/sys/class/infiniband), the fabric GPUDirect RDMA jobs use beside the GPUs, and
// where each adapter sits on PCIe relative to each GPU. The collector: collect/infiniband.cpp; what it reads and
// how it is judged: docs/host-health.md.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/named_enum.hpp"
#include "model/pcie.hpp"

namespace gpudx {

struct IbPort {
    uint32_t port = 0;
    // "4: ACTIVE" and "5: LinkUp" as the kernel writes them, split into the number and the word.
    std::optional<uint32_t> state_code, phys_state_code;
    std::string state, phys_state;  // "ACTIVE", "DOWN", "INIT"; "LinkUp", "Polling", "Disabled"
    std::string rate;               // "400 Gb/sec (4X NDR)", as written
    std::optional<double> rate_gbps;
    std::string link_layer;  // "InfiniBand", or "Ethernet" for RoCE
    std::string netdev;      // RoCE: the network interface of the port's first GID (gid_attrs/ndevs/0)
    // The port's error counters (counters/<name>, the ones docs/host-health.md lists), first reading; a counter
    // absent here was not offered by the driver.
    std::map<std::string, uint64_t> counters;
    // The same counters read again InfinibandLayer::sample_interval_ms later, when the first reading of any port
    // showed an error; empty when no second reading was taken (one is kept only when it read every counter again).
    std::map<std::string, uint64_t> counters_later;
    // Why the port's link errors could not be judged, empty when every counter offered was read. Offered none:
    // "no counters/ directory ..." (a driver without a PMA: rxe, some RoCE drivers), "none of the link error
    // counters offered ..."; offered but unreadable, always "counters/...": "counters/: Permission denied",
    // "counters/symbol_error: not a counter: 'N/A (no PMA)'". Absent from older snapshots (read as empty).
    std::string counters_unread;
    bool counters_unreadable() const { return counters_unread.starts_with("counters/"); }
};

struct IbDevice {
    std::string name;  // mlx5_0
    std::string pci;   // normalised address the device link names; empty when none (a software device: rxe, siw)
    std::string hca_type, board_id, fw_ver, node_guid;
    std::vector<IbPort> ports;
};

struct InfinibandLayer {
    std::vector<IbDevice> devices;  // sorted by name
    std::optional<double> sample_interval_ms;  // how long after the first the second counter reading was taken
};

// The counters whose growth means a sick link (symbol errors, link recovery and downs, receive errors, buffer
// overruns, integrity errors). Congestion and routing counters (port_xmit_discards, VL15_dropped,
// port_rcv_switch_relay_errors, the constraint errors) are kept as evidence but not judged: they grow on a busy
// healthy fabric.
inline constexpr std::string_view kIbLinkErrorCounters[] = {
    "symbol_error",          "link_error_recovery",  "link_downed",
    "port_rcv_errors",       "port_rcv_remote_physical_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors"};
inline constexpr std::string_view kIbOtherErrorCounters[] = {
    "port_xmit_discards", "port_rcv_switch_relay_errors", "port_rcv_constraint_errors", "port_xmit_constraint_errors",
    "VL15_dropped"};
bool is_ib_link_error_counter(std::string_view name);
// The largest value of a PortCounters error counter (4, 8 or 16 bits wide in the InfiniBand PMA, as the kernel's
// sysfs reads it): such a counter stops there instead of wrapping, so once at its maximum it can no longer grow.
// nullopt for a name not of that table.
std::optional<uint64_t> ib_counter_max(std::string_view name);
bool is_ib_error_counter(std::string_view name);

// Where a device sits on PCIe relative to a GPU, nearest first (nvidia-smi topo's PIX/PXB, PHB, NODE, SYS):
// behind the same PCIe switch; under the same root port; on the same root complex (host bridge); on another root
// complex of the same NUMA node; across sockets (another NUMA node). unknown: a device the PCIe layer lacks, or
// NUMA nodes not known.
#define GPUDX_PCIE_PLACES(X) X(same_switch) X(same_root_port) X(same_root_complex) X(same_numa_node) X(across_sockets) X(unknown)
GPUDX_NAMED_ENUM(PciePlace, GPUDX_PCIE_PLACES)

struct GpuNearby {
    std::string gpu;  // PCI address
    PciePlace place = PciePlace::unknown;
};
// Each GPU of the layer with its place relative to the device at `pci`, nearest first (then by address).
std::vector<GpuNearby> gpus_by_distance(const PcieLayer& pcie, std::string_view pci);
PciePlace pcie_place(const PcieLayer& pcie, std::string_view a, std::string_view b);
// Words for a place: "same PCIe switch", "across sockets".
std::string_view describe(PciePlace p);

}  // namespace gpudx
