#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rules/engine/families.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"pcie.no_gpu", Layer::pcie, Severity::error, {C::pcie},
     "no GPU of display class from NVIDIA or AMD on the PCIe bus"},
    {"pcie.gpu_count_unexpected", Layer::pcie, Severity::warning, {C::pcie},
     "more GPUs on PCIe than --expect-gpus says"},
    {"pcie.gpu_missing", Layer::pcie, Severity::error, {C::pcie, C::module, C::nvml},
     "fewer GPUs on PCIe than --expect-gpus says, naming the ones the driver still remembers"},
    {"pcie.fell_off_bus", Layer::pcie, Severity::error, {C::pcie},
     "a GPU, NVSwitch or bridge above a GPU no longer answers config reads (vendor 0xffff)"},
    {"pcie.link_degraded", Layer::pcie, Severity::warning, {C::pcie},
     "a link on a GPU's path trained narrower or slower than its maximum"},
    {"pcie.aer_fatal", Layer::pcie, Severity::error, {C::pcie},
     "a device on a GPU's path counted fatal uncorrectable AER errors since boot, and no second reading shows "
     "whether they still grow"},
    {"pcie.aer_nonfatal", Layer::pcie, Severity::warning, {C::pcie},
     "a device on a GPU's path counted non-fatal uncorrectable AER errors since boot, and no second reading shows "
     "whether they still grow"},
    {"pcie.aer_uncorrectable_growing", Layer::pcie, Severity::error, {C::pcie},
     "fatal or non-fatal AER counters of a GPU or a port on its path to the root port grew between two readings"},
    {"pcie.aer_correctable_growing", Layer::pcie, Severity::warning, {C::pcie},
     "correctable AER counters of a GPU or a port on its path to the root port grew between two readings"},
    {"pcie.aer_history", Layer::pcie, Severity::info, {C::pcie},
     "AER counters on a GPU's path are not zero but did not grow between two readings: errors of the past since "
     "boot"},
    {"pcie.nouveau_bound", Layer::pcie, Severity::error, {C::pcie}, "an NVIDIA GPU is bound to nouveau"},
    {"pcie.gpu_passthrough", Layer::pcie, Severity::info, {C::pcie},
     "a GPU is bound to vfio-pci or pci-stub: reserved for a VM"},
    {"pcie.gpu_no_driver", Layer::pcie, Severity::error, {C::pcie, C::module},
     "a GPU is bound to no driver although its vendor's module is loaded (or the module list is unknown)"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

constexpr uint32_t kNvidia = 0x10de, kAmd = 0x1002;

std::string sysfs(const PciDevice& d, std::string_view attr) {
    return fmt::format("/sys/bus/pci/devices/{}/{}", d.address, attr);
}

std::string nonzero_counters(const std::map<std::string, uint64_t>& counters) {
    std::string out;
    for (auto& [name, n] : counters)
        if (n && !name.starts_with("TOTAL_ERR")) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, n);
    return out;
}

// The GPUs whose traffic crosses a device: the device itself when it is a GPU, else every GPU below it.
std::vector<GpuRef> gpus_through(const CheckContext& ctx, const PciDevice& dev) {
    const auto& l = ctx.snapshot.pcie;
    std::vector<GpuRef> out;
    for (auto& addr : l.gpus) {
        for (const PciDevice* d : pcie_path_up(l, addr)) {
            if (d->address == dev.address) {
                out.push_back(ctx.gpu(addr));
                break;
            }
        }
    }
    return out;
}

// GPUs, NVSwitches and the bridges above GPUs: the devices whose health decides the GPUs'.
std::vector<const PciDevice*> gpu_path_devices(const PcieLayer& l) {
    std::set<std::string> wanted(l.gpus.begin(), l.gpus.end());
    wanted.insert(l.nvswitches.begin(), l.nvswitches.end());
    for (auto& addr : l.gpus) {
        const PciDevice* d = find_pci_device(l, addr);
        for (int hops = 0; d && !d->parent.empty() && hops < 16; ++hops) {
            wanted.insert(d->parent);
            d = find_pci_device(l, d->parent);
        }
    }
    std::vector<const PciDevice*> out;
    for (auto& d : l.devices)
        if (wanted.count(d.address)) out.push_back(&d);
    return out;
}

