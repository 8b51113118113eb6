// driver.*: what NVML and the CUDA driver answered (or failed to), explained by the layers below.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rules/families/driver_rules.hpp"
#include "rules/engine/families.hpp"
#include "rules/reference/recovery_action.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "core/version.hpp"
#include "identity/allocation_scope.hpp"

namespace gpudx {

namespace {

bool nvidia_module_loaded(const Snapshot& s) {
    return std::any_of(s.module.loaded.begin(), s.module.loaded.end(), [](auto& m) { return m.name == "nvidia"; });
}

bool module_layer_read(const Snapshot& s) {
    auto* c = s.collector(Collector::module);
    return c && c->state == CollectorState::ok;
}

std::vector<std::string> nvidia_pcie_gpus(const Snapshot& s) {
    std::vector<std::string> out;
    for (auto& d : s.pcie.devices)
        if (d.is_gpu && !d.is_nvswitch && d.vendor_id == 0x10de) out.push_back(normalize_pci(d.address));
    return out;
}

// The NVIDIA GPUs NVML can be expected to list here: bound to the nvidia driver (a card held by vfio-pci or
// nouveau is invisible to NVML by design) and inside the job's or container's allocation (NVML in a confined
// job or a container lists only its own cards). The others, with why, for the evidence.
struct NvmlExpectation {
    std::vector<std::string> expected;  // PCI order
    std::vector<std::string> skipped;   // "0000:00:07.0 (bound to vfio-pci)"
};

NvmlExpectation nvml_expectation(const Snapshot& s) {
    NvmlExpectation e;
    auto scope = gpu_scope(s);
    std::vector<const PciDevice*> gpus;
    for (auto& d : s.pcie.devices)
        if (d.is_gpu && !d.is_nvswitch && d.vendor_id == 0x10de) gpus.push_back(&d);
    std::sort(gpus.begin(), gpus.end(), [](auto* a, auto* b) {
        auto pa = PciAddress::parse(a->address), pb = PciAddress::parse(b->address);
        if (pa && pb) return *pa < *pb;
        return a->address < b->address;
    });
    for (auto* d : gpus) {
        auto pci = normalize_pci(d->address);
        if (!d->driver.empty() && d->driver != "nvidia")
            e.skipped.push_back(fmt::format("{} (bound to {})", pci, d->driver));
        else if (!scope.contains(pci))
            e.skipped.push_back(fmt::format("{} (not in this job's allocation, {})", pci, scope.source));
        else
            e.expected.push_back(pci);
    }
    return e;
}

bool nvml_answered(const NvmlDevice& d) { return !d.pci.empty(); }

// NVML devices that gave no PCI address (no handle: nvmlDeviceGetHandleByIndex failed, as for a lost GPU),
// attributed to the card each must be. NVML numbers the cards it can see in PCI order, so when as many
// expected cards have no NVML answer as there are devices without one, they pair up in order. Otherwise a
// single unanswered device is the one card the kernel log says fell off the bus (Xid 79), if just one did.
struct Attribution {
    std::string pci;
    std::string why;
};

std::map<unsigned, Attribution> attribute_unanswered(const Snapshot& s, const NvmlExpectation& e) {
    std::map<unsigned, Attribution> out;
    std::vector<unsigned> unanswered;
    for (auto& d : s.nvml.devices)
        if (!nvml_answered(d)) unanswered.push_back(d.index);
    if (unanswered.empty()) return out;
    std::sort(unanswered.begin(), unanswered.end());
    std::vector<std::string> unmatched;
    for (auto& pci : e.expected)
        if (std::none_of(s.nvml.devices.begin(), s.nvml.devices.end(), [&](auto& d) { return d.pci == pci; }))
            unmatched.push_back(pci);
    if (unmatched.size() == unanswered.size()) {
        for (size_t i = 0; i < unanswered.size(); ++i)
            out[unanswered[i]] = {unmatched[i],
                                  unanswered.size() == 1
                                      ? std::string("the only GPU on PCIe that no NVML device answered for")
                                      : fmt::format("NVML numbers GPUs in PCI order: the {} GPU(s) without an NVML "
                                                    "answer pair up with the {} devices without a handle",
                                                    unmatched.size(), unanswered.size())};
        return out;
    }
    if (unanswered.size() != 1) return out;
    std::vector<std::string> fell_off;
    for (auto& t : s.kernel_log.tallies) {
        bool off = t.kind == TallyKind::fallen_off_bus || (t.kind == TallyKind::xid && t.code == 79);
        if (!off || t.device.empty()) continue;
        auto pci = normalize_pci(t.device);
        if (std::find(unmatched.begin(), unmatched.end(), pci) != unmatched.end() &&
            std::find(fell_off.begin(), fell_off.end(), pci) == fell_off.end())
            fell_off.push_back(pci);
    }
    if (fell_off.size() == 1)
        out[unanswered[0]] = {fell_off[0], "the kernel log reports this GPU fallen off the bus (Xid 79)"};
    return out;
}

std::string cuda_env(const CudaView& v) {
    return fmt::format("CUDA_VISIBLE_DEVICES={} CUDA_DEVICE_ORDER={}", value_or_unset(v.cuda_visible_devices),
                       value_or_unset(v.cuda_device_order));
}

consteval const Rule& rule(std::string_view id) { return driver_rule(id); }

// What a driver check knows about which card an NVML device index is, beyond what NVML answered.
struct NvmlMap {
    NvmlExpectation expectation;
    std::map<unsigned, Attribution> attributed;  // NVML index without a handle -> the card it must be

