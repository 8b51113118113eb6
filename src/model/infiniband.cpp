#include "model/infiniband.hpp"

#include <algorithm>

namespace gpudx {

bool is_ib_link_error_counter(std::string_view name) {
    return std::find(std::begin(kIbLinkErrorCounters), std::end(kIbLinkErrorCounters), name) !=
           std::end(kIbLinkErrorCounters);
}

bool is_ib_error_counter(std::string_view name) {
    return is_ib_link_error_counter(name) || std::find(std::begin(kIbOtherErrorCounters), std::end(kIbOtherErrorCounters),
                                                       name) != std::end(kIbOtherErrorCounters);
}

std::optional<uint64_t> ib_counter_max(std::string_view name) {
    // Widths of drivers/infiniband/core/sysfs.c's PORT_PMA_ATTR table (IBA PortCounters).
    static constexpr std::pair<std::string_view, int> kWidths[] = {
        {"symbol_error", 16},
        {"link_error_recovery", 8},
        {"link_downed", 8},
        {"port_rcv_errors", 16},
        {"port_rcv_remote_physical_errors", 16},
        {"port_rcv_switch_relay_errors", 16},
        {"port_xmit_discards", 16},
        {"port_xmit_constraint_errors", 8},
        {"port_rcv_constraint_errors", 8},
        {"local_link_integrity_errors", 4},
        {"excessive_buffer_overrun_errors", 4},
        {"VL15_dropped", 16}};
    for (auto& [n, bits] : kWidths)
        if (n == name) return (uint64_t{1} << bits) - 1;
    return std::nullopt;
}

namespace {

// "0000:3a" of "0000:3a:00.0": the root bus, which names its host bridge (root complex).
std::string_view bus_of(std::string_view address) { return address.substr(0, 7); }

}  // namespace

PciePlace pcie_place(const PcieLayer& l, std::string_view a, std::string_view b) {
    auto up_a = pcie_path_up(l, a), up_b = pcie_path_up(l, b);
    if (up_a.empty() || up_b.empty()) return PciePlace::unknown;
    // The nearest bridge above both. One that has a bridge above it is a switch port; one without is a root port.
    for (size_t i = 1; i < up_a.size(); ++i)
        for (size_t j = 1; j < up_b.size(); ++j)
            if (up_a[i] == up_b[j]) return up_a[i]->parent.empty() ? PciePlace::same_root_port : PciePlace::same_switch;
    if (bus_of(up_a.back()->address) == bus_of(up_b.back()->address)) return PciePlace::same_root_complex;
    auto na = up_a.front()->numa_node, nb = up_b.front()->numa_node;
    if (!na || !nb || *na < 0 || *nb < 0) return PciePlace::unknown;
    return *na == *nb ? PciePlace::same_numa_node : PciePlace::across_sockets;
}

std::vector<GpuNearby> gpus_by_distance(const PcieLayer& l, std::string_view pci) {
    std::vector<GpuNearby> out;
    for (auto& gpu : l.gpus) out.push_back({gpu, pcie_place(l, pci, gpu)});
    std::stable_sort(out.begin(), out.end(), [](const GpuNearby& x, const GpuNearby& y) { return x.place < y.place; });
    return out;
}

std::string_view describe(PciePlace p) {
    switch (p) {
        case PciePlace::same_switch: return "same PCIe switch";
        case PciePlace::same_root_port: return "same root port";
        case PciePlace::same_root_complex: return "same root complex";
        case PciePlace::same_numa_node: return "same NUMA node, another root complex";
        case PciePlace::across_sockets: return "across sockets";
        case PciePlace::unknown: break;
    }
    return "place unknown";
}

}  // namespace gpudx
