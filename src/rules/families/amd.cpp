// AMD GPUs and hosts with GPUs of both vendors (docs/amd.md): the KFD topology against the PCIe bus, render
// nodes, a CUDA job that can reach AMD devices, the ROCm selectors, ROCm libraries from two releases, and
// the vendor summary, GPUs split from their XGMI hive; and the runtime layer ROCm SMI answers for (its start, a GPU it does not list or names
// differently from sysfs, uncorrectable ECC counts). Each finding carries the layer it belongs to.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "rules/families/driver_rules.hpp"
#include "rules/engine/families.hpp"
#include "core/text.hpp"
#include "identity/join.hpp"
#include "identity/visible_devices.hpp"

namespace gpudx {
namespace {

// Each rule is filed under the layer it judges; ROCm SMI's uncorrectable ECC counts and failed queries are the
// driver family's driver.ecc_uncorrected and driver.query_failed.
using C = Collector;
constexpr Rule kRules[] = {
    {"pcie.mixed_vendors", Layer::pcie, Severity::info, {C::pcie}, "GPUs of more than one vendor on the PCIe bus"},
    {"module.gpu_not_in_kfd", Layer::module, Severity::error, {C::module, C::pcie, C::kernel_log},
     "an AMD GPU bound to amdgpu is missing from the KFD topology: ROCm does not see it", {RuleTag::identity}},
    {"devices.render_node_missing", Layer::devices, Severity::error, {C::devices, C::module, C::environment},
     "amdgpu has a render node for a GPU but /dev/dri has no node for it"},
    {"container.amd_devices_exposed", Layer::container, Severity::warning, {C::devices, C::environment, C::module},
     "a job or container given NVIDIA GPUs can reach AMD GPUs' device nodes (info for /dev/kfd alone)"},
    {"allocation.rocm_visible_devices_invalid", Layer::allocation, Severity::error, {C::environment, C::module},
     "a ROCR_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES entry names no AMD GPU on this node", {RuleTag::identity}},
    {"libs.rocm_mixed_releases", Layer::libraries, Severity::warning, {C::libraries},
     "the loader picks ROCm libraries from more than one ROCm release"},
    {"module.xgmi_hive_split", Layer::module, Severity::error, {C::module},
     "an AMD GPU is outside the XGMI hive its peers of the same model share"},
    {"driver.rocm_smi_not_loaded", Layer::driver, Severity::warning, {C::rocm_smi, C::libraries, C::pcie},
     "librocm_smi64 could not be loaded although ROCm is installed and AMD GPUs are on PCIe"},
    {"driver.rocm_smi_init_failed", Layer::driver, Severity::error, {C::rocm_smi, C::module},
     "rsmi_init failed: ROCm SMI cannot read the AMD GPUs"},
    {"driver.rocm_smi_missing_gpu", Layer::driver, Severity::error, {C::rocm_smi, C::module},
     "ROCm SMI does not list a GPU the KFD topology has"},
    {"driver.rocm_smi_identity_mismatch", Layer::driver, Severity::error, {C::rocm_smi, C::module},
     "ROCm SMI's device disagrees with sysfs about its unique id or render minor"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

constexpr uint32_t kNvidia = 0x10de, kAmd = 0x1002;

std::optional<std::string> var(const Snapshot& s, const std::string& name) {
    auto it = s.environment.variables.find(name);
    if (it == s.environment.variables.end()) return std::nullopt;
    return it->second;
}

bool module_loaded(const Snapshot& s, std::string_view name) {
    return std::any_of(s.module.loaded.begin(), s.module.loaded.end(), [&](auto& m) { return m.name == name; });
}

std::vector<const PciDevice*> amd_gpus_on_pcie(const Snapshot& s) {
    std::vector<const PciDevice*> out;
    for (auto& d : s.pcie.devices)
        if (d.is_gpu && d.vendor_id == kAmd) out.push_back(&d);
    return out;
}

const DeviceNode* present_node(const Snapshot& s, std::string_view path) {
    for (auto& n : s.devices.nodes)
        if (n.path == path && n.type != "missing") return &n;
    return nullptr;
}

const AmdGpu* amd_gpu(const Snapshot& s, std::string_view pci) {
    for (auto& g : s.module.amd_gpus)
        if (g.pci == pci) return &g;
    return nullptr;
}

std::string join_list(const std::vector<std::string>& v, std::string_view sep = ", ") {
    std::string out;
    for (auto& x : v) {
        if (!out.empty()) out += sep;
        out += x;
    }
    return out;
}

// pcie.mixed_vendors: GPUs of more than one vendor on the bus, with counts and drivers.
void mixed_vendors(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::pcie)) return;
    std::map<std::string, std::vector<const PciDevice*>> by_vendor;
    for (auto& d : s.pcie.devices) {
        if (!d.is_gpu) continue;
        by_vendor[d.vendor_id == kNvidia ? "NVIDIA" : d.vendor_id == kAmd ? "AMD" : "other"].push_back(&d);
    }
    if (by_vendor.size() < 2) return;
    Finding f = rule("pcie.mixed_vendors").finding({});
    std::vector<std::string> counts;
    for (auto& [vendor, devs] : by_vendor) {
        std::set<std::string> drivers;
        std::vector<std::string> addrs;
        for (auto* d : devs) {
            drivers.insert(d->driver.empty() ? "no driver" : d->driver);
            addrs.push_back(d->address);
            f.subjects.push_back(ctx.gpu(d->address));
        }
        counts.push_back(fmt::format("{} {}", devs.size(), vendor));
        f.evidence.push_back({"/sys/bus/pci/devices",
                              fmt::format("{} {} GPU(s) bound to {}: {}", devs.size(), vendor,
                                          join_list(std::vector<std::string>(drivers.begin(), drivers.end())),
                                          join_list(addrs))});
    }
    f.message = fmt::format("mixed-vendor host: {} GPUs on PCIe ({}); each vendor's stack is judged on its own, "
                            "and a job given one vendor's GPUs should not reach the other's",
                            s.pcie.gpus.size(), join_list(counts));
    f.next_step = "None. Allocate each vendor's GPUs as a separate resource (Slurm gres types, Kubernetes device "
                  "plugins per vendor) and keep containers of one vendor away from the other's device nodes.";
    out.push_back(std::move(f));
}

// module.gpu_not_in_kfd: an AMD GPU bound to amdgpu that KFD did not add to its topology: ROCm cannot use it.
void not_in_kfd(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::module) || !s.collected(Collector::pcie) || !s.module.kfd_topology_listed) return;
    std::vector<std::string> kfd;
    for (auto& n : s.module.kfd_nodes)
        if (!n.pci.empty()) kfd.push_back(fmt::format("node {} {}", n.node, n.pci));
    for (auto* d : amd_gpus_on_pcie(s)) {
        if (d->driver != "amdgpu" || d->config_unreadable) continue;  // unbound cards are the pcie layer's
        auto* g = amd_gpu(s, d->address);
        if (g && g->in_kfd) continue;
        GpuRef ref = ctx.gpu(d->address);
        Finding f = rule("module.gpu_not_in_kfd").finding({});
        f.subjects.push_back(ref);
        f.message = fmt::format("{} is bound to amdgpu but missing from the KFD topology: ROCm (rocminfo, HIP, "
                                "ROCR_VISIBLE_DEVICES) does not see it",
                                describe(ref));
        f.evidence.push_back({fmt::format("/sys/bus/pci/devices/{}/driver", d->address), "amdgpu"});
        f.evidence.push_back({"/sys/class/kfd/kfd/topology/nodes",
                              kfd.empty() ? std::string("no GPU node") : fmt::format("GPU nodes: {}", join_list(kfd))});
        if (g && !g->card.empty())
            f.evidence.push_back({"/sys/class/drm/" + g->card,
                                  g->render_minor ? fmt::format("render minor {}", *g->render_minor) : "no render node"});
        // The driver's own words, when the log kept them: KFD names the device by its ids, amdgpu by address.
        unsigned kept = 0;
        for (auto& l : s.kernel_log.lines) {
            auto lower = to_lower(l.text);
            bool kfd_refused = l.topic == LogTopic::kfd && lower.find("not added") != std::string::npos;
            bool about_it = l.text.find(d->address) != std::string::npos &&
                            (lower.find("kfd") != std::string::npos || lower.find("fail") != std::string::npos ||
                             lower.find("error") != std::string::npos);
            if (!kfd_refused && !about_it) continue;
            f.evidence.push_back({s.kernel_log.source.empty() ? "kernel log" : s.kernel_log.source, l.text});
            if (++kept == 3) break;
        }
        f.next_step = fmt::format(
            "Read why KFD skipped it: `dmesg | grep -i -e kfd -e {}` ('NOT added due to errors', a firmware or "
            "IOMMU failure). Then reload the driver (`modprobe -r amdgpu && modprobe amdgpu`) or reboot; if it "
            "stays out, reset the GPU (`amd-smi reset -G`) or drain the node for hardware service.",
            d->address);
        out.push_back(std::move(f));
    }
}

