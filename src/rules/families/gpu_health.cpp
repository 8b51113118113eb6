// health.*: the GPU's own health as NVML reports it (docs/gpu-health.md): NVLink links and their error counters,
// clock event reasons, temperature and power against the GPU's own limits, PCIe replays, the spare rows left for
// remapping. What changes from one second to the next is judged across the probe's two samples: a condition seen
// in only one of two is a spike, a counter that did not grow is history, not news.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "rules/comparisons/matrix.hpp"
#include "rules/engine/families.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"health.nvlink_down", Layer::driver, Severity::warning, {C::nvml},
     "a GPU has some NVLinks active and others inactive (a link of an NVLink-connected GPU is down); a GPU with no "
     "active link at all (a PCIe card, a one-GPU VM) is not judged here; with --matrix, a GPU with fewer active than "
     "its class's nvlinks_active is matrix.nvlinks_below's"},
    {"health.nvlink_errors_growing", Layer::driver, Severity::warning, {C::nvml},
     "an NVLink error counter (replay, recovery, CRC, ECC; NVLink 5: failed recoveries, receive and integrity "
     "errors) grew between the probe's two samples"},
    {"health.nvlink_errors_seen", Layer::driver, Severity::info, {C::nvml},
     "an NVLink error counter is not zero but did not grow between two samples (history since the driver loaded)"},
    {"health.clock_hw_slowdown", Layer::driver, Severity::warning, {C::nvml},
     "the GPU's clocks are held down by the hardware (HW slowdown, HW thermal slowdown or HW power brake: a cooling, "
     "power-supply or facility fault); an error when both samples show it"},
    {"health.clock_sw_thermal", Layer::driver, Severity::warning, {C::nvml},
     "the driver slows the GPU to keep it under its maximum operating temperature (SW thermal slowdown), in every "
     "sample"},
    {"health.temperature_high", Layer::driver, Severity::warning, {C::nvml},
     "the GPU runs within 5 °C of its own slowdown threshold in every sample; an error at or over it"},
    {"health.power_over_limit", Layer::driver, Severity::warning, {C::nvml},
     "the GPU draws more than 5 % over its enforced power limit in every sample (capping or its sensor is not "
     "working)"},
    {"health.pcie_replays_growing", Layer::pcie, Severity::warning, {C::nvml},
     "the GPU's PCIe replay counter grew between the probe's two samples (the link retransmits: signal integrity)"},
    {"health.pcie_replays_seen", Layer::pcie, Severity::info, {C::nvml},
     "the GPU's PCIe replay counter is above 100 but did not grow between two samples (history since the driver "
     "loaded)"},
    {"health.row_remap_low", Layer::driver, Severity::warning, {C::nvml},
     "some DRAM banks of the GPU have few or no spare rows left (row remapper histogram low/none): the next "
     "uncorrectable error there may not be repairable"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

// One NVLink error counter: its member and the name evidence gives it.
struct CounterName {
    std::optional<unsigned long long> NvlinkErrorCounters::*member;
    std::string_view name;
};
constexpr std::array kCounters{
    CounterName{&NvlinkErrorCounters::replay, "replay"},
    CounterName{&NvlinkErrorCounters::recovery, "recovery"},
    CounterName{&NvlinkErrorCounters::crc_flit, "CRC flit"},
    CounterName{&NvlinkErrorCounters::crc_data, "CRC data"},
    CounterName{&NvlinkErrorCounters::ecc_data, "ECC data"},
    CounterName{&NvlinkErrorCounters::recovery_failed, "failed recoveries"},
    CounterName{&NvlinkErrorCounters::recovery_events, "recoveries"},
    CounterName{&NvlinkErrorCounters::receive_errors, "receive errors"},
    CounterName{&NvlinkErrorCounters::link_integrity, "link integrity errors"},
};

const NvlinkErrorCounters* link_counters(const GpuHealthSample& s, unsigned link) {
    for (auto& c : s.nvlink_errors)
        if (c.link == link) return &c;
    return nullptr;
}

// "in both samples 1000 ms apart", "in the one sample taken (...)".
std::string sampled(const GpuHealth& h) {
    if (h.samples.size() >= 2) return fmt::format("in both samples {} ms apart", h.samples.back().after_ms);
    if (!h.second_sample_skipped.empty()) return "in the one sample taken (" + h.second_sample_skipped + ")";
    return "in the one sample taken";
}

class DeviceHealth {
public:
    DeviceHealth(const CheckContext& ctx, const NvmlDevice& d, std::vector<Finding>& out)
        : d_(d), h_(d.health), g_(ctx.gpu(d.pci)), node_class_(ctx.options.node_class), out_(out) {}

    void check() {
        check_links();
        if (!h_.samples.empty()) {
            check_link_counters();
            check_clocks();
            check_temperature();
            check_power();
            check_pcie_replays();
        }
        check_row_remapper();
    }

private:
    Finding& add(const Rule& r, std::string message, Evidence ev, std::string next) {
        out_.push_back(r.finding(std::move(message), {subjects_of(g_), {std::move(ev)}, std::move(next)}));
        return out_.back();
    }
    std::string call(std::string_view name) const { return fmt::format("{}({})", name, d_.index); }

    // Whether `holds` is true of every sample taken.
    template <class Pred>
    bool in_every_sample(Pred holds) const {
        return !h_.samples.empty() && std::all_of(h_.samples.begin(), h_.samples.end(), holds);
    }

    void check_links() {
        std::vector<unsigned> down, up;
        for (auto& l : d_.nvlinks) (l.active ? up : down).push_back(l.link);
        // No link active at all: a GPU without NVLink peers (a PCIe card, a VM given one GPU) is healthy here;
        // a node class that expects links says so through the matrix (matrix.nvlinks_below).
        if (up.empty() || down.empty()) return;
        // Fewer active than the node's class expects: matrix.nvlinks_below names these links already.
        const size_t listed = d_.nvlinks.size();
        const size_t not_read = h_.nvlink_count && *h_.nvlink_count > listed ? *h_.nvlink_count - listed : 0;
        if (node_class_ && nvlinks_below_class(*node_class_, up.size(), not_read)) return;
        add(rule("health.nvlink_down"),
            fmt::format("{}: NVLink {} of {} down while {} {} active", describe(g_), fmt::join(down, ", "),
                        d_.nvlinks.size(), up.size(), up.size() == 1 ? "is" : "are"),
            {call("nvmlDeviceGetFieldValues") + " NVML_FI_DEV_NVLINK_GET_STATE",
             fmt::format("inactive: {}; active: {}", fmt::join(down, ","), fmt::join(up, ","))},
            "Check `nvidia-smi nvlink -s -i <UUID>` and the kernel log for NVLink Xids (74, 144-150); reset the GPU "
            "(and on NVSwitch systems restart nvidia-fabricmanager). A link that stays down needs the baseboard "
            "serviced.");
    }

    void check_link_counters() {
        const auto& first = h_.samples.front();
        const auto& last = h_.samples.back();
        const bool two = h_.samples.size() >= 2;
        std::vector<std::string> grown, seen;
        for (auto& c : first.nvlink_errors) {
            const NvlinkErrorCounters* later = two ? link_counters(last, c.link) : nullptr;
            for (auto& counter : kCounters) {
                auto a = c.*(counter.member);
                if (!a) continue;
                auto b = later ? later->*(counter.member) : std::nullopt;
                if (b && *b > *a)
                    grown.push_back(fmt::format("link {} {}: {} -> {} (+{})", c.link, counter.name, *a, *b, *b - *a));
                else if (*a > 0)
                    seen.push_back(fmt::format("link {} {}: {}", c.link, counter.name, b.value_or(*a)));
            }
        }
        if (!grown.empty())
            add(rule("health.nvlink_errors_growing"),
                fmt::format("{}: NVLink error counters grew within {} ms: {}", describe(g_), last.after_ms,
                            fmt::join(grown, "; ")),
                {call("nvmlDeviceGetFieldValues") + " NVLink error counters", fmt::format("{}", fmt::join(grown, "; "))},
                "Watch `nvidia-smi nvlink -e -i <UUID>`; errors that keep growing on one link mean a bad link or "
                "connector: drain the node, reset the GPU, and have the link serviced if they return.");
        if (!seen.empty())
            add(rule("health.nvlink_errors_seen"),
                fmt::format("{}: NVLink error counters are not zero (since the driver loaded){}: {}", describe(g_),
                            two ? ", and did not grow" : "", fmt::join(seen, "; ")),
                {call("nvmlDeviceGetFieldValues") + " NVLink error counters", fmt::format("{}", fmt::join(seen, "; "))},
                "History, not news: compare with the next diagnosis; counters that grow become a warning.");
    }

    void check_clocks() {
        auto hardware = [](const GpuHealthSample& s) {
            return s.clock_event_reasons && (*s.clock_event_reasons & kClockReasonsHardware);
        };
        if (in_every_sample(hardware)) {
            auto bits = *h_.samples.back().clock_event_reasons & kClockReasonsHardware;
            auto& f = add(rule("health.clock_hw_slowdown"),
                          fmt::format("{}: clocks held down by the hardware ({}) {}", describe(g_),
                                      clock_event_reason_names(bits), sampled(h_)),
                          {call("nvmlDeviceGetCurrentClocksEventReasons"),
                           fmt::format("0x{:x} ({})", *h_.samples.back().clock_event_reasons,
                                       clock_event_reason_names(*h_.samples.back().clock_event_reasons))},
                          bits & kClockReasonHwPowerBrake
                              ? "HW power brake is asserted from outside the GPU (the power supply or the facility): "
                                "check the PSUs and the BMC's power events; drain the node until it clears."
                              : "Check cooling (fans, airflow, inlet temperature) and the BMC's sensor log; drain the "
                                "node if it persists.");
            if (h_.samples.size() >= 2) f.severity = Severity::error;
        }
        auto sw_thermal = [](const GpuHealthSample& s) {
            return s.clock_event_reasons && (*s.clock_event_reasons & kClockReasonSwThermalSlowdown);
        };
        if (in_every_sample(sw_thermal))
            add(rule("health.clock_sw_thermal"),
                fmt::format("{}: the driver slows the GPU to keep it under its maximum operating temperature {}",
                            describe(g_), sampled(h_)),
                {call("nvmlDeviceGetCurrentClocksEventReasons"),
                 clock_event_reason_names(*h_.samples.back().clock_event_reasons)},
                "Check cooling (airflow, inlet temperature, fan policy): the GPU runs slower than it could.");
    }

    void check_temperature() {
        if (!h_.temperature_slowdown_c) return;
        const unsigned slowdown = *h_.temperature_slowdown_c;
        auto near = [&](const GpuHealthSample& s) { return temperature_near_slowdown(s, slowdown); };
        if (!in_every_sample(near)) return;
        unsigned hottest = 0;
        for (auto& s : h_.samples) hottest = std::max(hottest, *s.temperature_c);
        bool over = std::all_of(h_.samples.begin(), h_.samples.end(),
                                [&](auto& s) { return *s.temperature_c >= slowdown; });
        auto& f = add(rule("health.temperature_high"),
                      fmt::format("{}: {} °C, {} its slowdown threshold of {} °C, {}", describe(g_), hottest,
                                  over ? "at or over" : fmt::format("within {} °C of", kTemperatureMarginC), slowdown,
                                  sampled(h_)),
                      {call("nvmlDeviceGetTemperature"),
                       fmt::format("{} °C (slowdown {} °C{})", hottest, slowdown,
                                   h_.temperature_shutdown_c ? fmt::format(", shutdown {} °C", *h_.temperature_shutdown_c)
                                                             : std::string())},
                      "Check cooling (fans, airflow, inlet temperature, blocked heat sinks) before the GPU slows "
                      "down or shuts off.");
        if (over) f.severity = Severity::error;
    }

    void check_power() {
        auto over = [&](const GpuHealthSample& s) { return power_over_limit(s, h_.power_limit_mw); };
        if (!in_every_sample(over)) return;
        add(rule("health.power_over_limit"),
            fmt::format("{}: draws {:.1f} W over its enforced limit of {:.1f} W {}", describe(g_),
                        *h_.samples.back().power_mw / 1000.0, *h_.power_limit_mw / 1000.0, sampled(h_)),
            {call("nvmlDeviceGetPowerUsage"),
             fmt::format("{} mW (enforced limit {} mW)", *h_.samples.back().power_mw, *h_.power_limit_mw)},
            "Compare with `nvidia-smi -q -d POWER`; a GPU that does not hold its limit has a power sensor or "
            "capping fault: report it to the vendor.");
    }

    void check_pcie_replays() {
        const auto& first = h_.samples.front();
        const auto& last = h_.samples.back();
        if (!first.pcie_replays) return;
        if (h_.samples.size() >= 2 && last.pcie_replays && *last.pcie_replays > *first.pcie_replays) {
            add(rule("health.pcie_replays_growing"),
                fmt::format("{}: the PCIe link replayed {} more time(s) within {} ms ({} -> {})", describe(g_),
                            *last.pcie_replays - *first.pcie_replays, last.after_ms, *first.pcie_replays,
                            *last.pcie_replays),
                {call("nvmlDeviceGetPcieReplayCounter"), fmt::format("{} -> {}", *first.pcie_replays, *last.pcie_replays)},
                "The link retransmits: reseat the card or riser, check the slot's AER counters and the link speed "
                "(`lspci -vv`); drain the node if it keeps growing.");
        } else if (*first.pcie_replays > kPcieReplaysNoticeable) {
            add(rule("health.pcie_replays_seen"),
                fmt::format("{}: {} PCIe replays since the driver loaded{}", describe(g_), *first.pcie_replays,
                            h_.samples.size() >= 2 ? ", none within the sampling interval" : ""),
                {call("nvmlDeviceGetPcieReplayCounter"), std::to_string(*first.pcie_replays)},
                "History, not news: compare with the next diagnosis.");
        }
    }

    void check_row_remapper() {
        if (!h_.row_remap_histogram) return;
        // The driver family reports a failed remap (no spare row when one was needed): this is the warning before.
        if (d_.remapped_rows_failure.value_or(false)) return;
        const auto& r = *h_.row_remap_histogram;
        if (r.low + r.none == 0) return;
        add(rule("health.row_remap_low"),
            fmt::format("{}: {} DRAM bank(s) with few spare rows left and {} with none", describe(g_), r.low, r.none),
            {call("nvmlDeviceGetRowRemapperHistogram"),
             fmt::format("max {}, high {}, partial {}, low {}, none {}", r.max, r.high, r.partial, r.low, r.none)},
            "Plan to replace the GPU: the next uncorrectable error in such a bank may not be repairable. Watch "
            "`nvidia-smi -q -d ROW_REMAPPER`.");
    }

    const NvmlDevice& d_;
    const GpuHealth& h_;
    GpuRef g_;
    const NodeClass* node_class_;
    std::vector<Finding>& out_;
};

void check_gpu_health(const CheckContext& ctx, std::vector<Finding>& out) {
    for (auto& d : ctx.snapshot.nvml.devices) {
        if (d.pci.empty()) continue;  // no answer from the GPU: the driver family reports it
        DeviceHealth(ctx, d, out).check();
    }
}

}  // namespace

constinit const RuleFamily kGpuHealthFamily{"health", Layer::driver, kRules, check_gpu_health};

}  // namespace gpudx