    // The card behind an NVML device: its own answer, else the attribution; pci empty when unknown.
    std::string pci_of(const NvmlDevice& d) const {
        if (nvml_answered(d)) return d.pci;
        auto it = attributed.find(d.index);
        return it == attributed.end() ? std::string() : it->second.pci;
    }
};

std::string nvml_device_name(const NvmlMap& m, const NvmlDevice& d) {
    auto pci = m.pci_of(d);
    return pci.empty() ? fmt::format("NVML device {} (address unknown)", d.index) : pci;
}

void check_unresponsive(const CheckContext& ctx, const NvmlMap& map, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    struct Probe {
        Collector collector;
        const char* library;
        const std::optional<HungCall>& hung;
        const char* wedge_signs;  // what the kernel log says of a wedged GPU of this vendor
        const char* reset;        // the vendor's GPU reset
    };
    constexpr const char* kNvidiaSigns = "Xid 79 / \"fallen off the bus\"";
    constexpr const char* kNvidiaReset = "`nvidia-smi -r -i <UUID>`";
    for (auto p : {Probe{Collector::nvml, "NVML", s.nvml.hung_call, kNvidiaSigns, kNvidiaReset},
                   Probe{Collector::cuda, "the CUDA driver", s.cuda.hung_call, kNvidiaSigns, kNvidiaReset},
                   Probe{Collector::rocm_smi, "ROCm SMI", s.rocm_smi.hung_call,
                         "amdgpu GPU reset, RAS or \"ring timeout\" messages", "`amd-smi reset -G -g <N>`"}}) {
        auto* c = s.collector(p.collector);
        bool timed_out = c && c->state == CollectorState::timed_out;
        if (!timed_out && !p.hung) continue;
        std::string call = p.hung ? p.hung->label() : (c ? c->path : std::string());
        bool nvml = p.collector == Collector::nvml;
        bool rocm_smi = p.collector == Collector::rocm_smi;
        // The GPU the call was about, when that is known: the device's own answer, or its place in PCI order
        // (NVML numbers the GPUs it can see in PCI order; CUDA too under CUDA_DEVICE_ORDER=PCI_BUS_ID).
        std::string pci, how;
        if (auto dev = p.hung ? p.hung->device : std::nullopt) {
            const auto& expected = map.expectation.expected;
            if (rocm_smi) {
                // The probe sends each device as soon as its address is read, so a later hang can name it.
                for (auto& d : s.rocm_smi.devices)
                    if (d.index == *dev) pci = d.pci;
            } else if (nvml) {
                for (auto& d : s.nvml.devices)
                    if (d.index == *dev) pci = map.pci_of(d);
                if (pci.empty() && s.nvml.device_count && *s.nvml.device_count == expected.size() &&
                    *dev < expected.size()) {
                    pci = expected[*dev];
                    how = fmt::format("NVML numbers the {} GPUs it counts in PCI order: device {} is {}",
                                      expected.size(), *dev, pci);
                }
            } else {
                bool all = p.hung->scope == HungCall::Scope::all_devices;
                const CudaView* v = all && s.cuda.all ? &*s.cuda.all : &s.cuda.caller;
                for (auto& d : v->devices)
                    if (d.ordinal == static_cast<int>(*dev)) pci = d.pci;
                bool pci_order = (all || !v->cuda_visible_devices) && v->cuda_device_order == "PCI_BUS_ID";
                if (pci.empty() && pci_order && v->device_count &&
                    static_cast<size_t>(*v->device_count) == expected.size() && *dev < expected.size()) {
                    pci = expected[*dev];
                    how = fmt::format("CUDA_DEVICE_ORDER=PCI_BUS_ID numbers the {} GPUs in PCI order: ordinal {} is {}",
                                      expected.size(), *dev, pci);
                }
            }
        }
        auto f = rule("driver.unresponsive")
                     .finding(fmt::format("{} did not answer: {} never returned{}", p.library,
                                          call.empty() ? "a call" : call,
                                          pci.empty() ? std::string() : " on " + describe(ctx.gpu(pci))));
        if (!pci.empty()) f.subjects.push_back(ctx.gpu(pci));
        f.evidence.push_back({call.empty() ? std::string(to_string(p.collector)) : call,
                              c ? (c->message.empty() ? "timed out" : c->message) : "timed out"});
        if (!how.empty()) f.evidence.push_back({"which GPU", how});
        f.next_step = fmt::format(
            "A driver call that never returns means a wedged GPU or driver: look for {} in the kernel log and for "
            "processes in D state (`ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'`). Drain the node; a GPU reset ({}) "
            "or a reboot is usually needed. gpudx killed its probe, so the other layers are still valid.",
            p.wedge_signs, p.reset);
        out.push_back(std::move(f));
    }
}

void check_nvml_init(const Snapshot& s, std::vector<Finding>& out) {
    const auto& n = s.nvml;
    bool gpus_on_pcie = !nvidia_pcie_gpus(s).empty();
    if (!n.load_error.empty() && gpus_on_pcie) {
        auto f = rule("driver.nvml_not_loaded")
                     .finding("libnvidia-ml.so.1 could not be loaded, although NVIDIA GPUs are on the PCIe bus");
        f.evidence.push_back({"dlopen(libnvidia-ml.so.1)", n.load_error});
        f.next_step = "Install the driver's user-space package matching the kernel module (see the libraries layer), "
                      "or in a container run with the NVIDIA container runtime so the library is injected.";
        out.push_back(std::move(f));
    }
    auto outcome = nvml_init(n);
    if (outcome == NvmlInit::not_attempted || outcome == NvmlInit::succeeded) return;
    int rc = *n.init_result;
    auto f = rule("driver.nvml_init_failed").finding(fmt::format("nvmlInit_v2 failed: {}", n.init_error));
    f.evidence.push_back({"nvmlInit_v2 in " + n.library_path, fmt::format("{} ({})", nvml_code_name(rc), rc)});
    if (outcome == NvmlInit::driver_not_loaded) {
        if (module_layer_read(s) && !nvidia_module_loaded(s)) {
            f.message += "; the nvidia kernel module is not loaded: the module layer is the cause";
            f.evidence.push_back({"/proc/modules", "no nvidia module"});
        }
        f.next_step = "Load the kernel module (`modprobe nvidia`) and read the kernel log for why it failed "
                      "(Secure Boot signature, vermagic mismatch, no module for this kernel).";
    } else if (outcome == NvmlInit::library_version_mismatch) {
        f.message += "; the user-space library and the kernel module are different driver versions";
        if (s.module.nvidia_driver_version)
            f.evidence.push_back({"/proc/driver/nvidia/version", *s.module.nvidia_driver_version});
        rule("driver.nvml_init_failed").file_under(f, Layer::libraries);
        f.next_step = "Usually a driver upgrade without a reboot, or a container carrying its own libnvidia-ml: "
                      "reboot into the new module, or remove the stale library copy the libraries layer names.";
    } else if (outcome == NvmlInit::no_permission) {
        f.message += "; permission denied on the device nodes";
        f.next_step = "Check /dev/nvidiactl and /dev/nvidia* permissions (devices layer) and the cgroup device rules.";
    } else {
        f.next_step = "Read the kernel log for NVRM errors and Xids; compare with `nvidia-smi` on the node.";
    }
    out.push_back(std::move(f));
}

// The version of the libcuda.so.1 the loader picks, from the libraries layer; empty when unknown.
std::string chosen_libcuda_version(const Snapshot& s) {
    for (auto& lib : s.libraries.libraries)
        if (lib.soname == "libcuda.so.1" && lib.chosen) return lib.chosen->version;
    return {};
}

std::string explain_cuinit(const Snapshot& s, CudaInit outcome, Layer& layer) {
    const auto& v = s.cuda.caller;
    switch (outcome) {
        case CudaInit::no_device: {
            if (module_layer_read(s) && !nvidia_module_loaded(s))
                return "the nvidia kernel module is not loaded: the module layer is the cause";
            if (nvidia_pcie_gpus(s).empty() && s.collector(Collector::pcie) && s.collector(Collector::pcie)->state == CollectorState::ok)
                return "no NVIDIA GPU is on the PCIe bus: the pcie layer is the cause";
            bool hidden_by_env = v.cuda_visible_devices.has_value() &&
                                 ((s.cuda.all && s.cuda.all->device_count.value_or(0) > 0) ||
                                  s.nvml.device_count.value_or(0) > 0);
            if (hidden_by_env) {
                layer = Layer::allocation;
                return fmt::format("CUDA_VISIBLE_DEVICES={} hides every GPU of this node: the allocation is the cause",
                                   *v.cuda_visible_devices);
            }
            bool uvm = false;
            for (auto& n : s.devices.nodes)
                if (n.path == "/dev/nvidia-uvm" && n.type != "missing") uvm = true;
            if (!s.devices.nodes.empty() && !uvm)
                return "/dev/nvidia-uvm is missing (nvidia_uvm not loaded or the node not created): the devices layer "
                       "is the cause";
            return "the driver sees no usable GPU";
        }
        case CudaInit::driver_mismatch: {
            layer = Layer::libraries;
            // Which side moved decides the fix: a newer libcuda is an upgrade awaiting a reboot, an older one a
            // stale copy on the library path.
            std::string user = chosen_libcuda_version(s), kernel = s.module.nvidia_driver_version.value_or("");
            if (!user.empty() && !kernel.empty() && user != kernel)
                return compare_versions(user, kernel) > 0
                           ? fmt::format("libcuda {} ({}) is newer than the kernel module {}: the driver was upgraded "
                                         "and the module not reloaded; the libraries layer is the cause",
                                         user, s.cuda.library_path, kernel)
                           : fmt::format("libcuda {} ({}) is older than the kernel module {}: a stale copy of the "
                                         "library is loaded; the libraries layer is the cause",
                                         user, s.cuda.library_path, kernel);
            return fmt::format("libcuda ({}) does not match the kernel module ({}): the libraries layer is the cause",
                               s.cuda.library_path, kernel.empty() ? "version unknown" : kernel);
        }
        case CudaInit::compat_not_supported:
            layer = Layer::libraries;
            return "a forward-compatibility libcuda (cuda-compat) is loaded on a GPU that does not support it";
        case CudaInit::stub_library:
            layer = Layer::libraries;
            return fmt::format("{} is the CUDA toolkit's stub library, not the driver", s.cuda.library_path);
        case CudaInit::system_not_ready:
            return "the fabric manager has not finished initialising the NVSwitch fabric";
        case CudaInit::access_denied:
            return "the driver was refused access to the device nodes (permissions or cgroup device rules)";
        default: return {};
    }
}

void check_cuda_init(const Snapshot& s, std::vector<Finding>& out) {
    if (!s.cuda.load_error.empty() && !nvidia_pcie_gpus(s).empty()) {
        auto f = rule("driver.cuda_not_loaded")
                     .finding(
                         "libcuda.so.1 could not be loaded, although NVIDIA GPUs are on the PCIe bus: CUDA programs "
                         "cannot start");
        f.evidence.push_back({"dlopen(libcuda.so.1)", s.cuda.load_error});
        f.next_step = "Install the driver's user-space package matching the kernel module (see the libraries layer), "
                      "or in a container run with the NVIDIA container runtime so the library is injected.";
        out.push_back(std::move(f));
    }
    const auto& v = s.cuda.caller;
    auto outcome = cuda_init(v);
    if (outcome == CudaInit::not_attempted || outcome == CudaInit::succeeded) return;
    int rc = *v.init_result;
    // A host without NVIDIA GPUs (an AMD node whose image carries libcuda) has no device to find: that is the
    // right answer, not a failure.
    if (outcome == CudaInit::no_device && nvidia_pcie_gpus(s).empty() && s.collector(Collector::pcie) &&
        s.collector(Collector::pcie)->state == CollectorState::ok)
        return;
    Layer layer = Layer::driver;
    std::string cause = explain_cuinit(s, outcome, layer);
    auto f = rule("driver.cuda_init_failed")
                 .finding_in(layer, Severity::error,
                             fmt::format("cuInit failed with {} ({}): {}{}{}", v.init_name, rc, v.init_meaning,
                                         cause.empty() ? "" : "; ", cause));
    f.evidence.push_back({"cuInit(0) in " + s.cuda.library_path, fmt::format("{} ({})", v.init_name, rc)});
    f.evidence.push_back({"environment", cuda_env(v)});
    if (s.module.nvidia_driver_version)
        f.evidence.push_back({"/proc/driver/nvidia/version", *s.module.nvidia_driver_version});
    if (s.cuda.driver_version) f.evidence.push_back({"cuDriverGetVersion", std::to_string(*s.cuda.driver_version)});
    f.next_step = layer == Layer::allocation
                      ? "Fix the job's CUDA_VISIBLE_DEVICES (use UUIDs from `gpudx ids`); run `gpudx diagnose "
                        "--all-devices` to confirm CUDA sees the GPUs without it."
                  : layer == Layer::libraries && !chosen_libcuda_version(s).empty() && s.module.nvidia_driver_version &&
                            compare_versions(chosen_libcuda_version(s), *s.module.nvidia_driver_version) > 0
                      ? "The user-space driver was upgraded while the old kernel module stays loaded: drain the node "
                        "and reboot it (or stop every GPU process and reload the nvidia modules) so the module "
                        "matches the installed libraries."
                  : layer == Layer::libraries
                      ? "Make the dynamic loader pick the libcuda.so.1 of the installed driver (see the libraries "
                        "layer for every copy on the path); reboot if the module was upgraded without one."
                      : "Fix the lowest failing layer first (gpudx diagnose names it), then re-run.";
    out.push_back(std::move(f));
}

void check_version(const Snapshot& s, std::vector<Finding>& out) {
    const auto& user = s.nvml.driver_version;
    const auto& kernel = s.module.nvidia_driver_version;
    if (user.empty() || !kernel || kernel->empty() || user == *kernel) return;
    auto f = rule("driver.version_mismatch")
                 .finding(fmt::format("NVML reports driver {} but the kernel module is {}", user, *kernel));
    f.evidence = {{"nvmlSystemGetDriverVersion in " + s.nvml.library_path, user},
                  {"/proc/driver/nvidia/version", *kernel}};
    f.next_step = "The loaded user-space driver is not the kernel module's: remove or stop loading the stale "
                  "libnvidia-ml/libcuda copy (libraries layer), or reboot if the driver was upgraded in place.";
    out.push_back(std::move(f));
}

void check_missing_gpus(const CheckContext& ctx, const NvmlMap& map, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    auto init = nvml_init(s.nvml);
    if (!s.nvml.device_count || (init != NvmlInit::not_attempted && init != NvmlInit::succeeded)) return;
    const auto& expected = map.expectation.expected;
    size_t answered = std::count_if(s.nvml.devices.begin(), s.nvml.devices.end(), nvml_answered);
    std::vector<std::string> missing;
    for (auto& pci : expected) {
        bool seen = std::any_of(s.nvml.devices.begin(), s.nvml.devices.end(), [&](auto& d) { return d.pci == pci; });
        if (!seen) missing.push_back(pci);
    }
    // NVML may still be partway (a hung probe): only count when it listed every device it announced.
    if (!missing.empty() && s.nvml.devices.size() >= *s.nvml.device_count) {
        size_t on_pcie = expected.size() + map.expectation.skipped.size();
        auto f = rule("driver.nvml_missing_gpu")
                     .finding(fmt::format("NVML sees {} GPU(s){}, PCIe has {}{}; missing: {}", answered,
                                          answered != *s.nvml.device_count
                                              ? fmt::format(" (it counts {}; {} gave no address)", *s.nvml.device_count,
                                                            *s.nvml.device_count - answered)
                                              : std::string(),
                                          on_pcie,
                                          map.expectation.skipped.empty()
                                              ? std::string()
                                              : fmt::format(" ({} expected here)", expected.size()),
                                          fmt::join(missing, ", ")));
        for (auto& pci : missing) {
            f.subjects.push_back(ctx.gpu(pci));
            bool in_procfs = std::any_of(s.module.nvidia_gpus.begin(), s.module.nvidia_gpus.end(),
                                         [&](auto& g) { return g.address == pci; });
            f.evidence.push_back({"/sys/bus/pci/devices/" + pci, in_procfs ? "present; the kernel driver knows it"
                                                                           : "present; not in /proc/driver/nvidia/gpus"});
            for (auto& [index, a] : map.attributed)
                if (a.pci == pci)
                    for (auto& d : s.nvml.devices)
                        if (d.index == index)
                            f.evidence.push_back({fmt::format("NVML device {}", index),
                                                  fmt::format("no handle ({}); this GPU: {}",
                                                              d.errors.empty() ? "no answer" : d.errors[0], a.why)});
        }
        f.evidence.push_back({"nvmlDeviceGetCount_v2", std::to_string(*s.nvml.device_count)});
        if (!map.expectation.skipped.empty())
            f.evidence.push_back({"not expected in NVML (not judged)", fmt::format("{}", fmt::join(map.expectation.skipped, ", "))});
        f.next_step = "Read the kernel log for this address (Xid, RmInitAdapter failed, fallen off the bus). Check "
                      "whether the GPU is excluded (NVreg_ExcludedGpus) or held by another driver (vfio-pci); a GPU "
                      "that failed init usually needs a reset or a reboot.";
        out.push_back(std::move(f));
    }
    // CUDA without CUDA_VISIBLE_DEVICES should see what NVML sees.
    const CudaView* unfiltered = s.cuda.all                              ? &*s.cuda.all
                                 : !s.cuda.caller.cuda_visible_devices ? &s.cuda.caller
                                                                       : nullptr;
    if (unfiltered && unfiltered->device_count && *unfiltered->device_count < static_cast<int>(s.nvml.devices.size())) {
        std::vector<std::string> lost;
        Finding f = rule("driver.cuda_missing_gpu").finding("");
        for (auto& d : s.nvml.devices) {
            auto pci = map.pci_of(d);
            bool seen = std::any_of(unfiltered->devices.begin(), unfiltered->devices.end(), [&](auto& c) {
                return (!pci.empty() && c.pci == pci) || (!d.uuid.empty() && c.uuid == d.uuid);
            });
            if (seen) continue;
            lost.push_back(nvml_device_name(map, d));
            if (!pci.empty()) f.subjects.push_back(ctx.gpu(pci));
            if (!nvml_answered(d))
                f.evidence.push_back({fmt::format("NVML device {}", d.index),
                                      pci.empty() ? "no handle; address unknown"
                                                  : fmt::format("no handle; this GPU: {}", map.attributed.at(d.index).why)});
        }
        if (!lost.empty()) {
            f.message = fmt::format("CUDA sees {} GPU(s) with no CUDA_VISIBLE_DEVICES, NVML {}; missing: {}",
                                    *unfiltered->device_count, s.nvml.devices.size(), fmt::join(lost, ", "));
            f.evidence.insert(f.evidence.begin(), {{"cuDeviceGetCount", std::to_string(*unfiltered->device_count)},
                                                   {"nvmlDeviceGetCount_v2", std::to_string(s.nvml.devices.size())}});
            f.next_step = "A GPU NVML sees but CUDA does not is usually in a failed state (check Xids) or uses an "
                          "unsupported mode; `nvidia-smi -q -i <UUID>` shows its state.";
            out.push_back(std::move(f));
        }
    }
}

void check_device_health(const CheckContext& ctx, const NvmlMap& map, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    bool nvswitch_system = !s.pcie.nvswitches.empty();
    for (auto& d : s.nvml.devices) {
        auto pci = map.pci_of(d);
        GpuRef g = pci.empty() ? GpuRef{} : ctx.gpu(pci);
        if (g.uuid.empty()) g.uuid = d.uuid;
        std::string who = pci.empty() && g.uuid.empty() ? nvml_device_name(map, d) : describe(g);
        auto attributed = map.attributed.find(d.index);
        auto call = [&](const char* name) { return fmt::format("{}({})", name, d.index); };
        auto add = [&](const Rule& r, std::string msg, Evidence ev, std::string next) {
            out.push_back(r.finding(std::move(msg), {subjects_of(g), {std::move(ev)}, std::move(next)}));
        };
        for (auto& e : d.errors) {
            bool lost = reports_gpu_lost(e);
            add(lost ? rule("driver.gpu_lost") : rule("driver.query_failed"), fmt::format("{}: {}", who, e),
                {call("nvml"), e},
                lost ? "The GPU stopped answering (fallen off the bus): drain the node, read the kernel log for Xid "
                       "79, reset or reboot."
                     : "Re-run; if it persists, compare with `nvidia-smi -q -i <UUID>` and the kernel log.");
            if (attributed != map.attributed.end())
                out.back().evidence.push_back({"which GPU", fmt::format("{}: {}", pci, attributed->second.why)});
        }
        if (d.persistence_mode && !*d.persistence_mode)
            add(rule("driver.persistence_off"), fmt::format("{}: persistence mode is off", describe(g)),
                {call("nvmlDeviceGetPersistenceMode"), "Disabled"},
                "Enable nvidia-persistenced (systemctl enable --now nvidia-persistenced): without it every CUDA start "
                "re-initialises the GPU and checkpoint/restore needs an explicit cuInit.");
        if (d.ecc_uncorrected_volatile.value_or(0) > 0)
            add(rule("driver.ecc_uncorrected"),
                fmt::format("{}: {} uncorrected ECC error(s) since the driver loaded", describe(g),
                            *d.ecc_uncorrected_volatile),
                {call("nvmlDeviceGetTotalEccErrors") + " volatile", std::to_string(*d.ecc_uncorrected_volatile)},
                "Drain the node; jobs on this GPU may have computed on corrupted memory. Reset the GPU so pending "
                "row remaps apply, and replace it if errors recur.");
        else if (d.ecc_uncorrected_aggregate.value_or(0) > 0)
            add(rule("driver.ecc_uncorrected_history"),
                fmt::format("{}: {} uncorrected ECC error(s) over its lifetime", describe(g),
                            *d.ecc_uncorrected_aggregate),
                {call("nvmlDeviceGetTotalEccErrors") + " aggregate", std::to_string(*d.ecc_uncorrected_aggregate)},
                "Track this GPU: a rising lifetime count is a reason for an RMA.");
        if (d.retired_pages_pending.value_or(0) > 0)
            add(rule("driver.retired_pages_pending"),
                fmt::format("{}: retired pages are pending (take effect after a GPU reset)", describe(g)),
                {call("nvmlDeviceGetRetiredPagesPendingStatus"), "pending"},
                "Reset the GPU (nvidia-smi -r) when it is idle so the retirement takes effect.");
        if (d.remapped_rows_failure.value_or(false))
            add(rule("driver.remapped_rows_failure"),
                fmt::format("{}: row remapping failed (no spare rows left)", describe(g)),
                {call("nvmlDeviceGetRemappedRows"),
                 fmt::format("failureOccurred=1, uncorrectable={}", d.remapped_rows_uncorrectable.value_or(0))},
                "The GPU's memory can no longer be repaired in the field: drain the node and replace the GPU.");
        else if (d.remapped_rows_pending.value_or(false))
            add(rule("driver.remapped_rows_pending"),
                fmt::format("{}: a row remap is pending and applies at the next GPU reset", describe(g)),
                {call("nvmlDeviceGetRemappedRows"), "isPending=1"},
                "Reset the GPU (nvidia-smi -r -i <UUID>) when it is idle, or reboot.");
        if (d.gpu_recovery_action && *d.gpu_recovery_action != 0) {
            RecoveryAction a = recovery_action(*d.gpu_recovery_action);
            add(rule("driver.recovery_action"),
                fmt::format("{}: the driver asks for {} to recover this GPU", describe(g), a.name),
                {call("nvmlDeviceGetFieldValues") + " NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
                 fmt::format("{} ({})", *d.gpu_recovery_action, a.name)},
                std::string(a.next_step));
            out.back().severity = a.severity;
        }
        if (d.mig_mode.value_or(false))
            add(rule("driver.mig_enabled"),
                fmt::format("{}: MIG is on with {} instance(s)", describe(g), d.mig_uuids.size()),
                {call("nvmlDeviceGetMigMode"), "Enabled"},
                "Jobs must address MIG instances by their MIG-UUIDs (gpudx ids lists them).");
        if (nvswitch_system) {
            auto fabric = fabric_state(d);
            if (!fabric) {
                add(rule("driver.fabric_unknown"),
                    fmt::format("{}: NVSwitches are present but the fabric state could not be read", describe(g)),
                    {call("nvmlDeviceGetGpuFabricInfoV"), "not available"},
                    "Check `nvidia-smi -q | grep -A3 Fabric` and that nvidia-fabricmanager is running.");
            } else if (*fabric != FabricState::completed) {
                const char* state = *fabric == FabricState::not_started   ? "not started"
                                    : *fabric == FabricState::in_progress ? "in progress"
                                                                          : "not supported";
                add(rule("driver.fabric_not_ready"),
                    fmt::format("{}: NVSwitch fabric registration is {}", describe(g), state),
                    {call("nvmlDeviceGetGpuFabricInfoV"), fmt::format("state={} ({})", *d.fabric_state, state)},
                    "Start nvidia-fabricmanager (systemctl status nvidia-fabricmanager; its version must equal the "
                    "driver's); CUDA returns CUDA_ERROR_SYSTEM_NOT_READY until registration completes.");
            } else if (fabric_failed(d)) {
                add(rule("driver.fabric_failed"),
                    fmt::format("{}: NVSwitch fabric registration completed with an error", describe(g)),
                    {call("nvmlDeviceGetGpuFabricInfoV"),
                     fmt::format("status={}", nvml_code_name(static_cast<int>(*d.fabric_status)))},
                    "Read /var/log/fabricmanager.log; restart nvidia-fabricmanager, then reset the GPUs.");
            }
        }
    }
}

}  // namespace

void check_driver(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    NvmlMap map;
    map.expectation = nvml_expectation(s);
    map.attributed = attribute_unanswered(s, map.expectation);
    check_unresponsive(ctx, map, out);
    check_nvml_init(s, out);
    check_cuda_init(s, out);
    check_version(s, out);
    check_missing_gpus(ctx, map, out);
    check_device_health(ctx, map, out);
}

constinit const RuleFamily kDriverFamily{"driver", Layer::driver, kDriverRules, check_driver};

}  // namespace gpudx