// devices.render_node_missing: amdgpu has a render node for the GPU but /dev/dri has no node for it.
void render_nodes(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::devices) || !s.collected(Collector::module)) return;
    // A container has the render nodes of the GPUs it was given only: their absence there is by design, and
    // whether it got what it asked for is a question of its ROCm selectors.
    if (s.environment.container.in_container) return;
    for (auto& g : s.module.amd_gpus) {
        if (!g.render_minor || g.card.empty()) continue;
        std::string path = fmt::format("/dev/dri/renderD{}", *g.render_minor);
        if (present_node(s, path)) continue;
        GpuRef ref = ctx.gpu(g.pci);
        Finding f = rule("devices.render_node_missing").finding({});
        f.subjects.push_back(ref);
        f.message = fmt::format("{} has no render node {}: ROCm cannot open this GPU", describe(ref), path);
        f.evidence.push_back({path, "missing"});
        f.evidence.push_back({fmt::format("/sys/class/drm/renderD{}", *g.render_minor), "device -> " + g.pci});
        f.next_step = "udev did not create it: `udevadm trigger --subsystem-match=drm` (and check /etc/udev/rules.d "
                      "for a rule that removes or renames render nodes).";
        out.push_back(std::move(f));
    }
}

// container.amd_devices_exposed: a job or container given NVIDIA GPUs that can reach AMD GPUs' device nodes.
void cuda_job_sees_amd(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::devices) || !s.collected(Collector::environment)) return;
    bool container = s.environment.container.in_container;
    std::optional<std::string> slurm = var(s, "SLURM_JOB_ID");
    if (!container && !slurm) return;
    // Its NVIDIA allocation: what the runtime or the scheduler gave it.
    std::vector<std::string> given;
    for (auto name : {"NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"})
        if (auto v = var(s, name); v && !v->empty() && *v != "void" && *v != "none") given.push_back(fmt::format("{}={}", name, *v));
    bool nvidia_nodes = std::any_of(s.devices.nodes.begin(), s.devices.nodes.end(), [](auto& n) {
        return n.type != "missing" && n.path.starts_with("/dev/nvidia") && n.path != "/dev/nvidiactl" &&
               !n.path.starts_with("/dev/nvidia-");
    });
    if (given.empty() || !nvidia_nodes) return;
    // A job that was given AMD GPUs as well says so through the ROCm selectors.
    if (var(s, "ROCR_VISIBLE_DEVICES") || var(s, "HIP_VISIBLE_DEVICES")) return;
    // Outside a container /dev lists every node; a Slurm job is exposed only when the caller may open them.
    auto reachable = [&](const DeviceNode* n) { return n && (container || (n->caller_can_open && *n->caller_can_open)); };
    std::vector<std::string> nodes;
    std::vector<GpuRef> gpus;
    for (auto& g : s.module.amd_gpus) {
        if (!g.render_minor) continue;
        auto* n = present_node(s, fmt::format("/dev/dri/renderD{}", *g.render_minor));
        if (!reachable(n)) continue;
        nodes.push_back(n->path);
        gpus.push_back(ctx.gpu(g.pci));
    }
    auto* kfd = present_node(s, "/dev/kfd");
    if (gpus.empty() && !reachable(kfd)) return;
    Finding f = rule("container.amd_devices_exposed").finding(gpus.empty() ? Severity::info : Severity::warning, {});
    f.subjects = gpus;
    std::string where = container ? "the container" : fmt::format("Slurm job {}", *slurm);
    f.message = gpus.empty()
                    ? fmt::format("{} was given NVIDIA GPUs but can open /dev/kfd (no AMD render node, so no AMD GPU "
                                  "is usable from it)",
                                  where)
                    : fmt::format("{} was given NVIDIA GPUs but can reach {} AMD GPU(s) through {}{}: another job's "
                                  "AMD GPUs are not isolated from it",
                                  where, gpus.size(), join_list(nodes), reachable(kfd) ? " and /dev/kfd" : "");
    for (auto& g : given) {
        auto eq = g.find('=');
        f.evidence.push_back({"environment " + g.substr(0, eq), g.substr(eq + 1)});
    }
    if (reachable(kfd)) f.evidence.push_back({"/dev/kfd", fmt::format("mode {:04o}", kfd->mode.value_or(0))});
    for (auto& n : nodes) f.evidence.push_back({n, "present"});
    f.next_step = container
                      ? "Start the container without --privileged and without --device=/dev/kfd or /dev/dri (Kubernetes: "
                        "privileged: false; the AMD device plugin injects nodes only into pods that request amd.com/gpu)."
                      : "Constrain the job's devices (Slurm cgroup.conf ConstrainDevices=yes, with the AMD GPUs in "
                        "gres.conf so Slurm knows their render nodes).";
    out.push_back(std::move(f));
}

