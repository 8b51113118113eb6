#include "rules/engine/diagnose.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "rules/engine/families.hpp"

namespace gpudx {

namespace {

constexpr Rule kRules[] = {
    {"gpudx.check_failed", std::nullopt, Severity::warning, {},
     "a rule family threw: the layer it judges is left unjudged (a gpudx bug, reported with the family's name)", {},
     {Layer::pcie, Layer::module, Layer::kernel_log, Layer::libraries, Layer::devices, Layer::driver,
      Layer::container, Layer::allocation}},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

// Collectors whose data each layer rests on.
std::vector<Collector> collectors_of(Layer l) {
    switch (l) {
        case Layer::pcie: return {Collector::pcie};
        case Layer::module: return {Collector::module};
        case Layer::kernel_log: return {Collector::kernel_log};
        case Layer::libraries: return {Collector::libraries};
        case Layer::devices: return {Collector::devices};
        case Layer::driver: return {Collector::nvml, Collector::cuda, Collector::rocm_smi};
        case Layer::container: return {Collector::environment};
        case Layer::allocation: return {Collector::environment};
    }
    return {};
}

// A layer is not evaluated when none of its collectors produced data.
std::optional<std::string> not_evaluated_reason(const Snapshot& s, Layer l) {
    std::vector<std::string> why;
    for (auto collector : collectors_of(l)) {
        auto* c = s.collector(collector);
        if (!c && collector == Collector::rocm_smi) continue;  // asked only on nodes with a KFD topology
        if (!c) {
            why.push_back(fmt::format("{}: not collected", to_string(collector)));
            continue;
        }
        if (c->state == CollectorState::ok) return std::nullopt;
        std::string msg = c->message;
        if (!c->path.empty()) msg += " (" + c->path + ")";
        why.push_back(fmt::format("{}: {}", to_string(collector), msg.empty() ? to_string(c->state) : msg));
    }
    std::string joined;
    for (auto& w : why) joined += (joined.empty() ? "" : "; ") + w;
    return joined;
}

// Layers every Linux node has: a PCI bus, procfs and a kernel log. Not reading one of them is never "nothing
// there"; the node cannot be called healthy without it. Other layers may be absent for good (no NVIDIA library
// on an AMD node, --no-driver), but any layer whose collector failed (an error, a deadline) could not be read
// either.
bool every_node_has(Layer l) { return l == Layer::pcie || l == Layer::module || l == Layer::kernel_log; }

bool collector_failed(const Snapshot& s, Layer l) {
    for (auto collector : collectors_of(l))
        if (auto* c = s.collector(collector); c && (c->state == CollectorState::error || c->state == CollectorState::timed_out))
            return true;
    return false;
}

}  // namespace

constinit const RuleTable kEngineRules{"engine", kRules};

Diagnosis diagnose(const Snapshot& snapshot, const DiagnoseOptions& options) {
    return diagnose(snapshot, options, check_families());
}

Diagnosis diagnose(const Snapshot& snapshot, const DiagnoseOptions& options, std::span<const RuleFamily> families) {
    Diagnosis d;
    CheckContext ctx{snapshot, options};
    // Fault-isolation boundary: each rule family. One that throws is reported, the others still run.
    for (auto& fam : families) {
        try {
            fam.run(ctx, d.findings);
        } catch (const std::exception& e) {
            d.findings.push_back(rule("gpudx.check_failed")
                                     .finding_in(fam.layer, Severity::warning,
                                                 fmt::format("check family {} failed: {}", fam.name, e.what()),
                                                 {{},
                                                  {},
                                                  "Report this as a gpudx bug with the snapshot attached "
                                                  "(gpudx snapshot -o FILE)."}));
        }
    }
    d.findings.insert(d.findings.end(), options.extra_findings.begin(), options.extra_findings.end());
    std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& a, const Finding& b) {
        if (a.severity != b.severity) return a.severity > b.severity;
        return a.layer < b.layer;
    });

    bool any_evaluated = false, any_unreadable = false;
    for (auto l : kAllLayers) {
        LayerReport r;
        r.layer = l;
        for (auto& f : d.findings) {
            if (f.layer != l) continue;
            if (f.severity == Severity::error) ++r.errors;
            if (f.severity == Severity::warning) ++r.warnings;
        }
        auto why_not = not_evaluated_reason(snapshot, l);
        if (r.errors) {
            r.state = LayerState::failed;
            r.reason = fmt::format("{} error(s), {} warning(s)", r.errors, r.warnings);
        } else if (why_not) {
            r.state = LayerState::not_evaluated;
            r.reason = *why_not;
            r.unreadable = every_node_has(l) || collector_failed(snapshot, l);
        } else if (r.warnings) {
            r.state = LayerState::warning;
            r.reason = fmt::format("{} warning(s)", r.warnings);
        } else {
            r.state = LayerState::ok;
        }
        if (r.state != LayerState::not_evaluated) any_evaluated = true;
        if (r.unreadable) any_unreadable = true;
        if (r.errors && !d.boundary) d.boundary = l;
        r.trusted = !d.boundary || l == *d.boundary ? true : false;
        if (d.boundary && l != *d.boundary) r.trusted = false;
        d.layers.push_back(r);
    }

    bool errors = std::any_of(d.findings.begin(), d.findings.end(), [](auto& f) { return f.severity == Severity::error; });
    bool warnings = std::any_of(d.findings.begin(), d.findings.end(), [](auto& f) { return f.severity == Severity::warning; });
    if (errors) {
        d.verdict = Verdict::unhealthy;
        d.exit_code = kExitErrors;
    } else if (!any_evaluated || any_unreadable) {
        // Fail closed: what could not be read may hold the error that would drain the node.
        d.verdict = Verdict::unknown;
        d.exit_code = kExitUnknown;
    } else if (warnings) {
        d.verdict = Verdict::degraded;
        d.exit_code = kExitWarnings;
    } else {
        d.verdict = Verdict::healthy;
        d.exit_code = kExitHealthy;
    }
    return d;
}

}  // namespace gpudx
