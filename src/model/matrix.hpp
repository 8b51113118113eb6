#pragma once
// The compatibility matrix as gpudx holds it (docs/baseline-matrix-fleet.md): node classes, each with the nodes it
// covers and the set they were tested with; and what a check of one node against it finds, as JSON.
// rules/comparisons/matrix.hpp reads the TOML file and checks nodes; render/records.hpp prints a check.
#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/accept_thresholds.hpp"
#include "model/finding.hpp"
#include "model/node_record.hpp"

namespace gpudx {

// A day, as the matrix's review dates are written.
struct CalendarDate {
    int year = 0, month = 0, day = 0;
    auto operator<=>(const CalendarDate&) const = default;
    std::string str() const;  // 2026-06-30
    static std::optional<CalendarDate> parse(std::string_view text);  // YYYY-MM-DD
};
CalendarDate today_utc();

struct ClassMatch {
    std::string gpu_model;               // glob over the GPU model ("NVIDIA H200*"); empty: any
    std::optional<unsigned> gpu_count;   // GPUs a node of the class has; fewer is a divergence
    std::vector<std::string> hostnames;  // globs; empty: any hostname
};

// Allowed values; an empty list means "not constrained". Entries are globs, compared case-insensitively.
struct TestedSet {
    std::vector<std::string> driver_branches;  // "580"
    std::vector<std::string> driver_versions;  // "580.159.04", "580.*"
    std::vector<std::string> kernels;          // "6.18.44-fc-v657-gpu", "6.18.*"
    std::vector<std::string> vbios;            // "96.00.a5.00.1a"
    std::vector<std::string> fabric_manager;   // Fabric Manager versions
    std::vector<std::string> cuda;             // CUDA driver API version "13.0"
};

// InfiniBand/RoCE ports a node of the class has: every port of the link layer (on the devices named) must be ACTIVE
// at `rate_gbps` or faster, and there must be at least `ports` of them.
struct IbPortExpectation {
    std::string link_layer = "InfiniBand";  // or "Ethernet" (RoCE); compared case-insensitively
    std::vector<std::string> devices;       // globs over device names ("mlx5_*"); empty: every device
    unsigned ports = 0;
    std::optional<double> rate_gbps;  // absent: any rate
    unsigned line = 0;                // where the entry starts in the file
};

// What every node of the class has besides its GPUs and versions; absent = not judged against the class.
struct ClassExpectations {
    std::optional<unsigned> nvlinks_active;  // NVLinks active on each GPU (18 on HGX H100/H200; 0: none expected)
    unsigned nvlinks_line = 0;
    std::vector<IbPortExpectation> infiniband;
};

struct NodeClass {
    std::string name;
    std::string owner;
    std::string description;
    CalendarDate review_by;
    ClassMatch match;
    TestedSet tested;
    std::optional<AcceptThresholds> accept;
    ClassExpectations expect;
    unsigned line = 0;  // where the class starts in the file
};

struct Matrix {
    std::string path;
    std::vector<NodeClass> classes;  // file order: the first class that fits wins
};

// What a check of one node against the matrix finds (check_node_against_matrix).
struct MatrixCheck {
    const NodeClass* node_class = nullptr;
    std::vector<std::string> also_fitting;
    // Finding ids: matrix.no_class, matrix.review_overdue, matrix.gpu_model, matrix.gpu_count,
    // matrix.driver_untested, matrix.kernel_untested, matrix.vbios_untested, matrix.fabric_manager_untested,
    // matrix.cuda_untested, matrix.nvlinks_below, matrix.ib_port_missing, matrix.ib_port_not_active,
    // matrix.ib_rate_lower, matrix.value_unknown (info: the class constrains a value the snapshot lacks).
    std::vector<Finding> findings;
    int exit_code = 0;  // 0 conforming, 1 an error divergence (cards missing), 2 warnings only
};

nlohmann::json matrix_check_to_json(const Matrix& m, const NodeRecord& node, const MatrixCheck& c);

}  // namespace gpudx
