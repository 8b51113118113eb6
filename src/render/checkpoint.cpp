// The text report of gpudx checkpoint, restore, migrate and state.
#include "render/checkpoint.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "model/device_map.hpp"

namespace gpudx {

namespace {

// "412.3 ms" below a second, "9.512 s" above: lock and unlock take milliseconds, checkpoints seconds.
std::string format_duration(double seconds) {
    return seconds < 1.0 ? fmt::format("{:.1f} ms", seconds * 1000) : fmt::format("{:.3f} s", seconds);
}

}  // namespace

std::string render_checkpoint_text(const CheckpointCommandResult& r) {
    std::string out;
    std::string pids;
    for (int pid : r.request.pids) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    std::string what = r.request.command == CheckpointCommand::single_step && r.request.action
                           ? "--action " + std::string(step_name(*r.request.action))
                           : std::string(command_name(r.request.command));
    out += fmt::format("gpudx {}: process{} {}\n", what, r.request.pids.size() > 1 ? "es" : "", pids);
    if (!r.usage_error.empty()) {
        out += "refused: " + r.usage_error + "\n";
        return out;
    }
    if (r.driver.load_error.empty() && r.driver.init) {
        out += fmt::format("driver: {} ({}); checkpoint API {}; restore onto other GPUs {}\n", r.driver.library_path,
                           describe_version(r.driver), r.driver.has_checkpoint_api() ? "present" : "MISSING",
                           r.driver.can_remap() ? "supported" : "not supported (needs 580+)");
    }
    if (!r.pairs.empty()) {
        out += fmt::format("device map {} (every GPU, as given to the driver):\n", r.request.device_map);
        for (const auto& p : r.pairs) {
            auto* from = gpu_by_uuid(r.gpus, p.old_uuid);
            auto* to = gpu_by_uuid(r.gpus, p.new_uuid);
            out += fmt::format("  {} -> {}{}\n", from ? describe_gpu(*from) : p.old_uuid, to ? describe_gpu(*to) : p.new_uuid,
                               p.old_uuid == p.new_uuid ? " (stays)" : "");
        }
    }
    if (!r.report.steps.empty()) {
        std::vector<CheckpointStep> columns;
        for (const auto& s : r.report.steps)
            if (!s.rollback && std::find(columns.begin(), columns.end(), s.step) == columns.end()) columns.push_back(s.step);
        out += fmt::format("{:<12}", "step time");
        for (auto c : columns) out += fmt::format("{:>14}", step_name(c));
        out += "\n";
        for (int pid : r.request.pids) {
            out += fmt::format("{:<12}", fmt::format("pid {}", pid));
            for (auto c : columns) {
                std::string cell = "-";
                for (const auto& s : r.report.steps)
                    if (s.pid == pid && s.step == c && !s.rollback)
                        cell = s.result.ok() ? format_duration(s.result.seconds) : "FAILED";
                out += fmt::format("{:>14}", cell);
            }
            out += "\n";
        }
    }
    if (r.report.failure) {
        const auto& f = *r.report.failure;
        out += fmt::format("FAILED: {}(pid {}) returned {} ({}): {}\n", driver_call_name(f.step), f.pid, f.result.name,
                           f.result.code, f.result.meaning);
        // The driver's sentence is terse; gpudx's table says what usually causes it.
        if (auto cause = usual_cause(f.result)) out += fmt::format("  which usually means: {}\n", *cause);
        for (const auto& s : r.report.steps)
            if (s.rollback)
                out += fmt::format("  undo: {} pid {}: {}\n", step_name(s.step), s.pid,
                                   s.result.ok() ? fmt::format("ok ({})", format_duration(s.result.seconds))
                                                 : fmt::format("{} ({}): {}", s.result.name, s.result.code, s.result.meaning));
    }
    for (const auto& o : r.report.final_states) {
        if (o.state_error.empty())
            out += fmt::format("pid {}: {}\n", o.pid, state_name(o.state));
        else
            out += fmt::format("pid {}: state unknown: {}\n", o.pid, o.state_error);
    }
    for (const auto& v : r.verify)
        if (!v.shim_path.empty() || r.pairs.empty()) out += fmt::format("identity of pid {}{}: {}\n", v.pid,
                              v.verdict.empty() ? "" : " (gpudx verify: " + v.verdict + ")", v.detail);
    for (const auto& n : r.notes) out += "note: " + n + "\n";
    if (r.report.seconds > 0 && !r.report.steps.empty()) out += fmt::format("total {}\n", format_duration(r.report.seconds));
    return out;
}

}  // namespace gpudx
