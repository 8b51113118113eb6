// Each process named with --pid, as it sees the GPU stack: the node's libraries, container and allocation rules
// run again over its own view (its loader, its environment, its /dev), and the rules only a live process answers
// (what it has mapped, what it holds open). Every finding names the process.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/text.hpp"
#include "identity/visible_devices.hpp"
#include "rules/engine/diagnose.hpp"
#include "rules/engine/families.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"process.gone", Layer::container, Severity::warning, {C::environment},
     "a process named with --pid exited before or while gpudx read it: nothing is judged for it"},
    {"process.denied", Layer::container, Severity::warning, {C::environment},
     "gpudx may not read a process named with --pid (another user's): run as its owner or root"},
    {"process.libcuda_version_mismatch", Layer::libraries, Severity::error, {C::libraries, C::module},
     "a process has mapped a libcuda or libnvidia-ml of another version than the kernel module"},
    {"process.library_not_hosts", Layer::libraries, Severity::warning, {C::libraries},
     "a process has mapped a driver library that is not the host's (an application's or image's copy)"},
    {"process.stub_mapped", Layer::libraries, Severity::error, {C::libraries},
     "a process has mapped the CUDA toolkit's link-time stub libcuda or libnvidia-ml: it has no driver behind it"},
    {"process.library_deleted", Layer::libraries, Severity::warning, {C::libraries},
     "a process runs on a driver library deleted since it was mapped (the driver was upgraded under it)"},
    {"process.image_driver_library", Layer::container, Severity::warning, {C::libraries, C::module},
     "a process in its own mount namespace finds its image's own copy of libcuda or libnvidia-ml, of another "
     "version than the host's driver"},
    {"process.gpus_open", Layer::devices, Severity::info, {C::devices, C::module},
     "the GPUs a process holds open, by UUID and PCI address"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }


ProcessRef process_ref(const ProcessView& v) {
    ProcessRef r;
    r.pid = v.pid;
    r.command = v.command;
    r.user = !v.user.empty() ? v.user : v.uid ? fmt::format("uid {}", *v.uid) : std::string();
    const auto& c = v.environment.container;
    if (c.in_container)
        r.container = c.runtime.empty() ? c.container_id.substr(0, 12)
                                        : c.runtime + (c.container_id.empty() ? "" : " " + c.container_id.substr(0, 12));
    r.job = v.slurm_job_id;
    return r;
}

// The node's snapshot with the process's libraries, environment and device nodes in place of gpudx's own.
Snapshot as_seen_by(const Snapshot& s, const ProcessView& v) {
    Snapshot out;
    out.host = s.host;
    out.pcie = s.pcie;
    out.module = s.module;
    out.nvml = s.nvml;
    out.cuda = s.cuda;
    out.rocm_smi = s.rocm_smi;
    out.collectors = s.collectors;
    out.libraries = v.libraries;
    out.environment = v.environment;
    out.devices.nodes = v.device_nodes;
    return out;
}

// The node's families judged again over a process's view. The AMD family holds the ROCm counterparts
// (ROCR_/HIP_VISIBLE_DEVICES, /dev/kfd and render nodes a CUDA job can reach, mixed ROCm releases); its rules about
// the node alone say the same for every view and are dropped as the node's own.
std::span<const RuleFamily> view_families() {
    static const RuleFamily families[] = {kLibrariesFamily, kContainerFamily, kAllocationFamily, kAmdFamily};
    return families;
}

std::vector<Finding> judge(const Snapshot& s, const DiagnoseOptions& options) {
    DiagnoseOptions o = options;
    o.extra_findings.clear();  // a baseline's findings are the node's, counted once
    return diagnose(s, o, view_families()).findings;
}

std::string finding_key(const Finding& f) { return f.id + '\n' + f.message; }

// The kernel module's version and where it was read, for the evidence.
std::vector<Evidence> module_evidence(const Snapshot& s) {
    std::vector<Evidence> ev{{"/proc/driver/nvidia/version", s.module.nvidia_driver_version.value_or("")}};
    for (auto& f : s.module.files)
        if (f.name == "nvidia" && !f.path.empty()) ev.push_back({f.path, version_shown(f.version, kVersionFromName)});
    return ev;
}

const ResolvedLibrary* host_library(const Snapshot& s, std::string_view soname) {
    for (auto& l : s.libraries.libraries)
        if (l.soname == soname) return &l;
    return nullptr;
}