std::string what(const PciDevice& d) {
    if (d.is_gpu) return "GPU";
    if (d.is_nvswitch) return "NVSwitch";
    // A bridge with no bridge above it sits on a root bus: the root port; the ones between are switch ports.
    return d.parent.empty() ? "root port" : "switch port";
}

// One AER file (or the root port's totals) in both readings.
struct AerFile {
    std::string_view file;  // sysfs attribute, for the evidence
    const std::map<std::string, uint64_t>& first;
    const std::map<std::string, uint64_t>& later;
    bool uncorrectable;
};

// "BadTLP 3 -> 7, TOTAL_ERR_COR 5 -> 9": the counters of these files that grew; TOTAL lines only when alone.
std::string grown_counters(const std::vector<AerFile>& files, bool uncorrectable, std::vector<Evidence>& evidence) {
    std::string out;
    for (auto& f : files) {
        if (f.uncorrectable != uncorrectable) continue;
        std::string grown;
        for (auto& [name, before] : f.first) {
            auto it = f.later.find(name);
            if (it == f.later.end() || it->second <= before) continue;
            grown += fmt::format("{}{} {} -> {}", grown.empty() ? "" : ", ", name, before, it->second);
        }
        if (grown.empty()) continue;
        evidence.push_back({std::string(f.file), grown});
        out += (out.empty() ? "" : "; ") + grown;
    }
    return out;
}

