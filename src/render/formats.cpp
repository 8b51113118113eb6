#include "render/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/text.hpp"
#include "model/packed_findings.hpp"
#include "render/prometheus.hpp"

namespace gpudx {

namespace {

// Info metrics: the node's versions and class, and one series per GPU (value 1). They change only when the node
// does (an upgrade, a card replaced), so joining on them (`* on(instance) group_left(class) gpudx_node_info`)
// groups any other series by class at fleet scale.
void render_info_metrics(std::string& out, const PrometheusOptions& o) {
    const NodeRecord& r = o.node;
    prometheus_family(out, "gpudx_node_info", "gauge",
                      "The node's driver (loaded), nvidia.ko module file, kernel and CUDA driver API "
                      "versions and its matrix class (value 1).");
    out += fmt::format("gpudx_node_info{{driver=\"{}\",module=\"{}\",kernel=\"{}\",cuda=\"{}\",class=\"{}\"}} 1\n",
                       escape_prometheus_label(r.driver_version), escape_prometheus_label(r.module_file_version),
                       escape_prometheus_label(r.kernel_release),
                       escape_prometheus_label(cuda_version_text(r.cuda_driver_version)),
                       escape_prometheus_label(o.node_class));
    prometheus_family(out, "gpudx_gpu_info", "gauge",
                      "One series per GPU, joined by PCI address across PCIe, procfs, NVML and CUDA "
                      "(value 1); uuid is empty when no layer knows it.");
    for (auto& g : r.gpus)
        out += fmt::format("gpudx_gpu_info{{uuid=\"{}\",pci=\"{}\",slot=\"{}\",model=\"{}\",vbios=\"{}\"}} 1\n",
                           escape_prometheus_label(g.uuid), escape_prometheus_label(g.pci),
                           escape_prometheus_label(g.slot), escape_prometheus_label(g.model),
                           escape_prometheus_label(to_lower(g.vbios)));
}

// Xid events in the kernel-log window (the current boot unless --since) by code and GPU: a counter that starts
// again at a reboot, which rate() and increase() take as a reset.
void render_xid_counts(std::string& out, const std::vector<XidCount>& counts) {
    prometheus_family(out, "gpudx_xid_events_total", "counter",
                      "Xid events the kernel logged since boot (or --since), by code and GPU.");
    for (auto& c : counts)
        out += fmt::format("gpudx_xid_events_total{{code=\"{}\",pci=\"{}\"}} {}\n", c.code,
                           escape_prometheus_label(c.pci), c.count);
}

}  // namespace

std::vector<XidCount> xid_counts(const KernelLog& log) {
    std::map<std::pair<int, std::string>, uint64_t> counts;
    for (auto& t : log.tallies)
        if (t.kind == TallyKind::xid) counts[{t.code, t.device}] += t.count;
    if (counts.empty())
        for (auto& x : log.xids) ++counts[{x.code, x.pci}];
    std::vector<XidCount> out;
    out.reserve(counts.size());
    for (auto& [key, n] : counts) out.push_back({key.first, key.second, n});
    return out;
}

namespace {

// The series of render_prometheus, the gpudx_finding ones written by `finding_series(series)`, which calls
// series(id, layer, severity, uuid, pci) for each finding and GPU (a finding of no GPU once, with both empty).
template <typename FindingSeries>
std::string prometheus_text(const Snapshot& s, const Diagnosis& d, const PrometheusOptions& o,
                            FindingSeries finding_series) {
    std::string out;
    prometheus_family(out, "gpudx_finding", "gauge",
                      "A finding of gpudx diagnose, one series per finding and GPU (value 1).");
    // Views into the findings (the diagnosis's or the pack), which outlive this function.
    std::set<std::tuple<std::string_view, std::string_view, std::string_view>> seen;
    // Two findings with the same id on the same GPU would be duplicate series, and node_exporter drops the whole
    // file over one duplicate: the first stands.
    finding_series([&](std::string_view id, Layer layer, Severity severity, std::string_view uuid, std::string_view pci) {
        if (!seen.emplace(id, uuid, pci).second) return;
        out += fmt::format("gpudx_finding{{id=\"{}\",layer=\"{}\",severity=\"{}\",uuid=\"{}\",pci=\"{}\"}} 1\n",
                           escape_prometheus_label(id), to_string(layer), to_string(severity),
                           escape_prometheus_label(uuid), escape_prometheus_label(pci));
    });
    prometheus_family(out, "gpudx_layer_status", "gauge",
                      "State of each layer: 1 for the current state, 0 for the others.");
    for (auto& l : d.layers)
        for (auto st : {LayerState::ok, LayerState::warning, LayerState::failed, LayerState::not_evaluated})
            out += fmt::format("gpudx_layer_status{{layer=\"{}\",state=\"{}\"}} {}\n", to_string(l.layer),
                               to_string(st), l.state == st ? 1 : 0);
    prometheus_family(out, "gpudx_failure_boundary", "gauge",
                      "The lowest layer with an error (value 1), absent when healthy.");
    if (d.boundary) out += fmt::format("gpudx_failure_boundary{{layer=\"{}\"}} 1\n", to_string(*d.boundary));
    prometheus_family(out, "gpudx_collector_success", "gauge", "Whether a collector produced data (1) or not (0).");
    for (auto& c : s.collectors)
        out += fmt::format("gpudx_collector_success{{collector=\"{}\"}} {}\n", escape_prometheus_label(c.name),
                           c.state == CollectorState::ok ? 1 : 0);
    prometheus_family(out, "gpudx_collector_duration_seconds", "gauge", "Time each collector took.");
    for (auto& c : s.collectors)
        out += fmt::format("gpudx_collector_duration_seconds{{collector=\"{}\"}} {:.6f}\n",
                           escape_prometheus_label(c.name), c.duration_ms / 1000.0);
    prometheus_family(out, "gpudx_gpus", "gauge", "GPUs seen by each source.");
    out += fmt::format("gpudx_gpus{{source=\"pcie\"}} {}\n", s.pcie.gpus.size());
    out += fmt::format("gpudx_gpus{{source=\"procfs\"}} {}\n", s.module.nvidia_gpus.size());
    if (s.nvml.device_count) out += fmt::format("gpudx_gpus{{source=\"nvml\"}} {}\n", *s.nvml.device_count);
    if (s.cuda.caller.device_count) out += fmt::format("gpudx_gpus{{source=\"cuda\"}} {}\n", *s.cuda.caller.device_count);
    prometheus_family(out, "gpudx_exit_code", "gauge",
                      "Exit code of the diagnosis: 0 healthy, 1 errors, 2 warnings, 3 unknown.");
    out += fmt::format("gpudx_exit_code {}\n", d.exit_code);
    render_xid_counts(out, o.xid_counts ? *o.xid_counts : xid_counts(s.kernel_log));
    render_info_metrics(out, o);
    return out;
}

}  // namespace

std::string render_prometheus(const Snapshot& s, const Diagnosis& d, const PrometheusOptions& o) {
    return render_prometheus(s, d, FindingsView(d.findings), o);
}

std::string render_prometheus(const Snapshot& s, const Diagnosis& d, FindingsView findings, const PrometheusOptions& o) {
    return prometheus_text(s, d, o, [&](const auto& series) {
        for (size_t i = 0; i < findings.size(); ++i) {
            if (findings.subject_count(i) == 0) series(findings.id(i), findings.layer(i), findings.severity(i), {}, {});
            for (size_t k = 0; k < findings.subject_count(i); ++k) {
                auto g = findings.subject(i, k);
                series(findings.id(i), findings.layer(i), findings.severity(i), g.uuid, g.pci);
            }
        }
    });
}

namespace {
std::optional<size_t> most_severe(FindingsView findings, Severity at_least) {
    for (size_t i = 0; i < findings.size(); ++i)  // sorted: errors first, lowest layer first
        if (findings.severity(i) >= at_least) return i;
    return std::nullopt;
}
const Finding* most_severe(const Diagnosis& d, Severity at_least) {
    auto i = most_severe(FindingsView(d.findings), at_least);
    return i ? &d.findings[*i] : nullptr;
}

std::string short_subject(const Finding& f) {
    if (f.subjects.empty()) return {};
    auto& g = f.subjects.front();
    std::string s = g.uuid.empty() ? "" : g.uuid;
    if (!g.pci.empty()) s += (s.empty() ? "" : " ") + g.pci;
    if (f.subjects.size() > 1) s += fmt::format(" +{}", f.subjects.size() - 1);
    return s;
}

// The UUID's first group and the whole PCI address: still unambiguous on one node, and 28 characters
// shorter, for lines of at most 80.
std::string shorter_subject(const Finding& f) {
    if (f.subjects.empty()) return {};
    auto& g = f.subjects.front();
    std::string s = g.uuid.substr(0, std::min<size_t>(g.uuid.size(), 12));
    if (!g.pci.empty()) s += (s.empty() ? "" : " ") + g.pci;
    if (f.subjects.size() > 1) s += fmt::format(" +{}", f.subjects.size() - 1);
    return s;
}
}  // namespace

std::optional<SlurmReason> slurm_reason(const Diagnosis& d) {
    auto* f = most_severe(d, Severity::error);
    if (!f) return std::nullopt;
    std::string subject = short_subject(*f);
    std::string more = d.findings.size() > 1 && d.findings[1].severity == Severity::error ? "(+more)" : "";
    auto rest = [&](const std::string& gpu) { return gpu.empty() ? more : more.empty() ? gpu : gpu + " " + more; };
    SlurmReason reason{f->id, rest(subject)};
    // The UUID is the longest part: keep its first group, the PCI address stays whole.
    if (!reason.fits() && !subject.empty()) reason.rest = rest(shorter_subject(*f));
    return reason;
}

namespace {
// Why a diagnosis could not evaluate the node, for one-line formats: the layers that could not be read.
std::string could_not_evaluate(const Diagnosis& d) {
    std::string unread = unreadable_layers(d);
    return unread.empty() ? "could not evaluate any layer" : "could not read " + unread;
}
}  // namespace

PluginResult node_problem_detector(const Diagnosis& d) { return node_problem_detector(d, FindingsView(d.findings)); }

PluginResult node_problem_detector(const Diagnosis& d, FindingsView findings) {
    if (d.exit_code == kExitUnknown) return {2, "gpudx: " + could_not_evaluate(d)};
    auto most = most_severe(findings, Severity::error);
    if (!most) {
        auto warnings = findings.count(Severity::warning);
        return {0, fit(fmt::format("gpudx: {} ({} warnings)", name_of(d.verdict), warnings), 80)};
    }
    return findings.with(*most, [](const Finding& f) -> PluginResult {
        std::string line = fmt::format("{} {}: {}", f.id, short_subject(f), f.message);
        // The message must not vanish behind a 40-character UUID.
        if (line.size() > 80) line = fmt::format("{} {}: {}", f.id, shorter_subject(f), f.message);
        return {1, strip_control(fit(line, 80))};
    });
}

PluginResult nagios(const Snapshot& s, const Diagnosis& d) { return nagios(s, d, FindingsView(d.findings)); }

PluginResult nagios(const Snapshot& s, const Diagnosis& d, FindingsView findings) {
    std::string perf = fmt::format("| errors={} warnings={} gpus_pcie={}", findings.count(Severity::error),
                                   findings.count(Severity::warning), s.pcie.gpus.size());
    if (d.exit_code == kExitUnknown) return {3, "GPUDX UNKNOWN - " + could_not_evaluate(d) + " " + perf};
    auto most = most_severe(findings, Severity::warning);
    if (!most) return {0, "GPUDX OK - " + std::string(name_of(d.verdict)) + " " + perf};
    return findings.with(*most, [&](const Finding& f) -> PluginResult {
        std::string head = f.severity == Severity::error ? "GPUDX CRITICAL - " : "GPUDX WARNING - ";
        std::string subject = short_subject(f);
        return {f.severity == Severity::error ? 2 : 1,
                strip_control(head + f.id + (subject.empty() ? "" : " " + subject) + ": " + f.message + " " + perf)};
    });
}

}  // namespace gpudx
