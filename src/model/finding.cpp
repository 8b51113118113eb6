#include "model/finding.hpp"

#include <algorithm>

#include "model/diagnosis.hpp"

namespace gpudx {

const char* to_string(Layer l) {
    switch (l) {
        case Layer::pcie: return "pcie";
        case Layer::module: return "module";
        case Layer::kernel_log: return "kernel_log";
        case Layer::libraries: return "libraries";
        case Layer::devices: return "devices";
        case Layer::driver: return "driver";
        case Layer::container: return "container";
        case Layer::allocation: return "allocation";
    }
    return "?";
}

const char* to_string(Severity s) {
    switch (s) {
        case Severity::info: return "info";
        case Severity::warning: return "warning";
        case Severity::error: return "error";
    }
    return "?";
}

std::optional<Layer> parse_layer(std::string_view s) {
    for (auto l : kAllLayers)
        if (s == to_string(l)) return l;
    return std::nullopt;
}

std::optional<Severity> parse_severity(std::string_view s) {
    for (auto v : {Severity::info, Severity::warning, Severity::error})
        if (s == to_string(v)) return v;
    return std::nullopt;
}

const char* subject_label(SubjectKind k) { return k == SubjectKind::nvswitch ? "nvswitch" : "gpu"; }
const char* subject_label(const GpuRef& g) { return subject_label(g.kind); }

std::string describe(const GpuRef& g) {
    if (g.kind == SubjectKind::nvswitch) return "NVSwitch at " + (g.pci.empty() ? std::string("unknown address") : g.pci);
    if (g.uuid.empty()) return "GPU at " + (g.pci.empty() ? std::string("unknown address") : g.pci) + " (UUID unknown)";
    if (g.pci.empty()) return g.uuid + " (PCI address unknown)";
    return g.uuid + " (" + g.pci + ")";
}

std::string describe(const ProcessRef& p) {
    std::string s = "pid " + std::to_string(p.pid) + " (" + (p.command.empty() ? std::string("command unknown") : p.command);
    if (!p.user.empty()) s += ", user " + p.user;
    if (!p.container.empty()) s += ", container " + p.container;
    if (!p.job.empty()) s += ", job " + p.job;
    return s + ")";
}

Diagnosis with_first_findings(const Diagnosis& d, FindingsView findings, size_t n) {
    Diagnosis head;
    head.layers = d.layers;
    head.boundary = d.boundary;
    head.verdict = d.verdict;
    head.exit_code = d.exit_code;
    for (size_t i = 0; i < std::min(n, findings.size()); ++i)
        findings.with(i, [&](const Finding& f) { head.findings.push_back(f); });
    return head;
}

std::string unreadable_layers(const Diagnosis& d) {
    std::string names;
    for (const auto& l : d.layers)
        if (l.unreadable) names += (names.empty() ? "" : ", ") + std::string(to_string(l.layer));
    return names;
}

const char* to_string(LayerState s) {
    switch (s) {
        case LayerState::ok: return "ok";
        case LayerState::warning: return "warning";
        case LayerState::failed: return "failed";
        case LayerState::not_evaluated: return "not_evaluated";
    }
    return "?";
}

}  // namespace gpudx
