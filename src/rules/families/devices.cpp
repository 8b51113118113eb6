// Device nodes the driver needs, whether the caller may open them, and processes holding GPUs.
#include <fmt/format.h>

#include <algorithm>

#include "rules/engine/families.hpp"
#include "core/text.hpp"
#include "identity/allocation_scope.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"devices.gpu_node_missing", Layer::devices, Severity::error, {C::devices, C::module, C::environment},
     "a GPU the driver lists (and the container was given) has no /dev/nvidiaN"},
    {"devices.ctl_missing", Layer::devices, Severity::error, {C::devices, C::module},
     "/dev/nvidiactl is missing while the nvidia module is loaded"},
    {"devices.uvm_missing", Layer::devices, Severity::error, {C::devices, C::module},
     "/dev/nvidia-uvm is missing: cuInit fails while nvidia-smi works"},
    {"devices.not_accessible", Layer::devices, Severity::error, {C::devices, C::module, C::nvml},
     "a GPU device node exists but the user running gpudx cannot open it"},
    {"devices.stuck_holder", Layer::devices, Severity::error, {C::devices, C::module, C::nvml},
     "a defunct process, or one whose cgroup is gone, still holds a GPU (a warning when no GPU is named)"},
    {"devices.holder", Layer::devices, Severity::info, {C::devices, C::module, C::nvml},
     "a process holds a GPU device node"},
    {"devices.kfd_missing", Layer::devices, Severity::error, {C::devices, C::module, C::pcie, C::environment},
     "AMD render nodes exist but /dev/kfd does not: ROCm sees no GPU"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

const DeviceNode* node(const DevicesLayer& d, std::string_view path) {
    for (auto& n : d.nodes)
        if (n.path == path && n.type != "missing") return &n;
    return nullptr;
}

bool module_loaded(const ModuleLayer& m, std::string_view name) {
    return std::any_of(m.loaded.begin(), m.loaded.end(), [&](auto& l) { return l.name == name; });
}

// The GPU behind /dev/nvidiaN, through the driver's minor number.
// The GPU behind /dev/dri/renderDN, through amdgpu's render minor.
std::optional<GpuRef> gpu_of_node(const CheckContext& ctx, std::string_view path) {
    if (path.starts_with("/dev/dri/renderD")) {
        auto minor = parse_uint(path.substr(16));
        for (auto& g : ctx.snapshot.module.amd_gpus)
            if (minor && g.render_minor && *g.render_minor == *minor) return ctx.gpu(g.pci);
        return std::nullopt;
    }
    if (!path.starts_with("/dev/nvidia")) return std::nullopt;
    auto minor = parse_uint(path.substr(11));
    if (!minor) return std::nullopt;
    for (auto& g : ctx.snapshot.module.nvidia_gpus)
        if (g.minor && *g.minor == *minor) return ctx.gpu(g.address);
    for (auto& d : ctx.snapshot.nvml.devices)
        if (d.minor && *d.minor == *minor) return ctx.gpu(d.pci);
    return std::nullopt;
}

void missing_node(std::vector<Finding>& out, const Rule& rule, std::string path, std::string message, std::string next,
                  std::vector<GpuRef> subjects, std::string why_expected) {
    out.push_back(rule.finding(
        std::move(message),
        {std::move(subjects), {{path, "missing"}, {"expected because", std::move(why_expected)}}, std::move(next)}));
}

void check_nvidia_nodes(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    const auto& d = s.devices;
    bool nvidia = module_loaded(s.module, "nvidia") || !s.module.nvidia_gpus.empty();
    if (!nvidia) return;
    // A container has device nodes only for the GPUs it was given (NVIDIA_VISIBLE_DEVICES); the others' nodes
    // are absent by design. Whether the given ones were injected is container.device_not_injected's question,
    // and both are judged here too.
    auto scope = gpu_scope(s, {.container = true, .slurm = false});
    for (auto& g : s.module.nvidia_gpus) {
        if (!g.minor) continue;
        std::string path = fmt::format("/dev/nvidia{}", *g.minor);
        if (node(d, path) || !scope.contains(g.address)) continue;
        missing_node(
            out, rule("devices.gpu_node_missing"), path,
            fmt::format("{} has no device node {}: no process can open this GPU", describe(ctx.gpu(g.address)), path),
            fmt::format("Create it: `nvidia-modprobe -c {}` (or `mknod -m 666 {} c 195 {}`); in a container, "
                        "pass the device in (--gpus / device plugin) rather than creating it.",
                        *g.minor, path, *g.minor),
            {ctx.gpu(g.address)},
            fmt::format("/proc/driver/nvidia/gpus/{}/information: Device Minor {}", g.address, *g.minor));
    }
    if (!node(d, "/dev/nvidiactl"))
        missing_node(
            out, rule("devices.ctl_missing"), "/dev/nvidiactl",
            "/dev/nvidiactl is missing: NVML and CUDA cannot talk to the driver",
            "Run `nvidia-modprobe` (or `mknod -m 666 /dev/nvidiactl c 195 255`); in a container, check that the "
            "runtime injected the control device.",
            {}, "the nvidia module is loaded");
    if (!node(d, "/dev/nvidia-uvm")) {
        bool uvm_loaded = module_loaded(s.module, "nvidia_uvm");
        missing_node(
            out, rule("devices.uvm_missing"), "/dev/nvidia-uvm",
            uvm_loaded ? "/dev/nvidia-uvm is missing although nvidia_uvm is loaded: cuInit fails (CUDA error 999 "
                         "or 100) while nvidia-smi still works"
                       : "/dev/nvidia-uvm is missing and the nvidia_uvm module is not loaded: cuInit fails while "
                         "nvidia-smi still works",
            uvm_loaded ? "Create the node with `nvidia-modprobe -u -c=0` (it reads the major from /proc/devices); "
                         "in a container, pass /dev/nvidia-uvm in."
                       : "Load the module and create the node: `modprobe nvidia_uvm && nvidia-modprobe -u -c=0`; "
                         "make it load at boot (/etc/modules-load.d).",
            {}, uvm_loaded ? "the nvidia_uvm module is loaded" : "the nvidia module is loaded (CUDA needs UVM)");
    }
}

void check_access(const CheckContext& ctx, std::vector<Finding>& out) {
    for (auto& n : ctx.snapshot.devices.nodes) {
        if (!n.caller_can_open || *n.caller_can_open) continue;
        if (n.path.starts_with("/dev/nvidia-caps/")) continue;  // MIG capabilities are restricted on purpose
        Finding f = rule("devices.not_accessible").finding({});
        if (auto g = gpu_of_node(ctx, n.path)) f.subjects.push_back(*g);
        f.message = fmt::format("{} exists but this user cannot open it for reading and writing", n.path);
        f.evidence.push_back({n.path, fmt::format("mode {:04o}{}{}", n.mode.value_or(0),
                                                  n.major ? fmt::format(", {}:{}", *n.major, n.minor.value_or(0)) : "",
                                                  n.group.empty() ? "" : ", group " + n.group)});
        f.next_step = n.path == "/dev/kfd" || n.path.starts_with("/dev/dri/")
                          ? "Add the user to the render and video groups (ROCm), or fix the udev rule's mode."
                          : "Fix the mode (NVreg_DeviceFileMode / NVreg_DeviceFileGID module parameters, normally 0666), "
                            "or check the container's device cgroup allows it.";
        out.push_back(std::move(f));
    }
}

void check_holders(const CheckContext& ctx, std::vector<Finding>& out) {
    for (auto& h : ctx.snapshot.devices.holders) {
        std::vector<GpuRef> gpus;
        for (auto& dev : h.devices)
            if (auto g = gpu_of_node(ctx, dev)) gpus.push_back(*g);
        std::string devices;
        for (auto& dev : h.devices) devices += (devices.empty() ? "" : ", ") + dev;
        std::string who = fmt::format("pid {} ({}{})", h.pid, h.name.empty() ? "?" : h.name,
                                      h.uid ? fmt::format(", uid {}", *h.uid) : "");
        bool zombie = h.state == "Z";
        bool cgroup_gone = h.cgroup_exists && !*h.cgroup_exists;
        bool stuck = zombie || cgroup_gone;
        Finding f = stuck ? rule("devices.stuck_holder").finding(gpus.empty() ? Severity::warning : Severity::error, {})
                          : rule("devices.holder").finding({});
        f.subjects = gpus;
        f.evidence.push_back({fmt::format("/proc/{}/fd", h.pid), devices});
        if (!h.state.empty()) f.evidence.push_back({fmt::format("/proc/{}/status", h.pid), "State: " + h.state});
        if (!h.cgroup.empty()) f.evidence.push_back({fmt::format("/proc/{}/cgroup", h.pid), h.cgroup});
        if (stuck) {
            std::string why = zombie ? "is defunct (zombie) but its threads still hold the device"
                                     : fmt::format("belongs to cgroup {} which no longer exists{}", h.cgroup,
                                                   h.slurm_job_id.empty() ? ""
                                                                          : fmt::format(" (Slurm job {} has ended)", h.slurm_job_id));
            f.message = fmt::format("{} {}: it still holds {}", who, why, devices);
            if (cgroup_gone)
                f.evidence.push_back({"/sys/fs/cgroup" + h.cgroup, "missing"});
            f.next_step = fmt::format("Kill it (`kill -9 {}`); if it stays in state D or Z, the driver is wedged: drain "
                                      "the node and reset the GPU (`nvidia-smi -r`) or reboot.",
                                      h.pid);
        } else {
            f.message = fmt::format("{} holds {}{}", who, devices,
                                    h.container_id.empty() ? "" : fmt::format(" (container {})", h.container_id.substr(0, 12)));
            f.next_step = "None if this process belongs to a running job; otherwise stop it before the next job lands.";
        }
        out.push_back(std::move(f));
    }
}

// devices.kfd_missing: render nodes without /dev/kfd. On the host, a kernel without KFD (CONFIG_HSA_AMD); in a
// container or job, a runtime that passed the render nodes it was given but not /dev/kfd. The GPUs named are
// those whose render nodes are here (amdgpu's render minors), else every AMD GPU on PCIe.
void check_amd_nodes(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    const auto& d = s.devices;
    std::vector<std::string> render;
    for (auto& n : d.nodes)
        if (n.path.starts_with("/dev/dri/renderD") && n.type != "missing") render.push_back(n.path);
    if (render.empty() || node(d, "/dev/kfd")) return;
    std::vector<GpuRef> on_pcie, given;
    for (auto& g : s.pcie.devices)
        if (g.is_gpu && g.vendor_id && *g.vendor_id == 0x1002) on_pcie.push_back(ctx.gpu(g.address));
    if (!module_loaded(s.module, "amdgpu") && on_pcie.empty()) return;
    for (auto& path : render)
        if (auto g = gpu_of_node(ctx, path)) given.push_back(*g);
    const auto& gpus = given.empty() ? on_pcie : given;
    std::string named, nodes;
    for (auto& g : gpus) named += (named.empty() ? "" : ", ") + g.pci;
    for (auto& r : render) nodes += (nodes.empty() ? "" : ", ") + r;
    bool container = s.environment.container.in_container;
    missing_node(out, rule("devices.kfd_missing"), "/dev/kfd",
                 container ? fmt::format("the container has render nodes for {} AMD GPU(s) ({}) but no /dev/kfd: "
                                         "ROCm/HIP sees no GPU",
                                         gpus.size(), named)
                           : fmt::format("render nodes exist but /dev/kfd is missing: ROCm/HIP sees no GPU{}",
                                         named.empty() ? std::string() : fmt::format(" (AMD GPU(s) at {})", named)),
                 container ? "Pass /dev/kfd into the container with its render nodes (`--device /dev/kfd --device "
                             "/dev/dri/renderD<minor>`; the AMD device plugin injects both); under Slurm with "
                             "ConstrainDevices, list /dev/kfd in gres.conf beside the render nodes."
                           : "Check that amdgpu loaded with KFD support (`dmesg | grep kfd`), that the kernel has "
                             "HSA_AMD enabled, and in a container pass --device=/dev/kfd.",
                 gpus, "an AMD GPU with /dev/dri/renderD* nodes");
    out.back().evidence.push_back({"/dev/dri", nodes});
}

}  // namespace

void check_devices(const CheckContext& ctx, std::vector<Finding>& out) {
    auto* st = ctx.snapshot.collector(Collector::devices);
    if (!st || st->state != CollectorState::ok) return;
    check_nvidia_nodes(ctx, out);
    check_access(ctx, out);
    check_holders(ctx, out);
    check_amd_nodes(ctx, out);
}

constinit const RuleFamily kDevicesFamily{"devices", Layer::devices, kRules, check_devices};

}  // namespace gpudx
