#pragma once
// What an acceptance run is held to: a node class's floors, set in the compatibility matrix
// (rules/comparisons/matrix.hpp) or on the command line, and judged by `gpudx accept` (actions/accept.hpp).
#include <optional>
#include <string>

namespace gpudx {

// Bandwidth floors of a node class (GB/s, 1 GB = 1e9 bytes). A figure below its floor fails;
// within 5 % above it warns. Unset floors are not checked.
struct AcceptThresholds {
    std::optional<double> min_d2d_gbps;       // device-to-device copy, bytes read + bytes written per second
    std::optional<double> min_h2d_gbps;       // pinned host -> device, bytes per second
    std::optional<double> min_d2h_gbps;       // device -> pinned host
    std::optional<double> min_p2p_gbps;       // GPU -> GPU over NVLink, bytes per second one way
    std::optional<double> min_p2p_pcie_gbps;  // GPU -> GPU over PCIe (same switch or across root complexes)
    std::optional<double> min_memory_fraction;  // share of free memory the memory test must have covered (0..1)
    std::optional<std::string> pairs;          // permitted pairs: "all", "none" or "A:B,C:D" (UUID or PCI address)
};

inline constexpr double kThresholdWarnMargin = 0.05;

}  // namespace gpudx
