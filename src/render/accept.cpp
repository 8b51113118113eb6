// The text reports of gpudx accept: the run, and its comparison with an earlier record.
#include "render/accept.hpp"

#include <map>

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

std::string render_accept_comparison(const std::vector<AcceptChange>& changes) {
    if (changes.empty()) return "No changes against the earlier record.\n";
    std::string out;
    size_t worse_count = 0;
    for (auto& c : changes) worse_count += c.worse;
    out += fmt::format("{} change(s) against the earlier record, {} regression(s):\n", changes.size(), worse_count);
    for (auto& c : changes)
        out += fmt::format("  {} {}: {} -> {}\n", c.worse ? "WORSE  " : "changed", c.what, c.before, c.after);
    return out;
}

std::string render_accept_text(const AcceptReport& r, bool color, bool verbose) {
    auto paint = [&](TestStatus s, const std::string& text) {
        if (!color) return text;
        const char* code = s == TestStatus::pass ? "32" : s == TestStatus::warn ? "33" : s == TestStatus::fail ? "31" : "35";
        return fmt::format("\033[{}m{}\033[0m", code, text);
    };
    std::string out = fmt::format("gpudx accept ({}) on {} — kernel {}, driver {}, module {}\n", r.mode,
                                  r.node.empty() ? "?" : r.node, r.kernel.empty() ? "?" : r.kernel,
                                  r.driver_version.empty() ? "?" : r.driver_version,
                                  r.module_version.empty() ? "?" : r.module_version);
    for (auto& g : r.gpus)
        out += fmt::format("  GPU {} {} {} {} {} SMs, {}\n", g.ordinal, g.uuid, g.pci, g.name, g.sm_count, format_gib(g.total_memory));
    out += "\n";
    std::map<std::string, std::string> pci_of;
    for (auto& g : r.gpus) pci_of[g.uuid] = g.pci;
    for (auto& t : r.tests) {
        std::vector<std::string> subj;
        for (size_t i = 0; i < t.subjects.size() && i < 4; ++i)
            subj.push_back(short_uuid(t.subjects[i]) + (pci_of.count(t.subjects[i]) ? "(" + pci_of[t.subjects[i]] + ")" : ""));
        if (t.subjects.size() > 4) subj.push_back(fmt::format("+{}", t.subjects.size() - 4));
        std::string figs;
        for (auto& [k, v] : t.figures) {
            if (!(k.ends_with("_gbps") || k == "errors" || k == "wrong_values" || k == "sms_seen" || k == "tested_gib" ||
                  k == "context_ms" || k == "gpus"))
                continue;
            figs += fmt::format(" {}={:.4g}", k, v);
        }
        std::string status = fmt::format("{:<7}", to_string(t.status));
        out += fmt::format("  {} {:<18} {:<34}{}{}\n", paint(t.status, status), t.id, join_strings(subj, " "), figs,
                           t.required ? "" : " (not required)");
        if (!t.reason.empty() && t.status != TestStatus::pass) out += "          " + t.reason + "\n";
        if (verbose)
            for (auto& [k, v] : t.details) out += "          " + k + ": " + v + "\n";
    }
    TestStatus overall = r.verdict == "pass" ? TestStatus::pass : r.verdict == "warn" ? TestStatus::warn : TestStatus::fail;
    out += fmt::format("\nverdict: {} (exit {}), {:.1f} s\n", paint(overall, r.verdict), r.exit_code, r.wall_ms / 1000);
    return out;
}

}  // namespace gpudx
