// The text report of gpudx verify: what a process's published identity says, ordinal by ordinal.
#include "render/verify.hpp"

#include <fmt/format.h>

namespace gpudx {


std::string render_verify_text(const VerifyReport& r) {
    std::string out = fmt::format("process {}: {}\n", r.pid, verdict_name(r.verdict));
    out += fmt::format("  {}\n", r.summary);
    out += fmt::format("  shim: {}\n", r.shim_loaded ? "loaded (" + r.shim_path + ")" : std::string("not loaded"));
    if (r.state) {
        out += fmt::format("  state: {} (mode {}, written {:.1f} s ago)\n", r.state_path, r.state->mode,
                           r.state_age_s < 0 ? 0.0 : r.state_age_s);
        out += fmt::format("  {:<7} {:<40} {:<13} {:<13} {:<9} {:>9}  {}\n", "ordinal", "uuid", "driver bus",
                           "actual bus", "source", "corrected", "verdict");
        for (const auto& o : r.ordinals)
            out += fmt::format("  {:<7} {:<40} {:<13} {:<13} {:<9} {:>9}  {}\n", o.state.ordinal, o.state.uuid,
                               shown_or_unknown(o.state.driver_bus), shown_or_unknown(o.state.current_bus), o.state.source, o.state.corrected,
                               verdict_name(o.verdict));
        for (const auto& o : r.ordinals) out += fmt::format("  ordinal {}: {}\n", o.state.ordinal, o.explanation);
    }
    if (!r.libraries.empty()) {
        out += "  identity-caching libraries mapped:";
        for (const auto& l : r.libraries) out += " " + l;
        out += "\n";
    }
    if (!r.cannot_correct.empty()) {
        out += "  what the shim cannot correct:\n";
        for (const auto& c : r.cannot_correct) out += "    - " + c + "\n";
    }
    return out;
}

}  // namespace gpudx