// allocation.rocm_visible_devices_invalid: a ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES entry no AMD GPU answers to.
void rocm_selectors(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::environment) || !s.collected(Collector::module) || !s.module.kfd_topology_listed) return;
    IdentityTable t = join_identity(s);
    if (!t.amd) return;
    std::vector<std::string> node;
    for (auto& r : t.rows)
        if (r.rocr_enum_index)
            node.push_back(fmt::format("{} {} ({})", *r.rocr_enum_index, r.amd_uuid.empty() ? "no UUID" : r.amd_uuid, r.pci));
    auto report = [&](const char* name, const std::vector<std::string>& unmatched, const std::string& value) {
        if (unmatched.empty()) return;
        std::vector<GpuRef> visible;
        for (auto& r : t.rows)
            if (r.hip_index) visible.push_back({r.uuid(), r.pci});
        Finding f = rule("allocation.rocm_visible_devices_invalid").finding({});
        f.subjects = visible;
        f.message = fmt::format("{}={}: '{}' names no AMD GPU on this node; ROCm ignores it and every entry after "
                                "it, leaving {} GPU(s) visible",
                                name, value, unmatched.front(), visible.size());
        f.evidence.push_back({std::string("environment ") + name, value.empty() ? "\"\"" : value});
        f.evidence.push_back({"/sys/class/kfd/kfd/topology/nodes", "ROCr's GPUs: " + join_list(node)});
        f.next_step = "Name GPUs by their ROCm UUID (GPU-<unique_id>, `rocminfo | grep Uuid` or `gpudx ids`) from this "
                      "node; a UUID from another node, or an index past the last GPU, selects nothing.";
        out.push_back(std::move(f));
    };
    report("ROCR_VISIBLE_DEVICES", t.rocr_unmatched, value_or_unset(t.rocr_visible_devices));
    if (t.hip_selector == "HIP_VISIBLE_DEVICES")
        report("HIP_VISIBLE_DEVICES", t.hip_unmatched, value_or_unset(t.hip_visible_devices));
}

