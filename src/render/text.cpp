#include <fmt/format.h>

#include <map>
#include <set>

#include "core/text.hpp"
#include "render/report.hpp"

namespace gpudx {
namespace {

struct Palette {
    bool on;
    std::string red() const { return on ? "\033[31m" : ""; }
    std::string yellow() const { return on ? "\033[33m" : ""; }
    std::string green() const { return on ? "\033[32m" : ""; }
    std::string dim() const { return on ? "\033[2m" : ""; }
    std::string bold() const { return on ? "\033[1m" : ""; }
    std::string reset() const { return on ? "\033[0m" : ""; }
};

std::string state_word(LayerState s, const Palette& p) {
    switch (s) {
        case LayerState::ok: return p.green() + "ok" + p.reset();
        case LayerState::warning: return p.yellow() + "warning" + p.reset();
        case LayerState::failed: return p.red() + "FAILED" + p.reset();
        case LayerState::not_evaluated: return p.dim() + "not evaluated" + p.reset();
    }
    return "?";
}

// "  pid 4242 python (uid 1000 alice): read; mapped libcuda.so.1 535.104.05 /opt/app/lib/libcuda.so.535.104.05".
std::string render_process_line(const ProcessView& p) {
    std::string who = strip_control(p.command.empty() ? std::string("?") : p.command);
    if (!p.user.empty()) who += ", user " + strip_control(p.user);
    else if (p.uid) who += fmt::format(", uid {}", *p.uid);
    if (const auto& c = p.environment.container; c.in_container)
        who += ", container " + strip_control(c.container_id.empty() ? c.runtime : c.runtime + " " + c.container_id.substr(0, 12));
    if (!p.slurm_job_id.empty()) who += ", job " + strip_control(p.slurm_job_id);
    std::string line = fmt::format("  pid {} ({}): {}", p.pid, who, name_of(p.state));
    if (p.state != ProcessViewState::read) return line + " — " + strip_control(p.problem) + "\n";
    std::string mapped;
    for (auto& m : p.mapped)
        mapped += fmt::format("{}{} {} {}", mapped.empty() ? "" : "; ", m.soname,
                              m.version.empty() ? "?" : strip_control(version_shown(m.version, m.version_from)),
                              strip_control(m.path));
    line += mapped.empty() ? "; no GPU library mapped" : "; mapped " + mapped;
    if (!p.open_devices.empty()) line += fmt::format("; {} GPU device file(s) open", p.open_devices.size());
    return line + "\n";
}

}  // namespace

PiecedText diagnosis_text_pieces(const Snapshot& s, const Diagnosis& d, FindingsView findings, const RenderOptions& o) {
    Palette p{o.color};
    std::string out;
    out += fmt::format("{}gpudx diagnose{} — {}{}\n", p.bold(), p.reset(),
                       s.host.hostname.empty() ? "unknown host" : strip_control(s.host.hostname),
                       s.root == "/" || s.root.empty() ? "" : fmt::format(" (replayed from {})", s.root));
    // Which vendors' GPUs this is about, where AMD's are among them (an NVIDIA node's report stays as it was).
    std::map<std::string, std::pair<unsigned, std::set<std::string>>> vendors;
    for (auto& dev : s.pcie.devices) {
        if (!dev.is_gpu) continue;
        auto& v = vendors[dev.vendor_id == 0x10de ? "NVIDIA" : dev.vendor_id == 0x1002 ? "AMD" : "other"];
        ++v.first;
        v.second.insert(dev.driver.empty() ? "no driver" : dev.driver);
    }
    if (vendors.count("AMD") || vendors.size() > 1) {
        std::string line;
        for (auto& [name, v] : vendors) {
            std::string drivers;
            for (auto& d : v.second) drivers += (drivers.empty() ? "" : ", ") + d;
            line += fmt::format("{}{} {} ({})", line.empty() ? "" : ", ", v.first, name, strip_control(drivers));
        }
        out += fmt::format("GPUs on PCIe: {}{}\n", line, vendors.size() > 1 ? " — mixed-vendor host" : "");
    }
    out += "\nLayers, bottom up:\n";
    for (auto& l : d.layers) {
        std::string mark = d.boundary && l.layer == *d.boundary ? "  <- failure boundary" : "";
        std::string trust = !l.trusted ? p.dim() + " (not trusted: below it is broken)" + p.reset() : "";
        out += fmt::format("  {:<11} {}{}{}\n", to_string(l.layer), state_word(l.state, p), trust, mark);
        if (l.state == LayerState::not_evaluated && !l.reason.empty())
            out += fmt::format("              {}{}{}\n", p.dim(), strip_control(l.reason), p.reset());
    }
    out += "\n";
    if (d.boundary) {
        out += fmt::format("{}Failure boundary: {}{}. Fix this layer first; the layers above it are not trusted.\n\n",
                           p.red(), to_string(*d.boundary), p.reset());
    }
    if (!s.processes.empty()) {
        out += "Processes, as each sees the GPU stack:\n";
        for (auto& p : s.processes) out += render_process_line(p);
        out += "\n";
    }
    const size_t shown = o.verbose ? findings.size() : findings.size() - findings.count(Severity::info);
    auto item = [findings, o](size_t i, std::string& out) {
        if (findings.severity(i) == Severity::info && !o.verbose) return;
        Palette p{o.color};
        findings.with(i, [&](const Finding& f) {
            auto sev = f.severity == Severity::error     ? p.red() + "ERROR" + p.reset()
                       : f.severity == Severity::warning ? p.yellow() + "WARN " + p.reset()
                                                         : "info ";
            out += fmt::format("{} [{}] {}\n", sev, f.id, strip_control(f.message));
            if (f.process) out += fmt::format("      process: {}\n", strip_control(describe(*f.process)));
            for (auto& g : f.subjects) out += fmt::format("      {}: {}\n", subject_label(g), strip_control(describe(g)));
            for (auto& e : f.evidence)
                out += fmt::format("      {}evidence: {} = {}{}\n", p.dim(), strip_control(e.source),
                                   strip_control(e.value), p.reset());
            if (!f.next_step.empty()) out += fmt::format("      next: {}\n", strip_control(f.next_step));
            out += "\n";
        });
    };
    std::string after;
    std::string unread = unreadable_layers(d);
    if (!unread.empty() && d.exit_code == kExitUnknown)
        after += fmt::format("{}Could not evaluate: {} could not be read, so the node is not called healthy.{}\n\n",
                             p.yellow(), unread, p.reset());
    else if (shown == 0)
        after += "No problems found.\n\n";
    if (o.verbose) {
        if (auto health = render_health_text(s); !health.empty()) after += health + "\n";
        after += "Collectors:\n";
        for (auto& c : s.collectors)
            after += fmt::format("  {:<12} {:<9} {:>8.2f} ms  {}\n", c.name, to_string(c.state), c.duration_ms,
                                 strip_control(c.message));
        after += "\n";
    }
    after += fmt::format("Verdict: {}{}{} (exit {})\n", p.bold(), name_of(d.verdict), p.reset(), d.exit_code);
    return PiecedText(std::move(out), findings.size(), item, std::move(after));
}

std::string render_diagnosis_text(const Snapshot& s, const Diagnosis& d, const RenderOptions& o) {
    return diagnosis_text_pieces(s, d, FindingsView(d.findings), o).whole();
}

std::string render_snapshot_text(const Snapshot& s) {
    std::string out;
    // Every value below comes from the node (or a saved snapshot): stripped of control characters.
    auto clean = [](std::string_view v) { return strip_control(v); };
    out += fmt::format("host {}  kernel {}  collected {}\n", clean(s.host.hostname), clean(s.host.kernel_release),
                       clean(s.collected_at));
    out += fmt::format("PCIe: {} devices, {} GPUs, {} NVSwitch bridges\n", s.pcie.devices.size(), s.pcie.gpus.size(),
                       s.pcie.nvswitches.size());
    for (auto& d : s.pcie.devices) {
        if (!d.is_gpu && !d.is_nvswitch) continue;
        out += fmt::format("  {} {} driver={} link={}x{}/{}x{} numa={} slot={}\n", clean(d.address),
                           d.device_name.empty() ? "GPU" : clean(d.device_name), d.driver.empty() ? "none" : clean(d.driver),
                           clean(d.link_current.speed_text), d.link_current.width.value_or(0), clean(d.link_max.speed_text),
                           d.link_max.width.value_or(0), d.numa_node.value_or(-1), d.slot.empty() ? "-" : clean(d.slot));
    }
    out += fmt::format("Module: {}\n", clean(s.module.nvidia_driver_version.value_or("nvidia not loaded")));
    for (auto& g : s.module.nvidia_gpus)
        out += fmt::format("  {} {} minor={}\n", clean(g.address), clean(g.uuid), g.minor ? std::to_string(*g.minor) : "?");
    if (!s.module.amd_gpus.empty() || s.module.kfd_topology_listed) {
        unsigned in_kfd = 0;
        for (auto& g : s.module.amd_gpus) in_kfd += g.in_kfd;
        out += fmt::format("amdgpu: {}, {} GPU(s), {} in the KFD topology\n",
                           s.module.amdgpu_version ? strip_control(*s.module.amdgpu_version) : std::string("version unknown"),
                           s.module.amd_gpus.size(), in_kfd);
        for (auto& g : s.module.amd_gpus)
            out += fmt::format("  {} {} {} render={} kfd_node={} {}\n", g.pci, g.uuid.empty() ? "-" : g.uuid,
                               g.card.empty() ? "-" : g.card, g.render_minor ? std::to_string(*g.render_minor) : "-",
                               g.kfd_node ? std::to_string(*g.kfd_node) : "-", strip_control(g.gfx_target));
    }
    out += fmt::format("Kernel log: {} ({} kept lines, {} Xid events)\n", clean(s.kernel_log.source), s.kernel_log.lines.size(),
                       s.kernel_log.xids.size());
    out += "Libraries:\n";
    if (!s.libraries.rocm_installs.empty())
        out += fmt::format("  ROCm release {}\n", s.libraries.rocm_release.empty() ? "unknown" : strip_control(s.libraries.rocm_release));
    for (auto& l : s.libraries.libraries)
        out += fmt::format("  {:<24} {}\n", clean(l.soname), l.chosen ? clean(l.chosen->real_path) : std::string("not found"));
    out += fmt::format("Device nodes: {}, processes holding them: {}\n", s.devices.nodes.size(), s.devices.holders.size());
    out += fmt::format("Container: {}\n", s.environment.container.in_container ? clean(s.environment.container.runtime) : "none");
    out += render_health_text(s);
    out += "Collectors:\n";
    for (auto& c : s.collectors)
        out += fmt::format("  {:<12} {:<9} {:>8.2f} ms  {}\n", strip_control(c.name), to_string(c.state), c.duration_ms,
                           strip_control(c.message));
    return out;
}

}  // namespace gpudx
