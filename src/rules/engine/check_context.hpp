#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/finding.hpp"
#include "model/snapshot.hpp"
#include "rules/engine/rule.hpp"

namespace gpudx {

struct XidPolicy;           // rules/reference/xid_policy.hpp
struct SignatureCatalogue;  // rules/reference/signatures.hpp
struct ResultCodeTable;     // rules/reference/result_codes.hpp
struct NodeClass;           // model/matrix.hpp

struct DiagnoseOptions {
    std::optional<unsigned> expect_gpus;  // --expect-gpus N
    std::string since;                    // kernel-log window; empty: current boot
    const XidPolicy* xid_policy = nullptr;  // null: the built-in default
    const SignatureCatalogue* signatures = nullptr;  // null: the built-in catalogue
    const std::vector<ResultCodeTable>* result_codes = nullptr;  // null: the built-in tables (--error-codes)
    // Findings from comparisons made outside the rule families (the node record of `--baseline`): they
    // count toward the layers, the boundary and the verdict like any other.
    std::vector<Finding> extra_findings;
    // The node's class in the compatibility matrix (`--matrix`), when one fits: the facts its expectations settle
    // (a GPU's NVLinks short of nvlinks_active, the InfiniBand ports it names) are the matrix check's findings
    // (among extra_findings), so the families do not report them again (rules/comparisons/matrix.hpp).
    const NodeClass* node_class = nullptr;
};

struct CheckContext {
    const Snapshot& snapshot;
    const DiagnoseOptions& options;

    // GPU reference for a PCI address, with the UUID from whichever source knows it (procfs, NVML, CUDA).
    GpuRef gpu(std::string_view pci) const;
};

using CheckFamily = void (*)(const CheckContext&, std::vector<Finding>&);

// A rule family: one file of rules/families/, its table of rules and the function that applies them. `layer` is where the
// engine files gpudx.check_failed when the family throws: the layer the family judges, which the failure leaves
// unjudged.
struct RuleFamily {
    std::string_view name;
    Layer layer;
    std::span<const Rule> rules;
    CheckFamily run;
};
// Every family diagnose runs, in order (rules/engine/registry.cpp lists them).
const std::vector<RuleFamily>& check_families();

}  // namespace gpudx