// libs.rocm_mixed_releases: the loader picks ROCm libraries from more than one ROCm release.
void rocm_releases(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::libraries) || s.libraries.rocm_installs.empty()) return;
    static constexpr std::string_view kStems[] = {"libamdhip64.so", "libhsa-runtime64.so", "librocm_smi64.so",
                                                  "libamd_smi.so"};
    std::map<std::string, std::vector<std::string>> by_release;  // release (or "outside /opt/rocm*") -> libraries
    std::vector<Evidence> evidence;
    for (auto& lib : s.libraries.libraries) {
        bool rocm = std::any_of(std::begin(kStems), std::end(kStems), [&](auto st) { return lib.soname.starts_with(st); });
        if (!rocm || !lib.chosen || !lib.chosen->present) continue;
        std::string release = "outside /opt/rocm*";
        for (auto& r : s.libraries.rocm_installs) {
            auto prefix = r.real_path + "/";
            if (lib.chosen->real_path.starts_with(prefix) || lib.chosen->path.starts_with(r.path + "/"))
                release = r.version.empty() ? r.real_path : r.version;
        }
        by_release[release].push_back(lib.soname);
        evidence.push_back({lib.chosen->path, fmt::format("-> {} ({})", lib.chosen->real_path, lib.reason)});
    }
    if (by_release.size() < 2) return;
    Finding f = rule("libs.rocm_mixed_releases").finding({});
    std::vector<std::string> parts;
    for (auto& [release, libs] : by_release) parts.push_back(fmt::format("{} from {}", join_list(libs), release));
    f.message = fmt::format("the loader picks ROCm libraries from different releases ({}): HIP and the HSA runtime "
                            "must come from one ROCm release",
                            join_list(parts, "; "));
    f.evidence = std::move(evidence);
    if (!s.libraries.rocm_release.empty()) f.evidence.push_back({"/opt/rocm/.info/version", s.libraries.rocm_release});
    f.next_step = "Point LD_LIBRARY_PATH (or /etc/ld.so.conf.d) at one ROCm release's lib directory, run `ldconfig`, "
                  "and check with `ldconfig -p | grep -e amdhip64 -e hsa-runtime64`.";
    out.push_back(std::move(f));
}

