#include "render/records.hpp"

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

std::string render_findings_text(const std::vector<Finding>& findings, bool color) {
    auto paint = [&](const char* code, std::string_view s) {
        return color ? fmt::format("\033[{}m{}\033[0m", code, s) : std::string(s);
    };
    std::string out;
    for (auto& f : findings) {
        auto sev = f.severity == Severity::error     ? paint("31", "ERROR")
                   : f.severity == Severity::warning ? paint("33", "WARN ")
                                                     : std::string("info ");
        out += fmt::format("{} [{}] {}\n", sev, f.id, strip_control(f.message));
        for (auto& g : f.subjects) out += fmt::format("      {}: {}\n", subject_label(g), strip_control(describe(g)));
        for (auto& e : f.evidence)
            out += fmt::format("      evidence: {} = {}\n", strip_control(e.source), strip_control(e.value));
        if (!f.next_step.empty()) out += fmt::format("      next: {}\n", strip_control(f.next_step));
        out += "\n";
    }
    return out;
}

std::string render_matrix_check_text(const Matrix& m, const NodeRecord& node, const MatrixCheck& c, bool color) {
    std::string out;
    out += fmt::format("gpudx matrix check — host {}, {} GPU(s) {}, driver {}, kernel {}\n",
                       node.hostname.empty() ? "(unknown)" : strip_control(node.hostname), node.gpus.size(),
                       dominant_gpu_model(node).empty() ? "(model unknown)" : dominant_gpu_model(node),
                       node.driver_version.empty() ? "(unknown)" : node.driver_version,
                       node.kernel_release.empty() ? "(unknown)" : node.kernel_release);
    if (c.node_class) {
        out += fmt::format("Class: {} (line {} of {}; owner {}; review by {})\n", c.node_class->name,
                           c.node_class->line, m.path, c.node_class->owner, c.node_class->review_by.str());
        if (!c.also_fitting.empty())
            out += fmt::format("Also fits: {} (the first fitting class in the file wins)\n", join_strings(c.also_fitting));
    } else {
        out += "Class: none fits\n";
    }
    out += "\n";
    bool any = false;
    for (auto& f : c.findings) any |= f.severity != Severity::info;
    out += render_findings_text(c.findings, color);
    if (!any) out += "The node is within its class's tested set.\n";
    out += fmt::format("Exit {}\n", c.exit_code);
    return out;
}

}  // namespace gpudx