// AER counters of one device on a GPU's path: growth between the two readings is what is happening now; a count
// that did not grow is the past since boot. Without a second reading (an older snapshot, a capture that recorded
// none, --health-interval 0) growth is unknown, so uncorrectable counts keep their old weight (fail closed).
void check_aer(const PcieLayer& l, const PciDevice& d, const std::string& who, const std::vector<GpuRef>& subjects,
               std::vector<Finding>& out) {
    uint64_t fatal = aer_total(d.aer_fatal), nonfatal = aer_total(d.aer_nonfatal);
    if (!d.aer_later) {
        if (fatal)
            out.push_back(rule("pcie.aer_fatal")
                              .finding(fmt::format("{} reported {} fatal uncorrectable PCIe error(s) since boot ({}); "
                                                   "no second reading shows whether they still grow",
                                                   who, fatal, nonzero_counters(d.aer_fatal)),
                                       {subjects,
                                        {{sysfs(d, "aer_dev_fatal"), fmt::format("TOTAL_ERR_FATAL {}", fatal)}},
                                        "Drain the node and save the kernel log (AER lines name the error source); a "
                                        "fatal error on a GPU or its bridge usually needs a power cycle and, if it "
                                        "recurs, a hardware ticket for the card, riser or slot. Run `gpudx diagnose` "
                                        "on the node itself: it reads the counters twice and tells old from new."}));
        if (nonfatal)
            out.push_back(rule("pcie.aer_nonfatal")
                              .finding(fmt::format("{} reported {} non-fatal uncorrectable PCIe error(s) since boot "
                                                   "({}); no second reading shows whether they still grow",
                                                   who, nonfatal, nonzero_counters(d.aer_nonfatal)),
                                       {subjects,
                                        {{sysfs(d, "aer_dev_nonfatal"), fmt::format("TOTAL_ERR_NONFATAL {}", nonfatal)}},
                                        "Watch whether the count grows (`gpudx diagnose` on the node reads it twice); "
                                        "a growing count points at the card, riser or slot, so schedule a reseat and "
                                        "check the kernel log for AER lines."}));
        return;
    }
    const AerCounters& later = *d.aer_later;
    std::vector<AerFile> files = {{"aer_dev_fatal", d.aer_fatal, later.fatal, true},
                                  {"aer_dev_nonfatal", d.aer_nonfatal, later.nonfatal, true},
                                  {"aer_dev_correctable", d.aer_correctable, later.correctable, false}};
    // The root port's totals, one file each: the fatal and non-fatal ones count uncorrectable errors of the
    // hierarchy below it.
    std::vector<std::string> rootport_files;
    std::vector<std::map<std::string, uint64_t>> rootport_first, rootport_later;
    for (auto& [name, n] : d.aer_rootport) {
        rootport_files.push_back("aer_rootport_" + name);
        rootport_first.push_back({{name, n}});
        auto it = later.rootport.find(name);
        rootport_later.push_back(it == later.rootport.end() ? std::map<std::string, uint64_t>{}
                                                            : std::map<std::string, uint64_t>{{name, it->second}});
    }
    for (size_t i = 0; i < rootport_files.size(); ++i)
        files.push_back({rootport_files[i], rootport_first[i], rootport_later[i], rootport_files[i] != "aer_rootport_total_err_cor"});
    std::string interval = l.aer_sample_interval_ms ? fmt::format("{:g} s", *l.aer_sample_interval_ms / 1000) : "a moment";
    auto with_paths = [&](std::vector<Evidence> ev) {
        for (auto& e : ev) e.source = sysfs(d, e.source);
        return ev;
    };
    std::vector<Evidence> uncor_evidence, cor_evidence;
    std::string uncor = grown_counters(files, true, uncor_evidence);
    std::string cor = grown_counters(files, false, cor_evidence);
    if (!uncor.empty())
        out.push_back(rule("pcie.aer_uncorrectable_growing")
                          .finding(fmt::format("{} is logging uncorrectable PCIe errors now: within {} {}", who,
                                               interval, uncor),
                                   {subjects, with_paths(std::move(uncor_evidence)),
                                    "Drain the node: uncorrectable errors that keep coming corrupt or stall DMA. Save "
                                    "the kernel log (AER lines name the error type and the requester), then reseat or "
                                    "replace the card, riser or cable at this port; a power cycle clears a port the "
                                    "kernel could not recover."}));
    if (!cor.empty())
        out.push_back(rule("pcie.aer_correctable_growing")
                          .finding(fmt::format("{} is logging correctable PCIe errors now: within {} {}", who,
                                               interval, cor),
                                   {subjects, with_paths(std::move(cor_evidence)),
                                    "Correctable errors are retried in hardware but cost bandwidth, and a link that "
                                    "keeps logging them often degrades further: check the link width and speed, "
                                    "watch the counters over a job, and schedule a reseat of the card or riser at "
                                    "this port."}));
    if (uncor.empty() && cor.empty()) {
        std::string counts;
        auto add = [&](std::string_view file, const std::map<std::string, uint64_t>& c) {
            if (auto nz = nonzero_counters(c); !nz.empty()) counts += fmt::format("{}{}: {}", counts.empty() ? "" : "; ", file, nz);
        };
        add("fatal", d.aer_fatal);
        add("non-fatal", d.aer_nonfatal);
        add("correctable", d.aer_correctable);
        for (auto& [name, n] : d.aer_rootport)
            if (n) counts += fmt::format("{}root port {} {}", counts.empty() ? "" : "; ", name, n);
        if (counts.empty()) return;
        out.push_back(rule("pcie.aer_history")
                          .finding(fmt::format("{} counted PCIe errors since boot, none within {}: {}", who,
                                               interval, counts),
                                   {subjects,
                                    {{sysfs(d, "aer_dev_*"), counts}},
                                    "Nothing to do now; if the counts were not there after the last reboot, look for "
                                    "their AER lines in the kernel log to learn when they happened."}));
    }
}

bool module_loaded(const Snapshot& s, std::string_view name) {
    return std::any_of(s.module.loaded.begin(), s.module.loaded.end(), [&](auto& m) { return m.name == name; });
}

