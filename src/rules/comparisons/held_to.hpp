#pragma once
// A node held to its record (`--baseline`) and to its class's tested set (`--matrix`) beside the diagnosis:
// what `gpudx diagnose` and the agent both add to the findings, and the class the Prometheus format names.
#include <optional>
#include <string>
#include <vector>

#include "model/finding.hpp"
#include "model/matrix.hpp"
#include "model/node_record.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

struct HeldTo {
    std::vector<Finding> findings;  // the record's changes, then the matrix's divergences
    std::string node_class;         // the matrix class that fits the node; empty: no matrix, or none fits
    // The same class, for DiagnoseOptions::node_class: the facts its expectations settle are among `findings`.
    // Points into the matrix given; null when none fits.
    const NodeClass* class_held_to = nullptr;
};

HeldTo hold_node_to(const Snapshot& s, const std::optional<NodeRecord>& baseline, const std::optional<Matrix>& matrix);

}  // namespace gpudx