// module.xgmi_hive_split: AMD GPUs of one model whose KFD nodes report an XGMI hive, but not all the same one: the
// GPU outside its peers' hive (hive_id 0 when its links did not train) talks to them over PCIe only.
void xgmi_hive(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::module)) return;
    struct Member {
        const AmdGpu* gpu;
        std::string hive;
    };
    std::map<std::string, std::vector<Member>> by_model;
    for (auto& g : s.module.amd_gpus) {
        if (!g.in_kfd || !g.kfd_node) continue;
        auto node = std::find_if(s.module.kfd_nodes.begin(), s.module.kfd_nodes.end(),
                                 [&](auto& n) { return n.node == *g.kfd_node; });
        if (node == s.module.kfd_nodes.end()) continue;
        auto hive = node->properties.find("hive_id");
        if (hive == node->properties.end()) continue;  // a kernel that does not publish it: unknown, not split
        by_model[g.gfx_target].push_back({&g, std::string(trim(hive->second))});
    }
    for (auto& [model, members] : by_model) {
        std::map<std::string, size_t> sizes;
        for (auto& m : members)
            if (m.hive != "0") ++sizes[m.hive];
        if (sizes.empty()) continue;  // PCIe-only cards: no hive to be in
        auto peers = std::max_element(sizes.begin(), sizes.end(), [](auto& a, auto& b) { return a.second < b.second; });
        if (peers->second < 2) continue;
        for (auto& m : members) {
            if (m.hive == peers->first) continue;
            GpuRef ref = ctx.gpu(m.gpu->pci);
            auto f = rule("module.xgmi_hive_split").finding({});
            f.subjects.push_back(ref);
            f.message = fmt::format("{} is {} the other {} {} GPUs: traffic between it and them falls back to PCIe, "
                                    "and collective jobs spanning it run at a fraction of their speed",
                                    describe(ref),
                                    m.hive == "0" ? "in no XGMI hive, while one hive holds"
                                                  : "in another XGMI hive than",
                                    peers->second, model);
            f.evidence.push_back({fmt::format("/sys/class/kfd/kfd/topology/nodes/{}/properties", *m.gpu->kfd_node),
                                  "hive_id " + m.hive});
            f.evidence.push_back({"/sys/class/kfd/kfd/topology/nodes/*/properties",
                                  fmt::format("hive_id {} on {} GPUs", peers->first, peers->second)});
            f.next_step = "Read amdgpu's XGMI messages (`dmesg | grep -i xgmi`): a link that did not train. Reload the "
                          "driver or reboot; if the GPU stays out of the hive, drain the node for hardware service "
                          "(the OAM or the baseboard's XGMI links).";
            out.push_back(std::move(f));
        }
    }
}

