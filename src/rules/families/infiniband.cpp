// InfiniBand and RoCE ports beside the GPUs (docs/host-health.md): a port whose link is up but that carries no
// traffic, error counters that grow between two readings, counters that could not be read, and, for the record,
// ports down and old errors. What a node of its class should have (how many ports, ACTIVE, their rate) is judged
// against the class in the matrix: matrix.ib_port_missing, matrix.ib_port_not_active, matrix.ib_rate_lower
// (rules/comparisons/matrix.cpp).
#include <fmt/format.h>

#include "model/infiniband.hpp"
#include "rules/comparisons/matrix.hpp"
#include "rules/engine/families.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"ib.port_link_up_not_active", Layer::pcie, Severity::error, {C::infiniband},
     "an InfiniBand/RoCE port's physical link is up (LinkUp) but its logical state is not ACTIVE (DOWN, INIT, "
     "ARMED): it carries no traffic"},
    {"ib.link_downed_growing", Layer::pcie, Severity::error, {C::infiniband},
     "an InfiniBand/RoCE port's link_downed counter grew between two readings: the link is flapping"},
    {"ib.errors_growing", Layer::pcie, Severity::warning, {C::infiniband},
     "link error counters of an InfiniBand/RoCE port (symbol errors, link recoveries, receive errors, integrity "
     "errors, buffer overruns) grew between two readings"},
    {"ib.error_history", Layer::pcie, Severity::info, {C::infiniband},
     "link error counters of an InfiniBand/RoCE port are not zero; they did not grow between two readings, or no "
     "second reading was taken"},
    {"ib.counters_unreadable", Layer::pcie, Severity::warning, {C::infiniband},
     "an active InfiniBand/RoCE port lists error counters that could not be read (permission, I/O error, not a "
     "number): its link errors could not be evaluated"},
    {"ib.counters_not_read", Layer::pcie, Severity::info, {C::infiniband},
     "an InfiniBand/RoCE port offers no link error counters (no counters/ directory), or they could not be read on a "
     "port that carries no traffic: its link errors are not evaluated"},
    {"ib.port_down", Layer::pcie, Severity::info, {C::infiniband},
     "an InfiniBand/RoCE port is physically down (Polling, Disabled ...): not judged without the node's class "
     "(--matrix with [[class.expect.infiniband]]), which says whether it should be up"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

std::string port_path(const IbDevice& d, const IbPort& p, std::string_view attr) {
    return fmt::format("/sys/class/infiniband/{}/ports/{}/{}", d.name, p.port, attr);
}

// "mlx5_0 port 1 (InfiniBand, 0000:17:00.0)".
std::string describe_port(const IbDevice& d, const IbPort& p) {
    std::string what = p.link_layer.empty() ? std::string() : p.link_layer;
    if (!p.netdev.empty()) what += (what.empty() ? "" : ", ") + p.netdev;
    if (!d.pci.empty()) what += (what.empty() ? "" : ", ") + d.pci;
    return fmt::format("{} port {}{}", d.name, p.port, what.empty() ? "" : " (" + what + ")");
}

// The GPUs whose GPUDirect traffic this adapter most likely carries: those behind the same switch or root port.
std::vector<GpuRef> nearby_gpus(const CheckContext& ctx, const IbDevice& d) {
    std::vector<GpuRef> out;
    if (d.pci.empty() || !ctx.snapshot.collected(Collector::pcie)) return out;
    for (auto& g : gpus_by_distance(ctx.snapshot.pcie, d.pci))
        if (g.place == PciePlace::same_switch || g.place == PciePlace::same_root_port) out.push_back(ctx.gpu(g.gpu));
    return out;
}

bool link_up(const IbPort& p) { return p.phys_state_code ? *p.phys_state_code == 5 : p.phys_state == "LinkUp"; }
bool active(const IbPort& p) { return p.state_code ? *p.state_code == 4 : p.state == "ACTIVE"; }

void check_counters(const CheckContext& ctx, const IbDevice& d, const IbPort& p, const InfinibandLayer& l,
                    std::vector<Finding>& out) {
    std::string nonzero;
    for (auto& [name, n] : p.counters)
        if (n && is_ib_link_error_counter(name)) nonzero += fmt::format("{}{} {}", nonzero.empty() ? "" : ", ", name, n);
    if (nonzero.empty()) return;
    std::string interval = l.sample_interval_ms ? fmt::format("{:g} s", *l.sample_interval_ms / 1000) : "a moment";
    // A counter at the top of its width stops there (the PMA does not wrap): it can no longer show growth.
    std::string stuck;
    for (auto& [name, n] : p.counters)
        if (auto max = ib_counter_max(name); max && n >= *max && is_ib_link_error_counter(name))
            stuck += fmt::format("{}{}", stuck.empty() ? "" : ", ", name);
    if (!p.counters_later.empty()) {
        std::string grown;
        std::vector<Evidence> evidence;
        bool downed = false;
        for (auto& [name, before] : p.counters) {
            if (!is_ib_link_error_counter(name)) continue;
            auto it = p.counters_later.find(name);
            if (it == p.counters_later.end() || it->second <= before) continue;
            grown += fmt::format("{}{} {} -> {}", grown.empty() ? "" : ", ", name, before, it->second);
            evidence.push_back({port_path(d, p, "counters/" + name), fmt::format("{} -> {}", before, it->second)});
            downed = downed || name == "link_downed";
        }
        if (!grown.empty()) {
            const Rule& r = downed ? rule("ib.link_downed_growing") : rule("ib.errors_growing");
            out.push_back(r.finding(
                fmt::format("{} is logging link errors now: within {} {}", describe_port(d, p), interval, grown),
                {nearby_gpus(ctx, d), std::move(evidence),
                 downed ? "The link went down and came back while gpudx watched: jobs using this port lose their "
                          "connections. Check the cable and transceiver (`ibdiagnet`, or `mlxlink -d <pci>` for the "
                          "eye and BER), then the switch port; drain the node until it holds."
                        : "A link that keeps logging symbol or receive errors has a marginal cable, transceiver or "
                          "switch port: read the link's bit error rate (`mlxlink -d <pci> -c` or `ibdiagnet`), reseat "
                          "or replace the cable, and watch the counters again."}));
            return;
        }
    }
    out.push_back(rule("ib.error_history")
                      .finding(fmt::format("{} counted link errors since its counters were last cleared ({}){}{}",
                                           describe_port(d, p), nonzero,
                                           !p.counters_later.empty() ? fmt::format(", none within {}", interval)
                                                            : std::string(", not read twice: growth unknown"),
                                           stuck.empty() ? std::string()
                                                         : fmt::format("; {} at the counter's maximum, where it stops: "
                                                                       "growth cannot be seen until the counters are "
                                                                       "cleared",
                                                                       stuck)),
                               {nearby_gpus(ctx, d),
                                {{port_path(d, p, "counters"), nonzero}},
                                "Nothing to do now if they do not grow; `gpudx diagnose` on the node reads them "
                                "twice and says when they do."}));
}

// A port whose counters could not be read is not a port without errors: say that it was not evaluated, and warn
// where it matters (the port carries traffic and its driver lists counters it then fails to answer).
void check_counters_read(const CheckContext& ctx, const IbDevice& d, const IbPort& p, std::vector<Finding>& out) {
    if (p.counters_unread.empty()) return;
    bool warn = p.counters_unreadable() && active(p);
    const Rule& r = warn ? rule("ib.counters_unreadable") : rule("ib.counters_not_read");
    out.push_back(r.finding(
        fmt::format("{}: link errors could not be evaluated: {}", describe_port(d, p), p.counters_unread),
        {nearby_gpus(ctx, d),
         {{port_path(d, p, "counters"), p.counters_unread}},
         warn ? "Read the counters by hand (`cat " + port_path(d, p, "counters") + "/symbol_error`, `perfquery`): an "
                    "I/O error from the adapter's own performance agent points at its firmware (`mlxfwmanager`, the "
                    "kernel log for mlx5 command timeouts); a permission error at a restricted sysfs (run gpudx on "
                    "the host, not in a container)."
              : "Nothing to do if this port is not meant to carry GPU traffic (a software or management device); "
                "otherwise watch its link with the vendor's tools (`perfquery`, `ethtool -S` of its netdev)."}));
}

void check_port_state(const CheckContext& ctx, const IbDevice& d, const IbPort& p, std::vector<Finding>& out) {
    if (link_up(p) && !p.state.empty() && !active(p)) {
        out.push_back(
            rule("ib.port_link_up_not_active")
                .finding(fmt::format("{} has its link up ({}) but is {}: it carries no traffic", describe_port(d, p),
                                     p.phys_state, p.state),
                         {nearby_gpus(ctx, d),
                          {{port_path(d, p, "phys_state"), p.phys_state}, {port_path(d, p, "state"), p.state}},
                          p.link_layer == "Ethernet"
                              ? "A RoCE port up on the wire but not active: check the interface (`ip link "
                                "show` of its netdev, `rdma link`) and that the RDMA core module is loaded."
                              : "INIT with the link up means no subnet manager has configured the port: check "
                                "that opensm (or the fabric's UFM) runs and sees this port (`ibstat`, "
                                "`sminfo`); ARMED that it was configured but not activated."}));
    } else if (!p.phys_state.empty() && !link_up(p) && !active(p)) {
        out.push_back(rule("ib.port_down")
                          .finding(fmt::format("{} is down ({}, {})", describe_port(d, p), p.phys_state,
                                               p.state.empty() ? "state unknown" : p.state),
                                   {nearby_gpus(ctx, d),
                                    {{port_path(d, p, "phys_state"), p.phys_state}},
                                    "If this port should carry traffic, check its cable, transceiver and the switch port "
                                    "(`ibstat`, `mlxlink -d <pci>`); "
                                    "say so in the node's class ([[class.expect.infiniband]] in the matrix, "
                                    "gpudx diagnose --matrix) so a port that goes down is an error."}));
    }
}

void check_infiniband(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.collected(Collector::infiniband)) return;
    const NodeClass* node_class = ctx.options.node_class;
    for (auto& d : s.infiniband.devices) {
        for (auto& p : d.ports) {
            // A port the node's class expects is judged against it (matrix.ib_port_not_active); its counters here.
            if (!node_class || !class_expects_ib_port(*node_class, d.name, p.link_layer))
                check_port_state(ctx, d, p, out);
            check_counters(ctx, d, p, s.infiniband, out);
            check_counters_read(ctx, d, p, out);
        }
    }
}

}  // namespace

constinit const RuleFamily kInfinibandFamily{"infiniband", Layer::pcie, kRules, check_infiniband};

}  // namespace gpudx