void mapped_libraries(const Snapshot& s, const ProcessView& v, std::vector<Finding>& out) {
    const auto& module = s.module.nvidia_driver_version;
    for (auto& m : v.mapped) {
        if (!is_driver_library(m.soname)) continue;
        if (m.deleted) {
            Finding f = rule("process.library_deleted").finding({});
            f.message = fmt::format("the process still runs on {} {} ({}), deleted since it was mapped: the driver was "
                                    "upgraded or removed under it",
                                    m.soname, version_shown(m.version, m.version_from), m.path);
            f.evidence.push_back({fmt::format("/proc/{}/maps", v.pid), m.path + " (deleted)"});
            f.next_step = "Restart the process (or the job) so it loads the installed driver libraries.";
            out.push_back(std::move(f));
        }
        if (is_toolkit_stub(m.path)) {
            Finding f = rule("process.stub_mapped").finding({});
            f.message = fmt::format("the process has mapped {} as {}: the CUDA toolkit's link-time stub, with no driver "
                                    "behind it ({})",
                                    m.path, m.soname,
                                    m.soname == "libcuda.so.1" ? "every CUDA call fails with CUDA_ERROR_STUB_LIBRARY, "
                                                                 "error 34"
                                                               : "NVML cannot initialise");
            f.evidence.push_back({fmt::format("/proc/{}/maps", v.pid), m.path});
            f.next_step = "Take the stubs folder off the process's LD_LIBRARY_PATH (and out of its image's "
                          "/etc/ld.so.conf.d, then `ldconfig`) and restart it: stubs are for linking only.";
            out.push_back(std::move(f));
            continue;
        }
        if (module && !m.version.empty() && m.version != *module) {
            Finding f = rule("process.libcuda_version_mismatch").finding({});
            f.message = fmt::format("the process has mapped {} {} ({}) but the kernel module is {}: {}", m.soname,
                                    version_shown(m.version, m.version_from), m.path, *module,
                                    m.soname == "libnvidia-ml.so.1" ? "NVML fails with \"Driver/library version mismatch\""
                                                                    : "cuInit fails or the driver misbehaves");
            f.evidence.push_back({fmt::format("/proc/{}/maps", v.pid),
                                  fmt::format("{} (version {})", m.path, version_shown(m.version, m.version_from))});
            for (auto& e : module_evidence(s)) f.evidence.push_back(std::move(e));
            f.next_step = fmt::format(
                "Find where the process got {}: a copy in its application folder, on its LD_LIBRARY_PATH or in its "
                "container image shadows the host's driver. Remove it (applications and images must not ship "
                "libcuda) or run the container with the NVIDIA runtime, which injects the host's libraries; restart "
                "the process.",
                m.path);
            out.push_back(std::move(f));
            continue;
        }
        const auto* host = host_library(s, m.soname);
        const LibraryCopy* pick = host && host->chosen ? &*host->chosen : nullptr;
        bool same_file = pick && (pick->real_path == m.path || pick->path == m.path) && !v.own_mount_namespace.value_or(false);
        bool same_version = pick && !pick->version.empty() && pick->version == m.version;
        if (same_file || same_version) continue;
        Finding f = rule("process.library_not_hosts").finding({});
        f.message = fmt::format("the process has mapped {} {} from {}, not the host's: {}", m.soname,
                                version_shown(m.version, m.version_from), m.path,
                                pick ? fmt::format("the host's loader picks {} ({})", pick->real_path, version_shown(*pick))
                                     : std::string("the host's loader finds no ") + m.soname);
        f.evidence.push_back({fmt::format("/proc/{}/maps", v.pid), m.path});
        if (pick) f.evidence.push_back({pick->path, fmt::format("-> {} ({})", pick->real_path, host->reason)});
        f.next_step = "A copy shipped with the application or its image outlives driver upgrades: remove it from the "
                      "application's folder or image and let the loader find the driver's own.";
        out.push_back(std::move(f));
    }
}