// The runtime layer through ROCm SMI (librocm_smi64), when it was asked: a node with a KFD topology whose driver
// layers were probed. A call that never returned is driver.unresponsive's (rules/families/driver.cpp).
void rocm_smi_start(const Snapshot& s, std::vector<Finding>& out) {
    const auto& r = s.rocm_smi;
    if (!r.load_error.empty()) {
        // Without a ROCm install there is nothing that should have answered.
        if (s.libraries.rocm_installs.empty() || amd_gpus_on_pcie(s).empty()) return;
        auto f = rule("driver.rocm_smi_not_loaded")
                     .finding(fmt::format("librocm_smi64 could not be loaded, although ROCm {}is installed and AMD "
                                          "GPUs are on the PCIe bus",
                                          s.libraries.rocm_release.empty() ? "" : s.libraries.rocm_release + " "));
        f.evidence.push_back({"dlopen(librocm_smi64.so.7, .6, .5, .so; then /opt/rocm/lib)", r.load_error});
        f.next_step = "Install the rocm-smi-lib package of the installed ROCm release, or add its lib directory to "
                      "/etc/ld.so.conf.d and run `ldconfig`; `rocm-smi` uses the same library.";
        out.push_back(std::move(f));
        return;
    }
    if (r.init_error.empty()) return;
    auto f = rule("driver.rocm_smi_init_failed").finding("ROCm SMI could not read the AMD GPUs: " + r.init_error);
    f.evidence.push_back({"rsmi_init in " + r.library_path,
                          r.init_result ? fmt::format("{} ({})", rocm_smi_code_name(*r.init_result), *r.init_result)
                                        : r.init_error});
    if (!module_loaded(s, "amdgpu") && s.collected(Collector::module)) {
        f.message += "; the amdgpu kernel module is not loaded: the module layer is the cause";
        f.evidence.push_back({"/proc/modules", "no amdgpu module"});
    }
    f.next_step = "ROCm SMI reads the GPUs through /sys/class/drm and /sys/class/kfd: check that amdgpu is loaded "
                  "(`lsmod | grep amdgpu`), that the caller is in the render and video groups, and that the library "
                  "belongs to the same ROCm release as the driver (`rocm-smi --showdriverversion`).";
    out.push_back(std::move(f));
}

