// Comparing two acceptance records: what changed, and which changes are regressions.
#include "actions/accept.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "actions/accept_support.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {

using namespace accept_internal;

// ---- comparing -----------------------------------------------------------------------------------

std::vector<AcceptChange> compare_accept_reports(const AcceptReport& before, const AcceptReport& after) {
    std::vector<AcceptChange> out;
    auto field = [&](const char* name, const std::string& a, const std::string& b) {
        if (a != b) out.push_back({name, a.empty() ? "(unknown)" : a, b.empty() ? "(unknown)" : b, false});
    };
    field("node", before.node, after.node);
    field("kernel", before.kernel, after.kernel);
    field("module_version", before.module_version, after.module_version);
    field("driver_version", before.driver_version, after.driver_version);
    field("cuda_driver_version", before.cuda_driver_version ? std::to_string(*before.cuda_driver_version) : "",
          after.cuda_driver_version ? std::to_string(*after.cuda_driver_version) : "");
    field("image_digest", before.image_digest, after.image_digest);
    field("mode", before.mode, after.mode);

    std::map<std::string, const AcceptGpu*> gb, ga;
    for (auto& g : before.gpus) gb[to_lower(g.uuid)] = &g;
    for (auto& g : after.gpus) ga[to_lower(g.uuid)] = &g;
    for (auto& [u, g] : gb) {
        auto it = ga.find(u);
        if (it == ga.end()) out.push_back({"gpu " + g->uuid, g->pci, "(absent)", true});
        else if (normalize_pci(it->second->pci) != normalize_pci(g->pci))
            out.push_back({"gpu " + g->uuid + " pci", g->pci, it->second->pci, false});
    }
    for (auto& [u, g] : ga)
        if (!gb.count(u)) out.push_back({"gpu " + g->uuid, "(absent)", g->pci, false});

    if (before.verdict != after.verdict) {
        auto rank = [](const std::string& v) { return v == "pass" ? 0 : v == "warn" ? 1 : 2; };
        out.push_back({"verdict", before.verdict, after.verdict, rank(after.verdict) > rank(before.verdict)});
    }

    std::map<std::string, const SubTest*> tb, ta;
    for (auto& t : before.tests) tb[t.key()] = &t;
    for (auto& t : after.tests) ta[t.key()] = &t;
    for (auto& t : after.tests) {
        auto it = tb.find(t.key());
        if (it == tb.end()) {
            out.push_back({t.key(), "(absent)", to_string(t.status), false});
            continue;
        }
        const SubTest& old = *it->second;
        if (old.status != t.status)
            out.push_back({t.key(), to_string(old.status), std::string(to_string(t.status)) + (t.reason.empty() ? "" : ": " + t.reason),
                           status_rank(t.status) > status_rank(old.status)});
        for (auto& [name, v] : t.figures) {
            auto f = old.figures.find(name);
            if (f == old.figures.end()) continue;
            double was = f->second;
            if (name.ends_with("_gbps")) {
                if (was <= 0 || !std::isfinite(was) || !std::isfinite(v)) continue;
                double change = (v - was) / was;
                if (std::fabs(change) >= kThresholdWarnMargin)
                    out.push_back({t.key() + " " + name, fmt::format("{:.1f}", was),
                                   fmt::format("{:.1f} ({:+.1f} %)", v, change * 100), change <= -kThresholdWarnMargin});
            } else if (name == "errors" || name.ends_with("mismatches") || name == "wrong_values" || name == "gpus" ||
                       name == "sms_seen") {
                if (v != was) {
                    bool regress = name == "gpus" || name == "sms_seen" ? v < was : v > was;
                    out.push_back({t.key() + " " + name, fmt::format("{}", was), fmt::format("{}", v), regress});
                }
            }
        }
    }
    for (auto& t : before.tests)
        if (!ta.count(t.key())) out.push_back({t.key(), to_string(t.status), "(not in the new record)", true});
    return out;
}

}  // namespace gpudx
