// The services the NVSwitch fabric needs (docs/host-health.md): on a node with NVSwitches, the GPUs join the NVLink
// fabric only through nvidia-fabricmanager, and until they do cuInit answers 802 (CUDA_ERROR_SYSTEM_NOT_READY,
// "system not yet initialized"). A node without NVSwitches is never asked and never warned.
#include <fmt/format.h>

#include "rules/engine/families.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"services.fabric_manager_not_active", Layer::driver, Severity::error, {C::services, C::pcie, C::devices},
     "NVSwitches are present but nvidia-fabricmanager is not active (failed, stopped or not installed): CUDA "
     "answers 802 'system not yet initialized'"},
    {"services.fabric_manager_unknown", Layer::driver, Severity::warning, {C::services, C::pcie, C::devices},
     "NVSwitches are present but systemd's view of nvidia-fabricmanager could not be read"},
    {"services.imex_not_active", Layer::driver, Severity::warning, {C::services, C::pcie, C::devices},
     "nvidia-imex is enabled on an NVSwitch node but not active: multi-node NVLink memory sharing is unavailable"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

const SystemdUnit* find_unit(const ServicesLayer& l, std::string_view name) {
    for (auto& u : l.units)
        if (u.name == name) return &u;
    return nullptr;
}

// "failed (Result=exit-code, ExecMainStatus=1, since Tue 2026-06-30 10:01:02 UTC)".
std::string describe_state(const SystemdUnit& u) {
    std::string out(u.property("ActiveState"));
    std::string detail;
    auto add = [&](std::string_view key) {
        auto v = u.property(key);
        if (!v.empty()) detail += fmt::format("{}{}={}", detail.empty() ? "" : ", ", key, v);
    };
    add("SubState");
    add("Result");
    if (u.property("ExecMainStatus") != "0") add("ExecMainStatus");
    if (auto since = u.property("InactiveEnterTimestamp"); !since.empty() && u.property("ActiveState") != "active")
        detail += fmt::format("{}since {}", detail.empty() ? "" : ", ", since);
    return detail.empty() ? out : fmt::format("{} ({})", out, detail);
}

std::vector<Evidence> unit_evidence(const ServicesLayer& l, const SystemdUnit& u) {
    std::vector<Evidence> ev;
    for (auto key : {"LoadState", "UnitFileState", "ActiveState", "SubState", "Result", "ExecMainStatus"})
        if (auto v = u.property(key); !v.empty())
            ev.push_back({fmt::format("{} {}", l.source, u.name), fmt::format("{}={}", key, v)});
    return ev;
}

std::vector<GpuRef> nvswitches(const Snapshot& s) {
    std::vector<GpuRef> out;
    for (auto& addr : s.pcie.nvswitches) out.push_back({{}, addr, SubjectKind::nvswitch});
    return out;
}

void check_services(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    const CollectorStatus* st = s.collector(Collector::services);
    // An older snapshot (no services collector) says nothing either way; a node without NVSwitches is not asked.
    if (!st || !has_nvswitch(s.pcie, s.devices)) return;
    std::string switches = s.pcie.nvswitches.empty() ? std::string("/dev/nvidia-nvswitch* present")
                                                      : fmt::format("{} NVSwitch(es) on PCIe", s.pcie.nvswitches.size());
    const SystemdUnit* fm = st->state == CollectorState::ok ? find_unit(s.services, kFabricManagerUnit) : nullptr;
    if (!fm) {
        out.push_back(rule("services.fabric_manager_unknown")
                          .finding(fmt::format("{}, but the state of {} could not be read: {}", switches,
                                               kFabricManagerUnit,
                                               st->state == CollectorState::ok ? "systemctl did not list it"
                                                                               : st->message),
                                   {nvswitches(s),
                                    {{st->path.empty() ? std::string("systemctl show") : st->path,
                                      fmt::format("{}: {}", to_string(st->state), st->message)}},
                                    "Run `systemctl status nvidia-fabricmanager` on the node; in a container, ask the "
                                    "host. Without the fabric manager the GPUs never join the NVLink fabric."}));
        return;
    }
    if (fm->property("ActiveState") != "active") {
        bool missing = fm->property("LoadState") == "not-found";
        Finding f = rule("services.fabric_manager_not_active")
                        .finding(missing ? fmt::format("{}, but {} is not installed: CUDA will answer 802 (system not "
                                                       "yet initialized) until the fabric manager runs",
                                                       switches, kFabricManagerUnit)
                                         : fmt::format("{}, but {} is {}: CUDA will answer 802 (system not yet "
                                                       "initialized) until it runs",
                                                       switches, kFabricManagerUnit, describe_state(*fm)),
                                 {nvswitches(s), unit_evidence(s.services, *fm), {}});
        f.next_step = missing ? "Install the nvidia-fabricmanager package of exactly the loaded driver's version "
                                "(`cat /sys/module/nvidia/version`), then `systemctl enable --now nvidia-fabricmanager`."
                              : "Read why it stopped (`journalctl -u nvidia-fabricmanager -b`, "
                                "/var/log/fabricmanager.log): most often its version differs from the driver's after "
                                "an upgrade, or it was started before the driver loaded. Fix that, then `systemctl "
                                "restart nvidia-fabricmanager` and check `nvidia-smi -q | grep -A2 Fabric`.";
        out.push_back(std::move(f));
    }
    // IMEX only where it is set up: an enabled unit that is not running.
    if (const SystemdUnit* imex = find_unit(s.services, kImexUnit);
        imex && imex->property("LoadState") == "loaded" && imex->property("UnitFileState") == "enabled" &&
        imex->property("ActiveState") != "active") {
        out.push_back(rule("services.imex_not_active")
                          .finding(fmt::format("{} is enabled but {}", kImexUnit, describe_state(*imex)),
                                   {nvswitches(s), unit_evidence(s.services, *imex),
                                    "Read `journalctl -u nvidia-imex -b` and /etc/nvidia-imex/nodes_config.cfg (every "
                                    "node of the NVLink domain must be listed and reachable), then `systemctl restart "
                                    "nvidia-imex`."}));
    }
}

}  // namespace

constinit const RuleFamily kServicesFamily{"services", Layer::driver, kRules, check_services};

}  // namespace gpudx
