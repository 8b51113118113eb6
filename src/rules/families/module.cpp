#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rules/engine/families.hpp"
#include "core/version.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"module.not_loaded", Layer::module, Severity::error, {C::module, C::pcie},
     "GPUs of a vendor are on PCIe but its kernel module (nvidia, amdgpu) is not loaded"},
    {"module.missing_for_kernel", Layer::module, Severity::error, {C::module, C::pcie},
     "no nvidia module file for the running kernel (a warning while a module from a removed file is loaded)"},
    {"module.vermagic_mismatch", Layer::module, Severity::error, {C::module},
     "the nvidia module file was built for another kernel than the running one"},
    {"module.updated_not_rebooted", Layer::module, Severity::warning, {C::module, C::libraries},
     "the loaded nvidia module differs from the file on disk (an error once user space moved to the file's version)"},
    {"module.dkms_build_failed", Layer::module, Severity::error, {C::module},
     "a DKMS build of a GPU module failed and nothing newer replaced it (a warning for a kernel not running)"},
    {"module.gpu_excluded", Layer::module, Severity::warning, {C::module},
     "the NVIDIA driver excludes a GPU (an error when that leaves fewer than --expect-gpus)"},
    {"module.gpu_not_in_driver", Layer::module, Severity::error, {C::module, C::pcie},
     "a GPU bound to nvidia on PCIe is missing from the driver's list: its initialisation failed"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

constexpr uint32_t kNvidia = 0x10de, kAmd = 0x1002;

const LoadedModule* loaded(const ModuleLayer& m, std::string_view name) {
    for (auto& l : m.loaded)
        if (l.name == name) return &l;
    return nullptr;
}

const ModuleFile* file_of(const ModuleLayer& m, std::string_view name) {
    for (auto& f : m.files)
        if (f.name == name) return &f;
    return nullptr;
}

std::vector<const PciDevice*> gpus_of_vendor(const PcieLayer& p, uint32_t vendor) {
    std::vector<const PciDevice*> out;
    for (auto& d : p.devices)
        if (d.is_gpu && d.vendor_id == vendor) out.push_back(&d);
    return out;
}

// Kernel release a vermagic names: its first word ("6.8.0-45-generic SMP preempt mod_unload").
std::string vermagic_release_of(std::string_view vermagic) {
    size_t b = vermagic.find_first_not_of(" \t");
    if (b == std::string_view::npos) return {};
    size_t e = vermagic.find_first_of(" \t", b);
    return std::string(vermagic.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
}

bool read_failed(const CollectorStatus* st, std::string_view path) {
    return st && std::any_of(st->problems.begin(), st->problems.end(), [&](auto& p) { return p.path == path; });
}

// The loaded driver's version: /sys/module/nvidia/version, else the NVRM line of procfs.
std::pair<std::string, std::string> loaded_nvidia_version(const ModuleLayer& m) {
    if (auto* l = loaded(m, "nvidia"); l && !l->version.empty()) return {l->version, "/sys/module/nvidia/version"};
    if (m.nvidia_driver_version) return {*m.nvidia_driver_version, "/proc/driver/nvidia/version"};
    return {};
}

// Version of the user-space driver library the loader would pick, when the libraries layer found one.
std::string userspace_version(const Snapshot& s) {
    for (auto& lib : s.libraries.libraries)
        if ((lib.soname == "libnvidia-ml.so.1" || lib.soname == "libcuda.so.1") && lib.chosen && !lib.chosen->version.empty())
            return lib.chosen->version;
    return {};
}

void check_not_loaded(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (read_failed(s.collector(Collector::module), "/proc/modules")) return;
    struct Want { uint32_t vendor; const char* module; const char* next; };
    static constexpr Want wants[] = {
        {kNvidia, "nvidia",
         "Run `modprobe nvidia` and read its error and `dmesg | grep -i nvrm`: 'Module not found' means no module for "
         "this kernel (see module.missing_for_kernel), 'Invalid module format' a vermagic mismatch, 'Key was "
         "rejected' Secure Boot; also check /etc/modprobe.d for a blacklist."},
        {kAmd, "amdgpu",
         "Run `modprobe amdgpu` and read `dmesg | grep -i amdgpu`; check /etc/modprobe.d for a blacklist and that "
         "the amdgpu-dkms module was built for this kernel (`dkms status`)."},
    };
    for (auto& w : wants) {
        auto gpus = gpus_of_vendor(s.pcie, w.vendor);
        if (gpus.empty() || loaded(s.module, w.module)) continue;
        Finding f = rule("module.not_loaded").finding({});
        std::vector<std::string> bound;
        for (auto* d : gpus) {
            f.subjects.push_back(ctx.gpu(d->address));
            bound.push_back(fmt::format("{} -> {}", d->address, d->driver.empty() ? "no driver" : d->driver));
        }
        f.message = fmt::format("{} {} GPU(s) on PCIe but the {} module is not loaded", gpus.size(),
                                w.vendor == kNvidia ? "NVIDIA" : "AMD", w.module);
        f.evidence.push_back({"/proc/modules", fmt::format("no '{}' line", w.module)});
        f.evidence.push_back({"/sys/bus/pci/devices/*/driver", fmt::format("{}", fmt::join(bound, ", "))});
        f.next_step = w.next;
        out.push_back(std::move(f));
    }
}

void check_module_file(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    const auto& m = s.module;
    if (!m.files_unavailable.empty()) return;  // no module tree in this root: nothing to compare, not a fault
    auto nv_gpus = gpus_of_vendor(s.pcie, kNvidia);
    const LoadedModule* nv_loaded = loaded(m, "nvidia");
    std::vector<GpuRef> subjects;
    for (auto* d : nv_gpus) subjects.push_back(ctx.gpu(d->address));
    const ModuleFile* file = file_of(m, "nvidia");

    if (!file) {
        if (nv_gpus.empty() && !nv_loaded) return;
        // Loaded but no file: this boot works, the next one will not load the driver.
        out.push_back(
            rule("module.missing_for_kernel")
                .finding(
                    nv_loaded ? Severity::warning : Severity::error,
                    fmt::format("no nvidia module file for the running kernel {}{}", m.kernel_release,
                                nv_loaded
                                    ? " (the loaded module came from a file since removed; the next boot will have no "
                                      "driver)"
                                    : ""),
                    {subjects,
                     {{m.module_dir,
                       "no nvidia.ko[.xz|.zst|.gz] in modules.dep.bin, modules.dep, updates/, extra/ "
                       "or kernel/nvidia*/"}},
                     fmt::format("Build the module for this kernel (`dkms autoinstall -k {0}`, or install the "
                                 "driver's prebuilt package for {0}), run `depmod {0}`, then `modprobe nvidia`. If "
                                 "the kernel was upgraded without its headers, install linux-headers-{0} first.",
                                 m.kernel_release)}));
        return;
    }
    if (!file->error.empty()) return;  // reported by the collector as a read problem

    if (!file->vermagic.empty() && vermagic_release_of(file->vermagic) != m.kernel_release) {
        out.push_back(
            rule("module.vermagic_mismatch")
                .finding(
                    fmt::format("{} was built for kernel {}, but the running kernel is {}: the kernel refuses to "
                                "load it ('Invalid module format')",
                                file->path, vermagic_release_of(file->vermagic), m.kernel_release),
                    {subjects,
                     {{file->path + " (modinfo vermagic)", file->vermagic},
                      {"/proc/sys/kernel/osrelease", m.kernel_release}},
                     fmt::format("Rebuild the module for the running kernel (`dkms install nvidia/<version> -k {0}` "
                                 "or reinstall the driver package built for {0}), run `depmod {0}` and reboot or "
                                 "`modprobe nvidia`.",
                                 m.kernel_release)}));
    }

    auto [running, running_src] = loaded_nvidia_version(m);
    if (nv_loaded && !running.empty() && !file->version.empty() && running != file->version) {
        // Warning while the user-space libraries still match the loaded module (everything works until the
        // next reload); error once user space already moved to the file's version, because then NVML and
        // CUDA fail with "Driver/library version mismatch" and only a reboot (or module reload) fixes it.
        std::string user = userspace_version(s);
        bool userspace_moved = !user.empty() && user == file->version;
        Finding f =
            rule("module.updated_not_rebooted")
                .finding(
                    userspace_moved ? Severity::error : Severity::warning,
                    fmt::format("the loaded nvidia module is {} but the file on disk for this kernel is {}: the driver "
                                "was updated and the node not rebooted{}",
                                running, file->version,
                                userspace_moved ? fmt::format("; user-space libraries are already {}", user) : ""),
                    {subjects,
                     {{running_src, running}, {file->path + " (modinfo version)", file->version}},
                     "Drain the node and reboot it (or stop every GPU process and `rmmod nvidia_uvm nvidia_drm "
                     "nvidia_modeset nvidia && modprobe nvidia`) so the kernel module matches the installed driver."});
        if (!user.empty()) f.evidence.push_back({"user-space driver library", user});
        out.push_back(std::move(f));
    }
}

bool gpu_related_dkms(std::string_view module) {
    return module.starts_with("nvidia") || module.starts_with("amdgpu") || module == "gdrdrv";
}

void check_dkms(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& m = ctx.snapshot.module;
    for (auto& e : m.dkms) {
        if (e.state != "failed" || !gpu_related_dkms(e.module)) continue;
        // Settled only by a good build of this version or a newer one for that kernel: an older version still
        // installed is what the failed upgrade was meant to replace (the failure is the news).
        bool replaced = std::any_of(m.dkms.begin(), m.dkms.end(), [&](auto& o) {
            return o.module == e.module && o.kernel == e.kernel && (o.state == "built" || o.state == "installed") &&
                   compare_versions(o.version, e.version) >= 0;
        });
        if (replaced) continue;
        bool running = e.kernel.empty() || e.kernel == m.kernel_release;
        out.push_back(
            rule("module.dkms_build_failed")
                .finding(
                    running ? Severity::error : Severity::warning,
                    fmt::format("DKMS build of {}/{} failed for kernel {}{}", e.module, e.version,
                                e.kernel.empty() ? "(unknown)" : e.kernel,
                                running ? " (the running kernel)" : ": booting that kernel will leave no driver"),
                    {{},
                     {{e.log.empty() ? "/var/lib/dkms/" + e.module + "/" + e.version : e.log, "build failed"}},
                     fmt::format("Read the end of {} (missing kernel headers and a compiler mismatch are the usual "
                                 "causes), fix it, then `dkms install {}/{} -k {}`.",
                                 e.log.empty() ? "the DKMS make.log" : e.log, e.module, e.version,
                                 e.kernel.empty() ? "$(uname -r)" : e.kernel)}));
    }
}

void check_proc_gpus(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    const auto& m = s.module;
    unsigned usable = 0;
    for (auto& g : m.nvidia_gpus) usable += g.excluded != true;
    // Excluding a card is a deliberate setting (NVreg_ExcludedGpus): an error only when the node is then
    // short of the GPUs it should have.
    bool short_of = ctx.options.expect_gpus && usable < *ctx.options.expect_gpus;
    for (auto& g : m.nvidia_gpus) {
        if (g.excluded != true) continue;
        GpuRef ref = g.uuid.empty() ? ctx.gpu(g.address) : GpuRef{g.uuid, g.address};
        out.push_back(
            rule("module.gpu_excluded")
                .finding(
                    short_of ? Severity::error : Severity::warning,
                    fmt::format(
                        "{} is excluded by the NVIDIA driver: NVML and CUDA will not show it{}", describe(ref),
                        short_of ? fmt::format(" ({} usable, {} expected)", usable, *ctx.options.expect_gpus) : ""),
                    {{ref},
                     {{"/proc/driver/nvidia/gpus/" + g.address + "/information", "GPU Excluded: Yes"}},
                     "If not intended, remove the card's UUID from the NVreg_ExcludedGpus module option "
                     "(/etc/modprobe.d/, or the kernel command line) and reload the driver; if it was excluded "
                     "because it is faulty, open a hardware ticket."}));
    }

    if (!m.nvidia_gpus_listed || !loaded(m, "nvidia")) return;
    std::set<std::string> in_driver;
    for (auto& g : m.nvidia_gpus) in_driver.insert(g.address);
    for (auto& d : s.pcie.devices) {
        if (!d.is_gpu || d.driver != "nvidia" || in_driver.count(d.address)) continue;
        GpuRef ref = ctx.gpu(d.address);
        out.push_back(
            rule("module.gpu_not_in_driver")
                .finding(fmt::format("{} is bound to nvidia on PCIe but the driver lists no such GPU: its "
                                     "initialisation failed",
                                     describe(ref)),
                         {{ref},
                          {{"/sys/bus/pci/devices/" + d.address + "/driver", "nvidia"},
                           {"/proc/driver/nvidia/gpus", fmt::format("{}", fmt::join(in_driver, ", "))}},
                          "Read the kernel log for this address (`dmesg | grep -e NVRM -e " + d.address +
                              "`): RmInitAdapter failures point at the card (reset it with `nvidia-smi -r` or "
                              "power-cycle), Xid 79 at the bus."}));
    }
}

}  // namespace

void check_module(const CheckContext& ctx, std::vector<Finding>& out) {
    auto* st = ctx.snapshot.collector(Collector::module);
    if (!st || st->state != CollectorState::ok) return;
    check_not_loaded(ctx, out);
    check_module_file(ctx, out);
    check_dkms(ctx, out);
    check_proc_gpus(ctx, out);
}

constinit const RuleFamily kModuleFamily{"module", Layer::module, kRules, check_module};

}  // namespace gpudx