void check_gpu_count(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!ctx.options.expect_gpus) return;
    unsigned want = *ctx.options.expect_gpus, have = static_cast<unsigned>(s.pcie.gpus.size());
    if (have == want) return;
    std::vector<Evidence> counted = {
        {"/sys/bus/pci/devices", fmt::format("{} GPU(s): {}", have, fmt::join(s.pcie.gpus, ", "))},
        {"--expect-gpus", std::to_string(want)}};
    if (have > want) {
        out.push_back(
            rule("pcie.gpu_count_unexpected")
                .finding(fmt::format("{} GPUs on PCIe, {} expected", have, want),
                         {{},
                          std::move(counted),
                          "Correct --expect-gpus for this node class, or find out why extra cards are "
                          "visible (a VM given more devices, a card added without updating the inventory)."}));
        return;
    }
    Finding f = rule("pcie.gpu_missing").finding({}, {{}, std::move(counted), {}});
    // No baseline of addresses is given, but the driver's own records may still name the cards that went
    // missing from the bus (they were there when it loaded).
    std::set<std::string> on_bus(s.pcie.gpus.begin(), s.pcie.gpus.end()), missing;
    for (auto& g : s.module.nvidia_gpus)
        if (!g.address.empty() && !on_bus.count(g.address)) {
            missing.insert(g.address);
            f.evidence.push_back({"/proc/driver/nvidia/gpus/" + g.address, "listed by the driver, absent from sysfs"});
        }
    for (auto& d : s.nvml.devices)
        if (!d.pci.empty() && !on_bus.count(d.pci) && missing.insert(d.pci).second)
            f.evidence.push_back({"nvmlDeviceGetPciInfo", d.pci + " reported by NVML, absent from sysfs"});
    for (auto& addr : missing) f.subjects.push_back(ctx.gpu(addr));
    if (missing.empty())
        f.message = fmt::format("{} of {} expected GPUs on PCIe: {} missing (no record names which)", have, want, want - have);
    else
        f.message = fmt::format("{} of {} expected GPUs on PCIe; missing: {}", have, want, fmt::join(missing, ", "));
    f.next_step = "Compare with the slot inventory (`ls /sys/bus/pci/slots/*/address`); check the kernel log for "
                  "'fallen off the bus' and AER errors, then reseat or power-cycle the node (a warm reboot may not "
                  "bring a card back). On a VM, check the passthrough configuration.";
    out.push_back(std::move(f));
}

void check_device_health(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& l = ctx.snapshot.pcie;
    for (const PciDevice* dp : gpu_path_devices(l)) {
        const PciDevice& d = *dp;
        auto subjects = gpus_through(ctx, d);
        std::string who = d.is_gpu && !subjects.empty() ? describe(subjects[0]) : fmt::format("{} {}", what(d), d.address);

        if (d.config_unreadable) {
            out.push_back(rule("pcie.fell_off_bus")
                              .finding(fmt::format("{} does not answer config reads (vendor reads 0xffff): it fell "
                                                   "off the bus",
                                                   who),
                                       {subjects,
                                        {{sysfs(d, "config"), "vendor id 0xffff"}},
                                        "Save the kernel log (Xid 79 'fallen off the bus', AER), drain the node, then "
                                        "power-cycle it (a warm reboot rarely recovers a card); if it recurs, check "
                                        "the slot, riser and power cabling."}));
            continue;  // its other attributes are stale once the device stopped answering
        }

        auto& cur = d.link_current;
        auto& max = d.link_max;
        bool narrow = cur.width && max.width && *cur.width < *max.width;
        bool slow = cur.speed_gts && max.speed_gts && *cur.speed_gts + 1e-6 < *max.speed_gts;
        if (narrow || slow) {
            Finding f =
                rule("pcie.link_degraded")
                    .finding(fmt::format("{} link trained at {} x{}, below its maximum {} x{}", who, cur.speed_text,
                                         cur.width.value_or(0), max.speed_text, max.width.value_or(0)),
                             {subjects, {}, {}});
            f.evidence.push_back({sysfs(d, "current_link_speed"), cur.speed_text});
            f.evidence.push_back({sysfs(d, "max_link_speed"), max.speed_text});
            f.evidence.push_back({sysfs(d, "current_link_width"), cur.width ? std::to_string(*cur.width) : "?"});
            f.evidence.push_back({sysfs(d, "max_link_width"), max.width ? std::to_string(*max.width) : "?"});
            f.next_step = narrow ? "A narrower link than the slot allows is a seating, riser or slot fault: reseat the "
                                   "card or move it to another slot, then check `current_link_width` again."
                                 : "GPUs lower their link speed when idle: re-read current_link_speed while a job "
                                   "runs (or `nvidia-smi -q -d PCIE`); if it stays low under load, check the BIOS "
                                   "PCIe generation setting and the riser, then reseat.";
            out.push_back(std::move(f));
        }

        check_aer(ctx.snapshot.pcie, d, who, subjects, out);
    }
}