void rocm_smi_devices(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    const auto& r = s.rocm_smi;
    if (!r.device_count) return;
    // Partitions of one GPU share its address: the first device of an address stands for the GPU.
    std::map<std::string, const RocmSmiDevice*> by_pci;
    std::vector<std::string> listed;
    for (auto& d : r.devices) {
        if (d.pci.empty()) continue;
        by_pci.emplace(d.pci, &d);
        listed.push_back(fmt::format("{} {}", d.index, d.pci));
    }
    // Counted on the devices, not on by_pci: partitions of one GPU share an address.
    const bool every_device_addressed =
        std::none_of(r.devices.begin(), r.devices.end(), [](auto& d) { return d.pci.empty(); });
    for (auto& g : s.module.amd_gpus) {
        if (!g.in_kfd) continue;  // module.gpu_not_in_kfd names it
        GpuRef ref = ctx.gpu(g.pci);
        auto it = by_pci.find(g.pci);
        if (it == by_pci.end()) {
            // Only when every device answered its address: otherwise the missing one may be unanswered, not absent.
            if (!every_device_addressed || r.hung_call) continue;
            auto f = rule("driver.rocm_smi_missing_gpu")
                         .finding(fmt::format("ROCm SMI does not list {}, which the KFD topology has: monitoring "
                                              "and rocm-smi miss it",
                                              describe(ref)));
            f.subjects.push_back(ref);
            f.evidence.push_back({"rsmi_num_monitor_devices", std::to_string(*r.device_count)});
            f.evidence.push_back({"rsmi_dev_pci_id_get", listed.empty() ? std::string("no device") : join_list(listed)});
            if (g.kfd_node)
                f.evidence.push_back({fmt::format("/sys/class/kfd/kfd/topology/nodes/{}", *g.kfd_node), g.pci});
            f.next_step = "ROCm SMI lists the GPUs it finds under /sys/class/drm: check the GPU's card and render "
                          "node (`ls -l /sys/class/drm/*/device | grep " + g.pci + "`) and the permissions of "
                          "/dev/dri; then compare with `rocm-smi --showbus`.";
            out.push_back(std::move(f));
            continue;
        }
        const RocmSmiDevice& d = *it->second;
        auto call = [&](const char* name) { return fmt::format("{}({})", name, d.index); };
        std::vector<Evidence> differ;
        if (!d.unique_id.empty() && !g.unique_id.empty() && d.unique_id != g.unique_id) {
            differ.push_back({call("rsmi_dev_unique_id_get"), d.unique_id});
            differ.push_back({fmt::format("/sys/bus/pci/devices/{}/unique_id", g.pci), g.unique_id});
        }
        if (d.render_minor && g.render_minor && *d.render_minor != *g.render_minor) {
            differ.push_back({call("rsmi_dev_drm_render_minor_get"), std::to_string(*d.render_minor)});
            differ.push_back({"/sys/class/drm/" + g.card, fmt::format("renderD{}", *g.render_minor)});
        }
        if (!differ.empty()) {
            auto f = rule("driver.rocm_smi_identity_mismatch")
                         .finding(fmt::format("ROCm SMI's device {} at {} disagrees with sysfs about which GPU it "
                                              "is: tools keyed by ROCm SMI name another GPU than ROCR and HIP",
                                              d.index, describe(ref)));
            f.subjects.push_back(ref);
            f.evidence = std::move(differ);
            f.next_step = "A library from another ROCm release than the driver, or a container with a stale view of "
                          "/sys: compare `rocm-smi --showuniqueid --showbus` with /sys/class/drm/card*/device/unique_id "
                          "and use one ROCm release's libraries.";
            out.push_back(std::move(f));
        }
        unsigned long long uncorrectable = 0;
        std::vector<std::string> blocks;
        for (auto& e : d.ecc)
            if (e.uncorrectable) {
                uncorrectable += e.uncorrectable;
                blocks.push_back(fmt::format("{} {}", e.block, e.uncorrectable));
            }
        if (uncorrectable) {
            auto f = driver_rule("driver.ecc_uncorrected")
                         .finding(fmt::format("{}: {} uncorrectable ECC error(s) ({})", describe(ref), uncorrectable,
                                              join_list(blocks)));
            f.subjects.push_back(ref);
            f.evidence.push_back({call("rsmi_dev_ecc_count_get"), join_list(blocks)});
            f.next_step = "Drain the node; jobs on this GPU may have computed on corrupted memory. Read the RAS "
                          "messages (`dmesg | grep -i -e ras -e 'uncorrectable'`), retire the bad pages "
                          "(`amd-smi bad-pages`) with a GPU reset, and replace the GPU if errors recur.";
            out.push_back(std::move(f));
        }
        for (auto& e : d.errors) {
            auto f = driver_rule("driver.query_failed").finding(fmt::format("{}: {}", describe(ref), e));
            f.subjects.push_back(ref);
            f.evidence.push_back({call("rocm_smi"), e});
            f.next_step = "Re-run; if it persists, compare with `rocm-smi --showallinfo -d <N>` and the kernel log.";
            out.push_back(std::move(f));
        }
    }
}

void rocm_smi_runtime(const CheckContext& ctx, std::vector<Finding>& out) {
    if (!ctx.snapshot.rocm_smi.probed) return;
    rocm_smi_start(ctx.snapshot, out);
    rocm_smi_devices(ctx, out);
}

}  // namespace

void check_amd(const CheckContext& ctx, std::vector<Finding>& out) {
    mixed_vendors(ctx, out);
    not_in_kfd(ctx, out);
    render_nodes(ctx, out);
    cuda_job_sees_amd(ctx, out);
    rocm_selectors(ctx, out);
    rocm_releases(ctx, out);
    xgmi_hive(ctx, out);
    rocm_smi_runtime(ctx, out);
}

// A failure is filed under the module layer: every AMD rule starts from amdgpu's view of its GPUs (the KFD
// topology, render minors), so without the family none of them was judged.
constinit const RuleFamily kAmdFamily{"amd", Layer::module, kRules, check_amd};

}  // namespace gpudx
