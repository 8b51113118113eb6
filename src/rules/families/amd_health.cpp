// health.amd_* and health.xgmi_*: the AMD GPU's own health as ROCm SMI reports it (docs/amd.md, "Health"):
// temperatures against the GPU's own limits, the firmware's throttle reasons, XGMI links between the GPUs of a hive
// and their error status, corrected ECC counts. Like NVIDIA's health.* rules, what changes from one second to the
// next is judged across the probe's two samples; a fact the GPU or the library does not report is not judged, and
// health.amd_not_judged says which (info: `--verbose`). Uncorrectable ECC counts are driver.ecc_uncorrected's
// (rules/families/amd.cpp).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rules/engine/families.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"health.amd_temperature_high", Layer::driver, Severity::warning, {C::rocm_smi},
     "an AMD GPU's temperature sensor (edge, junction, memory) reads within 5 °C of the GPU's own critical limit in "
     "every sample; an error at or over it"},
    {"health.amd_throttle_thermal", Layer::driver, Severity::warning, {C::rocm_smi},
     "an AMD GPU's firmware throttles it for temperature or a hardware signal (TEMP_*, VRHOT, PROCHOT) in every "
     "sample; a power or current cap under load is normal and not reported"},
    {"health.xgmi_link_pcie", Layer::driver, Severity::warning, {C::rocm_smi, C::module},
     "two AMD GPUs of one XGMI hive reach each other only over PCIe (ROCm SMI's link type): an XGMI link is down"},
    {"health.xgmi_errors", Layer::driver, Severity::warning, {C::rocm_smi},
     "ROCm SMI's XGMI error status of an AMD GPU is not NO_ERRORS (one error or several since it was last cleared)"},
    {"health.amd_ecc_correctable_growing", Layer::driver, Severity::warning, {C::rocm_smi},
     "an AMD GPU's corrected ECC count grew between the probe's two samples (a RAS block is correcting errors now)"},
    {"health.amd_ecc_correctable_seen", Layer::driver, Severity::info, {C::rocm_smi},
     "an AMD GPU counted corrected ECC errors since the driver loaded, none within the sampling interval"},
    {"health.amd_not_judged", Layer::driver, Severity::info, {C::rocm_smi},
     "health facts ROCm SMI could not read on AMD GPUs (a sensor the GPU lacks, a throttle status its metrics do "
     "not carry): they are not judged, neither healthy nor faulty"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

// GPU models whose XGMI hive is all-to-all (every GPU one hop from every other: MI300 and MI350 series 8-GPU
// platforms). On others (MI250's GCDs, bridged MI210s) ROCm SMI reports PCIe between hive members that have no
// direct link, by design.
constexpr std::string_view kAllToAllHives[] = {"gfx942", "gfx950"};

std::string joined(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

std::string degrees(long long millidegrees) { return fmt::format("{:.1f} °C", millidegrees / 1000.0); }

// "in both samples 1000 ms apart", "in the one sample taken (...)".
std::string sampled(const RocmSmiHealth& h) {
    if (h.samples.size() >= 2) return fmt::format("in both samples {} ms apart", h.samples.back().after_ms);
    if (!h.second_sample_skipped.empty()) return "in the one sample taken (" + h.second_sample_skipped + ")";
    return "in the one sample taken";
}

class AmdDeviceHealth {
public:
    AmdDeviceHealth(const CheckContext& ctx, const RocmSmiDevice& d, std::vector<Finding>& out)
        : d_(d), h_(d.health), g_(ctx.gpu(d.pci)), out_(out) {}

    void check() {
        if (!h_.samples.empty()) {
            check_temperatures();
            check_throttle();
            check_ecc();
        }
        check_xgmi_status();
    }

private:
    Finding& add(const Rule& r, std::string message, Evidence ev, std::string next) {
        out_.push_back(r.finding(std::move(message), {subjects_of(g_), {std::move(ev)}, std::move(next)}));
        return out_.back();
    }
    std::string call(std::string_view name, std::string_view args = {}) const {
        return args.empty() ? fmt::format("{}({})", name, d_.index) : fmt::format("{}({}, {})", name, d_.index, args);
    }
    template <class Pred>
    bool in_every_sample(Pred holds) const {
        return !h_.samples.empty() && std::all_of(h_.samples.begin(), h_.samples.end(), holds);
    }

    void check_temperatures() {
        for (auto& l : h_.temperature_limits) {
            auto limit = rocm_temperature_limit(l);
            if (!limit) continue;  // no limit to judge against: health.amd_not_judged names it
            auto near = [&](const RocmSmiHealthSample& s) {
                auto t = rocm_temperature(s, l.sensor);
                return t && *t + kRocmTemperatureMarginMc >= *limit;
            };
            if (!in_every_sample(near)) continue;
            long long hottest = 0;
            for (auto& s : h_.samples) hottest = std::max(hottest, *rocm_temperature(s, l.sensor));
            bool over = std::all_of(h_.samples.begin(), h_.samples.end(),
                                    [&](auto& s) { return *rocm_temperature(s, l.sensor) >= *limit; });
            const char* limit_name = l.critical_mc ? "critical" : "emergency";
            std::string limits = fmt::format("critical {}, emergency {}", l.critical_mc ? degrees(*l.critical_mc) : "-",
                                             l.emergency_mc ? degrees(*l.emergency_mc) : "-");
            auto& f = add(rule("health.amd_temperature_high"),
                          fmt::format("{}: {} temperature {}, {} its {} limit of {}, {}", describe(g_),
                                      name_of(l.sensor), degrees(hottest),
                                      over ? "at or over" : fmt::format("within {} of", degrees(kRocmTemperatureMarginMc)),
                                      limit_name, degrees(*limit), sampled(h_)),
                          {call("rsmi_dev_temp_metric_get", fmt::format("{}, current", name_of(l.sensor))),
                           fmt::format("{} ({})", degrees(hottest), limits)},
                          "Check cooling (fans, airflow, inlet temperature, the OAM's heat sink and its mounting) with "
                          "`amd-smi metric -t` and the BMC's sensor log; past the critical limit the firmware "
                          "throttles hard, at the emergency limit the GPU shuts down.");
            if (over) f.severity = Severity::error;
        }
    }

    void check_throttle() {
        auto faults = [](const RocmSmiHealthSample& s) {
            std::vector<ThrottleReason> r;
            if (s.indep_throttle_status) r = rocm_throttle_reasons(*s.indep_throttle_status);
            std::erase_if(r, [](auto& x) { return !rocm_throttle_is_fault(x); });
            return r;
        };
        if (!in_every_sample([&](const RocmSmiHealthSample& s) { return !faults(s).empty(); })) return;
        const auto& last = h_.samples.back();
        auto reasons = faults(last);
        bool hardware = std::any_of(reasons.begin(), reasons.end(), [](auto& r) { return r.kind == ThrottleKind::hardware; });
        add(rule("health.amd_throttle_thermal"),
            fmt::format("{}: the firmware throttles the GPU ({}: {}) {}", describe(g_), rocm_throttle_names(reasons),
                        hardware ? "a voltage regulator or the platform asserts a thermal or power emergency"
                                 : "a temperature limit is reached",
                        sampled(h_)),
            {call("rsmi_dev_gpu_metrics_info_get") + " indep_throttle_status",
             fmt::format("0x{:x} ({})", *last.indep_throttle_status,
                         rocm_throttle_names(rocm_throttle_reasons(*last.indep_throttle_status)))},
            hardware ? "VRHOT/PROCHOT come from outside the GPU's own sensors (its voltage regulators, the baseboard "
                       "or the BMC): check the BMC's event log and power supplies; drain the node if it persists."
                     : "Check cooling (fans, airflow, inlet temperature) and `amd-smi metric -t`; the GPU runs slower "
                       "than it could. Drain the node if it persists.");
    }

    void check_ecc() {
        std::vector<std::string> growing, seen;
        const bool two = h_.samples.size() >= 2;
        for (auto& e : d_.ecc) {
            if (!e.correctable) continue;
            const RocmSmiEcc* later = nullptr;
            if (two)
                for (auto& x : h_.samples.back().ecc)
                    if (x.block == e.block) later = &x;
            if (later && later->correctable > e.correctable)
                growing.push_back(fmt::format("{} {} -> {}", e.block, e.correctable, later->correctable));
            else
                seen.push_back(fmt::format("{} {}", e.block, e.correctable));
        }
        if (!growing.empty())
            add(rule("health.amd_ecc_correctable_growing"),
                fmt::format("{}: corrected ECC errors counted within {} ms: {}", describe(g_),
                            h_.samples.back().after_ms, joined(growing)),
                {call("rsmi_dev_ecc_count_get"), joined(growing)},
                "The memory or block is correcting errors now: watch `amd-smi metric --ecc` and the RAS messages "
                "(`dmesg | grep -i ras`); errors that keep growing often precede uncorrectable ones: plan to drain "
                "the node and have the GPU checked.");
        if (!seen.empty())
            add(rule("health.amd_ecc_correctable_seen"),
                fmt::format("{}: corrected ECC errors since the driver loaded{}: {}", describe(g_),
                            two ? ", none within the sampling interval" : "", joined(seen)),
                {call("rsmi_dev_ecc_count_get"), joined(seen)},
                "History, not news: compare with the next diagnosis; a count that grows becomes a warning.");
    }

    void check_xgmi_status() {
        if (h_.xgmi_error_status == RocmXgmiStatus::not_read || h_.xgmi_error_status == RocmXgmiStatus::no_errors) return;
        bool several = h_.xgmi_error_status == RocmXgmiStatus::multiple_errors;
        add(rule("health.xgmi_errors"),
            fmt::format("{}: ROCm SMI reports {} on its XGMI links", describe(g_),
                        several ? "multiple XGMI errors" : "an XGMI error"),
            {call("rsmi_dev_xgmi_error_status"), several ? "RSMI_XGMI_STATUS_MULTIPLE_ERRORS" : "RSMI_XGMI_STATUS_ERROR"},
            "Read amdgpu's XGMI and RAS messages (`dmesg | grep -i -e xgmi -e ras`) and the XGMI_WAFL ECC counts "
            "(`amd-smi metric --ecc-blocks`); if errors recur after a reset, drain the node for hardware service.");
    }

    const RocmSmiDevice& d_;
    const RocmSmiHealth& h_;
    GpuRef g_;
    std::vector<Finding>& out_;
};

// health.xgmi_link_pcie: GPUs of one hive (ROCm SMI's hive id) whose link ROCm SMI reports as PCIe. On an all-to-all
// hive every such pair is a finding; on others only a GPU with no XGMI link to any of its hive peers.
void check_xgmi_links(const CheckContext& ctx, const std::vector<const RocmSmiDevice*>& gpus, std::vector<Finding>& out) {
    std::map<unsigned, const RocmSmiDevice*> by_index;
    for (auto* d : gpus) by_index[d->index] = d;
    auto gfx = [&](const RocmSmiDevice& d) {
        for (auto& g : ctx.snapshot.module.amd_gpus)
            if (g.pci == d.pci) return g.gfx_target;
        return std::string();
    };
    auto all_to_all = [&](const RocmSmiDevice& d) {
        auto t = gfx(d);
        return std::find(std::begin(kAllToAllHives), std::end(kAllToAllHives), t) != std::end(kAllToAllHives);
    };
    std::set<std::pair<unsigned, unsigned>> reported;
    for (auto* d : gpus) {
        if (d->xgmi_hive_id.empty()) continue;  // in no hive: module.xgmi_hive_split judges membership
        std::vector<const RocmSmiPeerLink*> pcie;
        unsigned xgmi = 0;
        for (auto& l : d->health.links) {
            auto peer = by_index.find(l.peer);
            if (peer == by_index.end() || peer->second->xgmi_hive_id != d->xgmi_hive_id) continue;
            if (l.type == RocmLinkType::xgmi) ++xgmi;
            if (l.type == RocmLinkType::pcie) pcie.push_back(&l);
        }
        if (pcie.empty()) continue;
        const bool judge_pairs = all_to_all(*d);
        if (!judge_pairs && xgmi > 0) continue;
        GpuRef ref = ctx.gpu(d->pci);
        for (auto* l : pcie) {
            auto key = std::minmax(d->index, l->peer);
            if (judge_pairs && !reported.insert(key).second) continue;
            auto f = rule("health.xgmi_link_pcie")
                         .finding(fmt::format("{} and {} are in the same XGMI hive but reach each other over PCIe{}: "
                                              "traffic between them runs at a fraction of XGMI's bandwidth",
                                              describe(ref), describe(ctx.gpu(l->peer_pci)),
                                              judge_pairs ? "" : " (and it has no XGMI link to any hive peer)"));
            f.subjects.push_back(ref);
            f.subjects.push_back(ctx.gpu(l->peer_pci));
            f.evidence.push_back({fmt::format("rsmi_topo_get_link_type({}, {})", d->index, l->peer),
                                  fmt::format("PCIE, {} hops", l->hops ? std::to_string(*l->hops) : "?")});
            f.evidence.push_back({fmt::format("rsmi_dev_xgmi_hive_id_get({}) / ({})", d->index, l->peer), d->xgmi_hive_id});
            f.next_step = "Compare `rocm-smi --showtopotype` and amdgpu's XGMI messages (`dmesg | grep -i xgmi`): a "
                          "link that did not train. Reset the GPUs or reboot; if it stays down, drain the node for "
                          "hardware service (the OAMs or the baseboard's XGMI links).";
            if (!judge_pairs) {
                out.push_back(std::move(f));
                break;  // one finding names the GPU cut off from its hive
            }
            out.push_back(std::move(f));
        }
    }
}

// One info finding for the node: what ROCm SMI could not read, so a reader of `--verbose` knows what was not judged.
void not_judged(const CheckContext& ctx, const std::vector<const RocmSmiDevice*>& gpus, std::vector<Finding>& out) {
    std::map<std::string, std::vector<const RocmSmiDevice*>> gaps;  // what -> the GPUs lacking it
    for (auto* d : gpus) {
        const auto& h = d->health;
        for (auto s : {RocmTemperatureSensor::edge, RocmTemperatureSensor::junction, RocmTemperatureSensor::memory}) {
            auto l = std::find_if(h.temperature_limits.begin(), h.temperature_limits.end(),
                                  [&](auto& x) { return x.sensor == s; });
            if (l == h.temperature_limits.end())
                gaps[fmt::format("{} temperature (no reading)", name_of(s))].push_back(d);
            else if (!rocm_temperature_limit(*l))
                gaps[fmt::format("{} temperature (no critical or emergency limit)", name_of(s))].push_back(d);
        }
        bool throttle = std::any_of(h.samples.begin(), h.samples.end(),
                                    [](auto& x) { return x.indep_throttle_status.has_value(); });
        if (!throttle) gaps["throttle reasons (no indep_throttle_status)"].push_back(d);
        if (h.xgmi_error_status == RocmXgmiStatus::not_read) gaps["XGMI error status"].push_back(d);
    }
    if (gaps.empty()) return;
    std::vector<std::string> parts;
    auto f = rule("health.amd_not_judged").finding("");
    std::set<std::string> named;
    for (auto& [what, ds] : gaps) {
        parts.push_back(fmt::format("{} on {} GPU(s)", what, ds.size()));
        std::vector<std::string> indices;
        for (auto* d : ds) {
            indices.push_back(std::to_string(d->index));
            if (named.insert(d->pci).second) f.subjects.push_back(ctx.gpu(d->pci));
        }
        f.evidence.push_back({what, "ROCm SMI devices " + joined(indices)});
    }
    f.message = "Not judged on AMD GPUs, as ROCm SMI does not report it: " + joined(parts);
    f.next_step = "Nothing to fix: these facts are not judged on this GPU model or library. The device's `unsupported` "
                  "list in the snapshot (`gpudx snapshot`) names each call answered Not Supported.";
    out.push_back(std::move(f));
}

void check_amd_health(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& r = ctx.snapshot.rocm_smi;
    if (!r.probed || !r.device_count) return;
    // Partitions of one GPU share its address and its sensors: the first device of an address stands for the GPU.
    std::vector<const RocmSmiDevice*> gpus;
    std::set<std::string> seen;
    for (auto& d : r.devices)
        if (!d.pci.empty() && seen.insert(d.pci).second) gpus.push_back(&d);
    for (auto* d : gpus) AmdDeviceHealth(ctx, *d, out).check();
    check_xgmi_links(ctx, gpus, out);
    not_judged(ctx, gpus, out);
}

}  // namespace

constinit const RuleFamily kAmdHealthFamily{"amd_health", Layer::driver, kRules, check_amd_health};

}  // namespace gpudx