// A container image's own libcuda: the classic reason a container's CUDA breaks after a host driver upgrade.
void image_driver_libraries(const Snapshot& s, const ProcessView& v, std::vector<Finding>& out) {
    if (!v.own_mount_namespace.value_or(false)) return;
    for (auto& lib : v.libraries.libraries) {
        if (!is_driver_library(lib.soname)) continue;
        const auto* host = host_library(s, lib.soname);
        std::string host_version = s.module.nvidia_driver_version.value_or(
            host && host->chosen ? host->chosen->version : std::string());
        if (host_version.empty()) continue;
        for (auto& c : lib.copies) {
            // The CUDA forward-compatibility package is a deliberate copy, judged by the libraries rules.
            if (c.version.empty() || c.version == host_version || !c.present || c.found_by == "compat dir") continue;
            bool picked = lib.chosen && lib.chosen->path == c.path;
            Finding f = rule("process.image_driver_library").finding({});
            f.message = fmt::format("its image carries its own {} {} at {}, the host's driver is {}{}", lib.soname,
                                    c.version, c.path, host_version,
                                    picked ? ": its loader picks that copy" : " (its loader picks another for now)");
            f.evidence.push_back({fmt::format("/proc/{}/root{}", v.pid, c.path),
                                  fmt::format("-> {} (found by {})", c.real_path, c.found_by)});
            f.next_step = "Rebuild the image without the driver's libraries (they come from the host: the NVIDIA "
                          "container runtime injects them), or delete them in the image.";
            out.push_back(std::move(f));
        }
    }
}

void open_gpus(const CheckContext& ctx, const ProcessView& v, std::vector<Finding>& out) {
    if (v.open_devices.empty()) return;
    auto gpus = node_gpus(ctx.snapshot);
    Finding f = rule("process.gpus_open").finding({});
    for (auto& dev : v.open_devices) {
        constexpr std::string_view prefix = "/dev/nvidia";
        if (!dev.starts_with(prefix)) continue;
        auto minor = parse_uint(std::string_view(dev).substr(prefix.size()));
        if (!minor) continue;
        for (auto& g : gpus)
            if (g.minor && *g.minor == *minor) f.subjects.push_back(ctx.gpu(g.pci));
    }
    std::string list;
    for (auto& d : v.open_devices) list += (list.empty() ? "" : ", ") + d;
    f.message = f.subjects.empty() ? fmt::format("the process holds {} open, no GPU's own device file", list)
                                   : fmt::format("the process holds {} GPU(s) open", f.subjects.size());
    f.evidence.push_back({fmt::format("/proc/{}/fd", v.pid), list});
    out.push_back(std::move(f));
}

void unreadable(const ProcessView& v, std::vector<Finding>& out) {
    bool gone = v.state == ProcessViewState::gone;
    Finding f = (gone ? rule("process.gone") : rule("process.denied")).finding({});
    f.message = gone ? fmt::format("process {} is gone: {}", v.pid, v.problem)
                     : fmt::format("process {} cannot be read: {}", v.pid, v.problem);
    f.evidence.push_back({fmt::format("/proc/{}", v.pid), v.problem});
    f.next_step = gone ? "Nothing to judge: name a running process (`pgrep`, `scontrol listpids JOBID`)."
                       : "Run gpudx as the process's owner or as root (reading another user's /proc/PID/environ, maps "
                         "and fd needs it).";
    out.push_back(std::move(f));
}

// The loader's next pick is a prediction; what the process mapped is the fact. The libraries rules' mismatch or stub
// on a library the process has mapped is therefore left to the mapped rules.
bool superseded_by_mapping(const Finding& f, const ProcessView& v) {
    if ((f.id != "libs.version_mismatch" && f.id != "libs.stub_picked") || f.evidence.empty()) return false;
    for (auto& lib : v.libraries.libraries)
        if (lib.chosen && lib.chosen->path == f.evidence.front().source)
            return std::any_of(v.mapped.begin(), v.mapped.end(), [&](auto& m) { return m.soname == lib.soname; });
    return false;
}

}  // namespace

void check_processes(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (s.processes.empty()) return;
    // What the node already says of gpudx's own view is not said again for each process that sees the same.
    std::set<std::string> node_says;
    for (auto& f : judge(s, ctx.options)) node_says.insert(finding_key(f));
    for (auto& v : s.processes) {
        std::vector<Finding> found;
        if (v.state != ProcessViewState::read) {
            unreadable(v, found);
        } else {
            for (auto& f : judge(as_seen_by(s, v), ctx.options))
                if (!node_says.count(finding_key(f)) && !superseded_by_mapping(f, v)) found.push_back(std::move(f));
            mapped_libraries(s, v, found);
            image_driver_libraries(s, v, found);
            open_gpus(ctx, v, found);
        }
        auto ref = process_ref(v);
        for (auto& f : found) {
            f.process = ref;
            out.push_back(std::move(f));
        }
    }
}

constinit const RuleFamily kProcessFamily{"process", Layer::container, kRules, check_processes};

}  // namespace gpudx
