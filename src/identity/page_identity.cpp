#include "identity/page_identity.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "identity/allocation_scope.hpp"
#include "identity/join.hpp"
#include "identity/visible_devices.hpp"

namespace gpudx {
namespace {

// Each GPU's CUDA ordinal under one CUDA_VISIBLE_DEVICES value, by PCI address: CUDA numbers the entries it
// honours in the order written.
std::vector<std::pair<std::string, unsigned>> ordinals_under(const std::string& value, const std::vector<NodeGpu>& gpus) {
    std::vector<std::pair<std::string, unsigned>> out;
    unsigned ordinal = 0;
    for (auto& m : match_visible_devices(parse_visible_devices(value), gpus)) {
        if (m.gpus.size() == 1) out.emplace_back(normalize_pci(gpus[m.gpus[0]].pci), ordinal);
        ++ordinal;
    }
    return out;
}

std::optional<unsigned> ordinal_of(const std::vector<std::pair<std::string, unsigned>>& ordinals, const std::string& pci) {
    for (auto& [address, ordinal] : ordinals)
        if (address == pci) return ordinal;
    return std::nullopt;
}

void add_disagreement(PageIdentityRow& row, const std::string& a_name, const std::string& a, const std::string& b_name,
                      const std::string& b) {
    if (a.empty() || b.empty() || same_uuid(a, b)) return;
    row.disagreements.push_back(fmt::format("{} says {}, {} says {}", a_name, a, b_name, b));
}

}  // namespace

PageIdentity page_identity(const Snapshot& s, FindingsView findings) {
    PageIdentity out;
    IdentityTable t = join_identity(s);
    auto gpus = node_gpus(s);
    GpuScope scope = gpu_scope(s);
    std::optional<std::string> cvd;
    if (auto it = s.environment.variables.find("CUDA_VISIBLE_DEVICES"); it != s.environment.variables.end())
        cvd = it->second;
    std::vector<std::string> sources;
    if (scope.limited) sources.push_back(scope.source);
    if (cvd) sources.push_back("CUDA_VISIBLE_DEVICES=" + *cvd);
    out.allocation = join_strings(sources);
    auto caller = cvd ? ordinals_under(*cvd, gpus) : std::vector<std::pair<std::string, unsigned>>{};

    for (const auto& r : t.rows) {
        PageIdentityRow row;
        row.pci = r.pci;
        row.uuid = r.uuid();
        row.slot = r.slot;
        row.model = r.model;
        row.numa_node = r.numa_node;
        row.minor = r.minor ? r.minor : r.nvml_minor;
        row.dev_node = r.dev_node;
        row.nvml_index = r.nvml_index;
        row.cuda_ordinal = r.cuda_ordinal;

        // Where the sources disagree about this card: the page marks the row and says which source says what.
        if (!r.on_pcie && t.pcie_read) row.disagreements.push_back("not on PCIe, yet a driver source names it");
        if (r.vendor == "nvidia" && t.procfs_read && !r.in_procfs)
            row.disagreements.push_back("on PCIe but not in the driver's /proc/driver/nvidia/gpus");
        if (r.vendor == "nvidia" && t.nvml_read && !r.nvml_index) row.disagreements.push_back("NVML does not list it");
        if (r.dev_node_missing) row.disagreements.push_back(fmt::format("no /dev/nvidia{} for minor {}", r.minor.value_or(0), r.minor.value_or(0)));
        if (r.minor && r.nvml_minor && *r.minor != *r.nvml_minor)
            row.disagreements.push_back(fmt::format("procfs says minor {}, NVML says minor {}", *r.minor, *r.nvml_minor));
        add_disagreement(row, "procfs", r.procfs_uuid, "NVML", r.nvml_uuid);
        add_disagreement(row, "procfs", r.procfs_uuid, "CUDA", r.cuda_uuid);
        if (r.procfs_uuid.empty()) add_disagreement(row, "NVML", r.nvml_uuid, "CUDA", r.cuda_uuid);

        // The job's view: the allocation this environment names, the ordinal CUDA gives it here, and each process
        // read with --pid.
        if (scope.limited)
            row.job_view.push_back(fmt::format("{} ({})", scope.contains(r.pci) ? "allocated" : "not allocated",
                                               scope.source));
        if (cvd) {
            auto o = ordinal_of(caller, r.pci);
            row.job_view.push_back(o ? fmt::format("CUDA ordinal {} under CUDA_VISIBLE_DEVICES={}", *o, *cvd)
                                     : fmt::format("hidden by CUDA_VISIBLE_DEVICES={}", *cvd));
        }
        for (const auto& p : s.processes) {
            auto it = p.environment.variables.find("CUDA_VISIBLE_DEVICES");
            if (it == p.environment.variables.end()) continue;
            auto o = ordinal_of(ordinals_under(it->second, gpus), r.pci);
            row.job_view.push_back(o ? fmt::format("pid {} ({}): CUDA ordinal {}", p.pid, p.command, *o)
                                     : fmt::format("pid {} ({}): hidden", p.pid, p.command));
        }

        for (size_t i = 0; i < findings.size(); ++i) {
            if (findings.severity(i) == Severity::info) continue;
            bool names = false;
            for (size_t k = 0; k < findings.subject_count(i) && !names; ++k) {
                auto g = findings.subject(i, k);
                names = (!g.pci.empty() && normalize_pci(g.pci) == r.pci) ||
                        (!g.uuid.empty() && same_uuid(g.uuid, row.uuid));
            }
            auto id = findings.id(i);
            if (names && std::find(row.findings.begin(), row.findings.end(), id) == row.findings.end())
                row.findings.emplace_back(id);
        }
        out.rows.push_back(std::move(row));
    }
    return out;
}

namespace {

// The page of `s` and `d`, the findings being `findings` (d's own or the pack's).
NodePage page_of(const Snapshot& s, const Diagnosis& d, FindingsView findings) {
    NodePage page;
    page.node = s.host.hostname;
    page.collected_at = s.collected_at;
    page.kernel = s.host.kernel_release;
    // The kernel module's version is the driver's; NVML's (the user-space library) when the module's is unknown.
    page.driver = s.module.nvidia_driver_version.value_or(s.nvml.driver_version);
    if (page.driver.empty() && s.module.amdgpu_version) page.driver = "amdgpu " + *s.module.amdgpu_version;
    page.gpudx_version = s.gpudx_version;
    page.generated_by = std::string("gpudx ") + GPUDX_VERSION;
    page.snapshot = &s;
    page.collectors = s.collectors;
    auto identity = page_identity(s, findings);
    page.identity = std::move(identity.rows);
    page.allocation = std::move(identity.allocation);
    return page;
}

}  // namespace

NodePage node_page_of(const Snapshot& s, Diagnosis d) {
    NodePage page = page_of(s, d, FindingsView(d.findings));
    page.diagnosis = std::move(d);
    return page;
}

NodePage node_page_of(const Snapshot& s, const Diagnosis& summary, const PackedFindings& findings) {
    NodePage page = page_of(s, summary, FindingsView(findings));
    page.diagnosis = summary;
    page.diagnosis.findings.clear();
    page.packed_findings = &findings;
    return page;
}

}  // namespace gpudx