void check_gpu_binding(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    auto* mod_st = s.collector(Collector::module);
    bool module_data = mod_st && mod_st->state == CollectorState::ok;
    for (auto& addr : s.pcie.gpus) {
        const PciDevice* d = find_pci_device(s.pcie, addr);
        if (!d || d->config_unreadable) continue;
        uint32_t vendor = d->vendor_id.value_or(0);
        GpuRef g = ctx.gpu(addr);
        if (d->driver == "nouveau" && vendor == kNvidia) {
            out.push_back(
                rule("pcie.nouveau_bound")
                    .finding(fmt::format("{} is bound to nouveau, so the NVIDIA driver cannot use it", describe(g)),
                             {{g},
                              {{sysfs(*d, "driver"), "nouveau"}},
                              "Blacklist nouveau (`blacklist nouveau` and `options nouveau modeset=0` in "
                              "/etc/modprobe.d/, then `update-initramfs -u` or `dracut -f`) and reboot; the "
                              "NVIDIA driver package normally installs this file."}));
        } else if (d->driver == "vfio-pci" || d->driver == "pci-stub") {
            out.push_back(rule("pcie.gpu_passthrough")
                              .finding(fmt::format("{} is bound to {}: reserved for a VM, not usable on this host",
                                                   describe(g), d->driver),
                                       {{g},
                                        {{sysfs(*d, "driver"), d->driver}},
                                        "Expected on a hypervisor; otherwise remove the vfio-pci ids from the kernel "
                                        "command line or /etc/modprobe.d and rebind the card."}));
        } else if (d->driver.empty()) {
            // With the vendor's module not loaded, the unbound card is module.not_loaded's business.
            const char* module = vendor == kNvidia ? "nvidia" : vendor == kAmd ? "amdgpu" : "";
            if (module_data && *module && !module_loaded(s, module)) continue;
            out.push_back(
                rule("pcie.gpu_no_driver")
                    .finding(
                        fmt::format("{} is on the bus but bound to no driver{}", describe(g),
                                    module_data && *module ? fmt::format(" although {} is loaded", module) : ""),
                        {{g},
                         {{sysfs(*d, "driver"), "absent"}},
                         fmt::format("The driver refused the card at probe: read the kernel log for it (`dmesg | grep "
                                     "-e {} -e NVRM -e amdgpu`); RmInitAdapter or firmware errors mean a card fault, "
                                     "'unsupported' means the driver branch does not know this model.",
                                     addr)}));
        }
    }
}

}  // namespace

void check_pcie(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    auto* st = s.collector(Collector::pcie);
    // No data (a container without /sys, a capture without it) says nothing about the bus.
    if (!st || st->state != CollectorState::ok) return;
    // A device whose vendor or class could not be read may be a GPU: then "no GPU" would be a guess.
    bool unidentified = std::any_of(s.pcie.devices.begin(), s.pcie.devices.end(),
                                    [](const PciDevice& d) { return !d.vendor_id || !d.class_code; });
    if (s.pcie.gpus.empty() && !unidentified) {
        Finding f =
            rule("pcie.no_gpu")
                .finding(fmt::format("no GPU on the PCIe bus: {} PCI devices, none of display class from NVIDIA or AMD",
                                     s.pcie.devices.size()));
        f.evidence.push_back({"/sys/bus/pci/devices", fmt::format("{} devices, 0 GPUs", s.pcie.devices.size())});
        f.next_step = "If this node should have GPUs: check that the cards are seated and powered, the BIOS "
                      "enables the slots (above-4G decoding), and that a VM passes them through.";
        out.push_back(std::move(f));
    }
    check_gpu_count(ctx, out);
    check_device_health(ctx, out);
    check_gpu_binding(ctx, out);
}

constinit const RuleFamily kPcieFamily{"pcie", Layer::pcie, kRules, check_pcie};

}  // namespace gpudx
