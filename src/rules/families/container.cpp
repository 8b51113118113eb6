// The container boundary: which runtime, and whether the GPUs it was given are the GPUs it has.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "rules/engine/families.hpp"
#include "identity/visible_devices.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"container.detected", Layer::container, Severity::info, {C::environment},
     "gpudx runs inside a container: device nodes and libraries are what the runtime injected"},
    {"container.visible_all", Layer::container, Severity::warning, {C::environment},
     "NVIDIA_VISIBLE_DEVICES=all inside a Slurm job or Kubernetes pod bypasses the allocation"},
    {"container.device_not_injected", Layer::container, Severity::error, {C::environment, C::devices, C::module},
     "a GPU given in NVIDIA_VISIBLE_DEVICES has no device node inside the container"},
    {"container.devices_beyond_allocation", Layer::container, Severity::warning,
     {C::environment, C::devices, C::module},
     "the container has device nodes for GPUs it was not given in NVIDIA_VISIBLE_DEVICES"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

std::optional<std::string> var(const Snapshot& s, const std::string& name) {
    auto it = s.environment.variables.find(name);
    if (it == s.environment.variables.end()) return std::nullopt;
    return it->second;
}

bool node_present(const DevicesLayer& d, const std::string& path) {
    return std::any_of(d.nodes.begin(), d.nodes.end(), [&](auto& n) { return n.path == path && n.type != "missing"; });
}

void detected(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& c = ctx.snapshot.environment.container;
    if (!c.in_container) return;
    Finding f = rule("container.detected").finding({});
    f.message = fmt::format("running inside a container ({}{}): device nodes and libraries are what the runtime "
                            "injected, not necessarily the host's",
                            c.runtime.empty() ? "runtime unknown" : c.runtime,
                            c.container_id.empty() ? "" : ", id " + c.container_id.substr(0, 12));
    for (auto& e : c.evidence) f.evidence.push_back({"container detection", e});
    f.next_step = "None; compare with a run on the host when a finding differs between the two.";
    out.push_back(std::move(f));
}

void visible_all_in_job(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    auto value = var(s, "NVIDIA_VISIBLE_DEVICES");
    if (!value || parse_visible_devices(value).kind != VisibleDevicesKind::all) return;
    auto job = var(s, "SLURM_JOB_ID");
    bool k8s = var(s, "KUBERNETES_SERVICE_HOST").has_value() || s.environment.container.runtime == "kubernetes";
    if (!job && !k8s) return;
    Finding f = rule("container.visible_all").finding({});
    f.message = fmt::format("NVIDIA_VISIBLE_DEVICES=all inside {}: the container toolkit injects every GPU of the node, "
                            "bypassing the scheduler's allocation",
                            job ? "Slurm job " + *job : std::string("a Kubernetes pod"));
    f.evidence.push_back({"environment NVIDIA_VISIBLE_DEVICES", *value});
    if (job) f.evidence.push_back({"environment SLURM_JOB_ID", *job});
    f.next_step = k8s ? "Remove NVIDIA_VISIBLE_DEVICES from the pod spec/image and request nvidia.com/gpu; set "
                        "accept-nvidia-visible-devices-envvar-when-unprivileged=false in the toolkit's config.toml."
                      : "Let the job's allocation set the devices (e.g. --gpus / NVIDIA_VISIBLE_DEVICES from "
                        "SLURM_JOB_GPUS) instead of `all`.";
    out.push_back(std::move(f));
}

// What NVIDIA_VISIBLE_DEVICES asked for against the /dev/nvidiaN nodes the container really has.
void injected_devices(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    if (!s.environment.container.in_container) return;
    auto value = var(s, "NVIDIA_VISIBLE_DEVICES");
    if (!value) return;
    auto parsed = parse_visible_devices(value);
    if (parsed.kind != VisibleDevicesKind::list) return;
    auto gpus = node_gpus(s);
    if (gpus.empty()) return;
    std::set<size_t> given;
    for (auto& m : match_visible_devices(parsed, gpus))
        if (m.gpus.size() == 1) given.insert(m.gpus[0]);
    std::vector<GpuRef> absent, extra;
    for (size_t i = 0; i < gpus.size(); ++i) {
        if (!gpus[i].minor) continue;
        bool present = node_present(s.devices, fmt::format("/dev/nvidia{}", *gpus[i].minor));
        if (given.count(i) && !present) absent.push_back(ctx.gpu(gpus[i].pci));
        if (!given.count(i) && present) extra.push_back(ctx.gpu(gpus[i].pci));
    }
    if (!absent.empty()) {
        Finding f = rule("container.device_not_injected").finding({});
        f.subjects = absent;
        f.message = fmt::format("the container was given {} GPU(s) in NVIDIA_VISIBLE_DEVICES that have no device node "
                                "inside it: the runtime hook did not inject them",
                                absent.size());
        f.evidence.push_back({"environment NVIDIA_VISIBLE_DEVICES", *value});
        f.evidence.push_back({"/dev", "no /dev/nvidiaN for those GPUs"});
        f.next_step = "Start the container with the NVIDIA runtime (--runtime=nvidia or --gpus / CDI); check "
                      "`nvidia-container-cli info` on the host.";
        out.push_back(std::move(f));
    }
    if (!extra.empty()) {
        Finding f = rule("container.devices_beyond_allocation").finding({});
        f.subjects = extra;
        f.message = fmt::format("the container has device nodes for {} GPU(s) it was not given in "
                                "NVIDIA_VISIBLE_DEVICES (privileged container or a --device mount)",
                                extra.size());
        f.evidence.push_back({"environment NVIDIA_VISIBLE_DEVICES", *value});
        f.next_step = "Run the container unprivileged without --device /dev/nvidia*; let the runtime inject only the "
                      "allocated GPUs.";
        out.push_back(std::move(f));
    }
}

}  // namespace

void check_container(const CheckContext& ctx, std::vector<Finding>& out) {
    auto* st = ctx.snapshot.collector(Collector::environment);
    if (!st || st->state != CollectorState::ok) return;
    detected(ctx, out);
    visible_all_in_job(ctx, out);
    injected_devices(ctx, out);
}

constinit const RuleFamily kContainerFamily{"container", Layer::container, kRules, check_container};

}  // namespace gpudx
