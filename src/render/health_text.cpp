// The health facts of each GPU in one or two lines, for `diagnose -v` and `snapshot --format text`: what NVML says
// of the GPU (docs/gpu-health.md), the AER counters of the GPU and every port above it, and the InfiniBand/RoCE
// adapters nearest to it (docs/host-health.md). Facts only: what they mean is the findings' business.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/text.hpp"
#include "model/infiniband.hpp"
#include "render/report.hpp"

namespace gpudx {
namespace {

const NvmlDevice* find_nvml(const Snapshot& s, std::string_view pci) {
    for (auto& d : s.nvml.devices)
        if (d.pci == pci) return &d;
    return nullptr;
}

std::string uuid_of(const Snapshot& s, std::string_view pci) {
    if (auto* d = find_nvml(s, pci); d && !d->uuid.empty()) return strip_control(d->uuid);
    for (auto& g : s.module.nvidia_gpus)
        if (g.address == pci && !g.uuid.empty()) return strip_control(g.uuid);
    for (auto& g : s.module.amd_gpus)
        if (g.pci == pci && !g.uuid.empty()) return strip_control(g.uuid);
    return "UUID unknown";
}

// "33 °C" from one sample, "33 -> 35 °C" from two that differ.
template <typename T, typename F>
std::string sampled(const GpuHealth& h, std::optional<T> GpuHealthSample::*member, F show) {
    const auto& first = h.samples.front().*member;
    const auto& last = h.samples.back().*member;
    if (!last) return {};
    if (h.samples.size() > 1 && first && *first != *last) return show(*first) + " -> " + show(*last);
    return show(*last);
}

// NVLinks up/present, clock event reasons, temperature against the slowdown threshold, power against the limit,
// PCIe replays, ECC, row-remap banks: what was not read is left out or said to be, never shown as zero.
std::string nvml_line(const NvmlDevice& d) {
    const GpuHealth& h = d.health;
    std::vector<std::string> parts;
    unsigned up = static_cast<unsigned>(std::count_if(d.nvlinks.begin(), d.nvlinks.end(), [](auto& l) { return l.active; }));
    size_t present = !d.nvlinks.empty() ? d.nvlinks.size() : h.nvlink_count.value_or(0);
    if (present) parts.push_back(fmt::format("NVLink {}/{} up", up, present));
    else parts.push_back(h.nvlink_count ? "no NVLink" : "NVLink not read");
    if (h.samples.empty()) {
        parts.push_back("no health sample");
    } else {
        auto& last = h.samples.back();
        parts.push_back("clocks: " + (last.clock_event_reasons ? clock_event_reason_names(*last.clock_event_reasons)
                                                               : std::string("not read")));
        auto temp = sampled(h, &GpuHealthSample::temperature_c, [](unsigned c) { return fmt::format("{}", c); });
        if (!temp.empty())
            parts.push_back(fmt::format("{} °C{}", temp,
                                        h.temperature_slowdown_c ? fmt::format(" (slowdown {} °C)", *h.temperature_slowdown_c)
                                                                 : std::string()));
        auto power = sampled(h, &GpuHealthSample::power_mw, [](unsigned mw) { return fmt::format("{:.0f}", mw / 1000.0); });
        if (!power.empty())
            parts.push_back(fmt::format("{} W{}", power,
                                        h.power_limit_mw ? fmt::format(" of {:.0f} W", *h.power_limit_mw / 1000.0)
                                                         : std::string()));
        auto replays =
            sampled(h, &GpuHealthSample::pcie_replays, [](unsigned long long n) { return fmt::format("{}", n); });
        if (!replays.empty()) parts.push_back("PCIe replays " + replays);
    }
    if (d.ecc_enabled && !*d.ecc_enabled) {
        parts.push_back("ECC off");
    } else {
        auto total = std::find_if(h.ecc.begin(), h.ecc.end(), [](auto& e) { return e.location == EccLocation::total; });
        std::optional<unsigned long long> uncorrected = d.ecc_uncorrected_volatile, corrected;
        if (total != h.ecc.end()) {
            if (total->uncorrected_volatile) uncorrected = total->uncorrected_volatile;
            corrected = total->corrected_volatile;
        }
        if (uncorrected || corrected)
            parts.push_back(fmt::format("ECC since load: {} uncorrected, {} corrected",
                                        uncorrected ? std::to_string(*uncorrected) : "?",
                                        corrected ? std::to_string(*corrected) : "?"));
    }
    if (auto& r = h.row_remap_histogram)
        parts.push_back(fmt::format("row-remap banks: {} low, {} none of {}", r->low, r->none,
                                    r->max + r->high + r->partial + r->low + r->none));
    std::string out;
    for (auto& p : parts) out += (out.empty() ? "" : ", ") + p;
    return out;
}

// An AER file's total (model/pcie.hpp), or nothing when the file was not read.
std::optional<uint64_t> aer_total_read(const std::map<std::string, uint64_t>& counters) {
    if (counters.empty()) return std::nullopt;
    return aer_total(counters);
}

std::string port_name(const PciDevice& d) {
    if (d.is_gpu) return "GPU";
    return fmt::format("{} {}", d.parent.empty() ? "root port" : "switch port", d.address);
}

// "AER: GPU and 2 ports to the root port, no errors" / "... : switch port 0000:02:00.0 1 -> 5 correctable".
std::string aer_line(const PcieLayer& l, std::string_view gpu) {
    std::vector<const PciDevice*> path = pcie_path_up(l, gpu);
    if (path.empty()) return "AER: GPU not on PCIe";
    size_t with_files = 0;
    std::string errors;
    for (const PciDevice* d : path) {
        auto cor = aer_total_read(d->aer_correctable);
        auto fatal = aer_total_read(d->aer_fatal), nonfatal = aer_total_read(d->aer_nonfatal);
        if (!cor && !fatal && !nonfatal && d->aer_rootport.empty()) continue;
        ++with_files;
        auto show = [&](std::optional<uint64_t> first, const std::map<std::string, uint64_t>* later, std::string_view kind) {
            if (!first) return;
            auto then = later ? aer_total_read(*later) : std::nullopt;
            if (!*first && (!then || !*then)) return;
            errors += fmt::format("{}{} {}{} {}", errors.empty() ? "" : "; ", port_name(*d), *first,
                                  then && *then != *first ? fmt::format(" -> {}", *then) : std::string(), kind);
        };
        const AerCounters* later = d->aer_later ? &*d->aer_later : nullptr;
        show(fatal, later ? &later->fatal : nullptr, "fatal");
        show(nonfatal, later ? &later->nonfatal : nullptr, "non-fatal");
        show(cor, later ? &later->correctable : nullptr, "correctable");
        for (auto& [name, n] : d->aer_rootport) {
            std::optional<uint64_t> then;
            if (later)
                if (auto it = later->rootport.find(name); it != later->rootport.end()) then = it->second;
            if (n || (then && *then))
                errors += fmt::format("{}{} {}{} below it ({})", errors.empty() ? "" : "; ", port_name(*d), n,
                                      then && *then != n ? fmt::format(" -> {}", *then) : std::string(), name);
        }
    }
    size_t ports = path.size() - 1;
    std::string what = ports ? fmt::format("GPU and {} port{} to the root port", ports, ports == 1 ? "" : "s") : "GPU";
    if (!with_files) return fmt::format("AER: not offered ({}: no aer_dev_* files)", what);
    std::string missing = with_files < path.size() ? fmt::format(", {} without AER files", path.size() - with_files) : "";
    return fmt::format("AER ({}{}): {}", what, missing, errors.empty() ? "no errors" : strip_control(errors));
}

// The nonzero link error counters of a port, "symbol_error 12, link_downed 1 -> 2".
std::string port_errors(const IbPort& p) {
    std::string out;
    for (auto& [name, n] : p.counters) {
        if (!is_ib_link_error_counter(name)) continue;
        auto it = p.counters_later.find(name);
        bool grew = it != p.counters_later.end() && it->second != n;
        if (!n && !grew) continue;
        out += fmt::format("{}{} {}{}", out.empty() ? "" : ", ", name, n, grew ? fmt::format(" -> {}", it->second) : "");
    }
    return out;
}

std::string port_summary(const IbDevice& d, const IbPort& p) {
    std::string errors = port_errors(p);
    return fmt::format("{} port {} {}/{} {}{}, {}", d.name, p.port, p.state.empty() ? "?" : p.state,
                       p.phys_state.empty() ? "?" : p.phys_state, p.rate_gbps ? fmt::format("{:g} Gb/s", *p.rate_gbps) : "rate ?",
                       p.netdev.empty() ? "" : " " + p.netdev,
                       !errors.empty()                ? "link errors " + errors
                       : !p.counters_unread.empty() ? std::string("link errors not read")
                                                      : std::string("no link errors"));
}

// The adapters nearest to the GPU (those at the nearest PCIe place any adapter has), their ports in a few words.
std::string nearest_adapters(const Snapshot& s, std::string_view gpu) {
    std::vector<std::pair<PciePlace, const IbDevice*>> placed;
    for (auto& d : s.infiniband.devices)
        if (!d.pci.empty()) placed.emplace_back(pcie_place(s.pcie, d.pci, gpu), &d);
    if (placed.empty()) return {};
    auto nearest = std::min_element(placed.begin(), placed.end(), [](auto& a, auto& b) { return a.first < b.first; })->first;
    std::string out;
    for (auto& [place, d] : placed) {
        if (place != nearest) continue;
        for (auto& p : d->ports) out += (out.empty() ? "" : "; ") + port_summary(*d, p);
    }
    return fmt::format("nearest adapter ({}): {}", describe(nearest), strip_control(out));
}

// One line for the node's InfiniBand/RoCE ports: how many are active, which are down, which count link errors.
std::string infiniband_line(const Snapshot& s) {
    auto* st = s.collector(Collector::infiniband);
    if (!st) return {};  // an older snapshot: not read
    if (st->state != CollectorState::ok) return fmt::format("InfiniBand/RoCE: {}", strip_control(st->message));
    unsigned ports = 0, active = 0;
    std::string down, errors, unread;
    for (auto& d : s.infiniband.devices)
        for (auto& p : d.ports) {
            ++ports;
            std::string name = fmt::format("{} port {}", d.name, p.port);
            if (p.state == "ACTIVE") ++active;
            else down += (down.empty() ? "" : ", ") + name + " " + (p.state.empty() ? "?" : p.state);
            if (auto e = port_errors(p); !e.empty()) errors += (errors.empty() ? "" : "; ") + name + " " + e;
            if (!p.counters_unread.empty()) unread += (unread.empty() ? "" : ", ") + name;
        }
    std::string out = fmt::format("InfiniBand/RoCE: {} adapter{}, {} port{}, {} active", s.infiniband.devices.size(),
                                  s.infiniband.devices.size() == 1 ? "" : "s", ports, ports == 1 ? "" : "s", active);
    if (!down.empty()) out += "; not active: " + down;
    out += errors.empty() ? "; no link errors" : "; link errors: " + errors;
    if (!unread.empty()) out += "; counters not read: " + unread;
    return strip_control(out);
}

}  // namespace

std::string render_health_text(const Snapshot& s) {
    if (s.pcie.gpus.empty() && s.infiniband.devices.empty()) return {};
    std::string out = "GPU health (NVML; PCIe AER of the GPU and the ports above it; nearest InfiniBand/RoCE):\n";
    auto* nvml = s.collector(Collector::nvml);
    for (auto& gpu : s.pcie.gpus) {
        std::string first;
        if (auto* d = find_nvml(s, gpu)) first = nvml_line(*d);
        else if (nvml && nvml->state != CollectorState::ok) first = "NVML not read: " + nvml->message;
        else first = nvml ? "not among NVML's devices" : "NVML not read";
        out += fmt::format("  {} {}: {}\n", gpu, uuid_of(s, gpu), strip_control(first));
        std::string second = aer_line(s.pcie, gpu);
        if (auto nics = nearest_adapters(s, gpu); !nics.empty()) second += "; " + nics;
        out += fmt::format("      {}\n", second);
    }
    if (auto ib = infiniband_line(s); !ib.empty()) out += "  " + ib + "\n";
    return out;
}

}  // namespace gpudx
