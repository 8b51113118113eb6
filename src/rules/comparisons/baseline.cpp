#include "rules/comparisons/baseline.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "rules/engine/families.hpp"
#include "rules/reference/xid_policy.hpp"

namespace gpudx {

namespace {

// Each difference is filed under the layer whose fact changed.
using C = Collector;
constexpr Rule kRules[] = {
    {"baseline.gpu_missing", Layer::pcie, Severity::error, {C::pcie, C::module, C::nvml, C::cuda},
     "a GPU in the node record is not on the node any more"},
    {"baseline.gpu_extra", Layer::pcie, Severity::warning, {C::pcie, C::module, C::nvml, C::cuda},
     "a GPU on the node is not in the node record"},
    {"baseline.gpu_moved", Layer::pcie, Severity::warning, {C::pcie, C::module, C::nvml, C::cuda},
     "a GPU (by UUID) sits at another PCI address or slot than recorded"},
    {"baseline.gpu_replaced", Layer::pcie, Severity::warning, {C::pcie, C::module, C::nvml, C::cuda},
     "another card (another UUID) sits where the record has a GPU"},
    {"baseline.link_lower", Layer::pcie, Severity::warning, {C::pcie},
     "a GPU's PCIe link trains lower than recorded"},
    {"baseline.vbios_changed", Layer::pcie, Severity::warning, {C::module, C::nvml},
     "a GPU's VBIOS differs from the record"},
    {"baseline.identity_unverified", Layer::module, Severity::info, {C::pcie, C::module, C::nvml, C::cuda},
     "a GPU is present at a recorded address but no source knows its UUID now"},
    {"baseline.driver_changed", Layer::module, Severity::warning, {C::module, C::nvml},
     "the NVIDIA driver version differs from the record"},
    {"baseline.kernel_changed", Layer::module, Severity::warning, {C::host, C::module},
     "the kernel release differs from the record"},
    {"baseline.module_file_changed", Layer::module, Severity::warning, {C::module},
     "the nvidia module file the running kernel would load differs from the record"},
    {"baseline.cuda_changed", Layer::driver, Severity::warning, {C::cuda},
     "the CUDA driver API version differs from the record"},
    {"baseline.fabric_manager_changed", Layer::driver, Severity::warning, {C::libraries},
     "the Fabric Manager version differs from the record"},
    {"baseline.library_changed", Layer::libraries, Severity::warning, {C::libraries},
     "a driver library resolves to another path or version than recorded"},
    {"baseline.nvlink_remote_changed", Layer::driver, Severity::warning, {C::nvml},
     "an NVLink active now and in the record leads to another device than recorded (its remote end's PCI address or "
     "kind: GPU, NVSwitch); a peer GPU that moved with its UUID is not a change"},
    {"baseline.nvlink_lost", Layer::driver, Severity::error, {C::nvml},
     "a GPU with NVLinks active in the record has none active now (a link lost while others stay active is "
     "health.nvlink_down's, or matrix.nvlinks_below's with --matrix)"},
    {"baseline.xid_recurs_after_reboot", Layer::kernel_log, Severity::error, {C::kernel_log, C::host},
     "an Xid whose NVIDIA bucket asks for a GPU reset or a reboot was in the node record's boot and is back on the "
     "same GPU after the node rebooted: the reset or reboot did not clear it"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

}  // namespace

constinit const RuleTable kBaselineRules{"baseline", kRules};

namespace {

std::string first_non_empty(std::initializer_list<std::string_view> values) {
    for (auto v : values)
        if (!v.empty()) return std::string(v);
    return {};
}

RecordedLink record_link(const PcieLink& l) { return {l.speed_gts, l.width}; }

// A GPU's NVLinks as NVML answered them, or nullopt when they were not read. No link listed is "none" only when NVML
// said so: link 0 Not Supported (a GPU without NVLink), or a link count of 0.
std::optional<std::vector<RecordedNvlink>> record_nvlinks(const NvmlDevice& d) {
    const auto& u = d.unsupported;
    bool none = std::find(u.begin(), u.end(), "nvmlDeviceGetNvLinkState") != u.end() || d.health.nvlink_count == 0u;
    if (d.nvlinks.empty() && !none) return std::nullopt;
    std::vector<RecordedNvlink> out;
    for (auto& l : d.nvlinks) {
        RecordedNvlink r{l.link, l.active, l.remote_pci, {}};
        if (l.remote_type != NvlinkRemote::not_read) r.remote_type = std::string(name_of(l.remote_type));
        out.push_back(std::move(r));
    }
    return out;
}

bool ib_port_active(const IbPort& p) { return p.state_code ? *p.state_code == 4 : p.state == "ACTIVE"; }

}  // namespace

std::string driver_version_of(const Snapshot& s) {
    if (s.module.nvidia_driver_version && !s.module.nvidia_driver_version->empty())
        return *s.module.nvidia_driver_version;
    if (!s.nvml.driver_version.empty()) return s.nvml.driver_version;
    for (auto& m : s.module.loaded)
        if (m.name == "nvidia" && !m.version.empty()) return m.version;
    return {};
}

std::string fabric_manager_version_of(const Snapshot& s) {
    // Fabric Manager ships libnvfm / libnvidia-fabricmanager at the driver's version; its presence on the
    // loader path is the only trace a snapshot keeps of it.
    for (auto& lib : s.libraries.libraries) {
        auto name = to_lower(lib.soname);
        if (name.find("fabricmanager") == std::string::npos && name.find("libnvfm") == std::string::npos) continue;
        if (lib.chosen && !lib.chosen->version.empty()) return lib.chosen->version;
    }
    return {};
}

namespace {
// The UUID the record knows for a GPU address.
std::string by_pci_uuid(const NodeRecord& r, const std::string& pci) {
    for (auto& g : r.gpus)
        if (g.pci == pci) return g.uuid;
    return {};
}
}  // namespace

NodeRecord make_node_record(const Snapshot& s) {
    NodeRecord r;
    r.snapshot_taken_at = s.collected_at;
    r.gpudx_version = s.gpudx_version;
    r.hostname = s.host.hostname;
    r.kernel_release = first_non_empty({s.host.kernel_release, s.module.kernel_release});
    r.driver_version = driver_version_of(s);
    r.driver_branch = driver_branch_of(r.driver_version);
    for (auto& f : s.module.files)
        if (f.name == "nvidia") {
            r.module_file = f.path;
            r.module_file_version = f.version;
            break;
        }
    for (auto& lib : s.libraries.libraries) {
        RecordedLibrary rl{lib.soname, {}, {}};
        if (lib.chosen) rl.path = lib.chosen->path, rl.version = lib.chosen->version;
        r.libraries.push_back(std::move(rl));
    }
    r.fabric_manager = fabric_manager_version_of(s);
    r.cuda_driver_version = s.cuda.driver_version ? s.cuda.driver_version : s.nvml.cuda_driver_version;

    // One entry per GPU address, whichever layer saw it: a card the driver lost is still on PCIe, and a
    // card whose PCIe collector failed may still be known to procfs or NVML.
    std::map<std::string, RecordedGpu> by_pci;
    auto entry = [&](std::string_view address) -> RecordedGpu& {
        auto pci = normalize_pci(address);
        auto& g = by_pci[pci];
        g.pci = pci;
        return g;
    };
    for (auto& d : s.pcie.devices) {
        if (!d.is_gpu || d.is_nvswitch) continue;
        auto& g = entry(d.address);
        g.slot = d.slot;
        g.numa_node = d.numa_node;
        g.link_max = record_link(d.link_max);
        g.link_current = record_link(d.link_current);
        if (g.model.empty()) g.model = d.device_name;
    }
    for (auto& a : s.pcie.gpus) entry(a);
    auto fill = [](std::string& field, const std::string& value, bool prefer) {
        if (!value.empty() && (prefer || field.empty())) field = value;
    };
    for (auto& p : s.module.nvidia_gpus) {
        if (p.address.empty()) continue;
        auto& g = entry(p.address);
        fill(g.uuid, p.uuid, true);
        fill(g.model, p.model, true);
        fill(g.vbios, p.vbios, true);
        if (p.minor) g.minor = p.minor;
    }
    for (auto& d : s.nvml.devices) {
        if (d.pci.empty()) continue;
        auto& g = entry(d.pci);
        fill(g.uuid, d.uuid, false);
        fill(g.model, d.name, false);
        if (!g.minor && d.minor) g.minor = d.minor;
        g.nvlinks = record_nvlinks(d);
        g.nvlink_count = d.health.nvlink_count;
    }
    auto from_cuda = [&](const CudaView& v) {
        for (auto& d : v.devices) {
            if (d.pci.empty()) continue;
            auto& g = entry(d.pci);
            fill(g.uuid, d.uuid, false);
            fill(g.model, d.name, false);
        }
    };
    from_cuda(s.cuda.caller);
    if (s.cuda.all) from_cuda(*s.cuda.all);
    for (auto& [pci, g] : by_pci) r.gpus.push_back(std::move(g));
    // No /sys/class/infiniband (no_data) is a reading too: the node has no port. An error or no status is unread.
    if (auto* ib = s.collector(Collector::infiniband);
        ib && (ib->state == CollectorState::ok || ib->state == CollectorState::no_data)) {
        r.ib_ports.emplace();
        for (auto& d : s.infiniband.devices)
            for (auto& p : d.ports)
                r.ib_ports->push_back({d.name, d.pci, p.port, ib_port_active(p), p.state, p.phys_state, p.link_layer,
                                       p.rate, p.rate_gbps});
    }
    r.boot_id = s.host.boot_id;
    const XidPolicy& policy = builtin_xid_policy();
    // One entry per GPU and code, in the tallies' order: an NVLink 5 Xid is tallied per unit and link, and those
    // add up here. Indexed, since an Xid storm over many GPUs has thousands of tallies.
    std::map<std::pair<std::string, int>, size_t> recovery_index;
    for (auto& t : s.kernel_log.tallies) {
        if (t.kind != TallyKind::xid) continue;
        const XidBucket* bucket = policy.immediate_bucket(t.code);
        if (!bucket || bucket->recovery.empty()) continue;
        auto pci = t.device.empty() ? std::string() : normalize_pci(t.device);
        auto [at, added] = recovery_index.try_emplace({pci, t.code}, r.recovery_xids.size());
        if (!added) {
            auto& same = r.recovery_xids[at->second];
            same.count += t.count;
            same.last_text = t.last_text;
            continue;
        }
        auto uuid = by_pci_uuid(r, pci);  // the node's GPUs: a handful
        r.recovery_xids.push_back({std::move(uuid), std::move(pci), t.code, bucket->recovery, t.count, t.last_text});
    }
    return r;
}

namespace {

std::string link_text(const RecordedLink& l) {
    std::string speed = l.speed_gts ? fmt::format("{:g} GT/s", *l.speed_gts) : "? GT/s";
    std::string width = l.width ? fmt::format("x{}", *l.width) : "x?";
    return speed + " " + width;
}

// True when `now` is known and trained below `then` in speed or width.
bool link_lower(const RecordedLink& then, const RecordedLink& now) {
    if (then.speed_gts && now.speed_gts && *now.speed_gts + 1e-9 < *then.speed_gts) return true;
    if (then.width && now.width && *now.width < *then.width) return true;
    return false;
}

std::string sysfs(const std::string& pci, std::string_view file) {
    return fmt::format("/sys/bus/pci/devices/{}/{}", pci, file);
}

std::string where(const RecordedGpu& g) {
    return g.slot.empty() ? g.pci : fmt::format("{} (slot {})", g.pci, g.slot);
}

// The same GPU: by UUID when both know it (a card moved to another slot is still that card), else by address.
bool same_gpu(const RecordedXid& a, const RecordedXid& b) {
    if (!a.uuid.empty() && !b.uuid.empty()) return a.uuid == b.uuid;
    return a.pci == b.pci;
}

// A reset or reboot Xid of the record's boot, back on the same GPU in a later boot (the boot ids differ): the
// recovery NVIDIA's bucket asked for did not clear it.
void check_recurrence_after_reboot(const NodeRecord& base, const NodeRecord& now, const std::string& rec,
                                   std::vector<Finding>& out) {
    if (base.boot_id.empty() || now.boot_id.empty() || base.boot_id == now.boot_id) return;
    for (auto& x : now.recovery_xids) {
        auto then = std::find_if(base.recovery_xids.begin(), base.recovery_xids.end(), [&](const RecordedXid& b) {
            return same_gpu(b, x) && b.recovery == x.recovery;
        });
        if (then == base.recovery_xids.end()) continue;
        GpuRef g{x.uuid, x.pci};
        std::string what = x.recovery == "reboot" ? "reboot" : "GPU reset";
        out.push_back(rule("baseline.xid_recurs_after_reboot")
                          .finding(fmt::format("Xid {} on {} recurs after the reboot: the record's boot ({}, recorded {}) "
                                               "had Xid {} ({} bucket) on this GPU, and the node has rebooted since",
                                               x.code, describe(g), base.boot_id, base.recorded_at.empty() ? "at an unknown time" : base.recorded_at,
                                               then->code, what),
                                   {{g},
                                    {{rec, fmt::format("boot {}: {}", base.boot_id, then->last_text)},
                                     {"kernel log (boot " + now.boot_id + ")", x.last_text}},
                                    "The reset or reboot did not clear it: keep the GPU drained and check the "
                                    "mechanics (CHECK_MECHANICALS: seating, riser, power cables, cooling), then run "
                                    "`gpudx accept`; if it recurs again, contact NVIDIA support for a replacement."}));
    }
}

GpuRef gpu_ref(const RecordedGpu& g) { return GpuRef{g.uuid, g.pci}; }

// Where a diff's evidence comes from: the record compared against, and the node as it is now.
struct DiffSources {
    std::string record;
    std::string now;
};

// Finds each recorded GPU on the node now: by UUID, else at the place (address or slot) it was recorded at. Keeps
// which current GPUs a recorded one explains, and those found only by place because they show no UUID now.
class GpuMatcher {
public:
    GpuMatcher(const NodeRecord& base, const NodeRecord& now) {
        for (auto& g : now.gpus) {
            if (!g.uuid.empty()) now_by_uuid_[g.uuid] = &g;
            now_by_pci_[g.pci] = &g;
            if (!g.slot.empty()) now_by_slot_[g.slot] = &g;
        }
        for (auto& g : base.gpus)
            if (!g.uuid.empty()) base_uuids_.insert(g.uuid);
    }

    // The current GPU that is the recorded `b`, or nullptr after reporting it replaced or missing.
    const RecordedGpu* find(const RecordedGpu& b, const NodeRecord& now, const DiffSources& src,
                            std::vector<Finding>& out) {
        if (!b.uuid.empty()) {
            if (auto it = now_by_uuid_.find(b.uuid); it != now_by_uuid_.end()) {
                accounted.insert(it->second);
                return it->second;
            }
        }
        // Not found by UUID: is the recorded place occupied by another card now?
        const RecordedGpu* at_place = nullptr;
        if (auto it = now_by_pci_.find(b.pci); it != now_by_pci_.end()) at_place = it->second;
        if (!at_place && !b.slot.empty())
            if (auto it = now_by_slot_.find(b.slot); it != now_by_slot_.end()) at_place = it->second;
        if (at_place && (at_place->uuid.empty() || b.uuid.empty())) {
            // Something is at the address but without a UUID (driver not loaded): presence, not identity.
            accounted.insert(at_place);
            unverified.push_back(at_place);
            return at_place;
        }
        if (at_place && !base_uuids_.contains(at_place->uuid)) {
            accounted.insert(at_place);
            report_replaced(b, *at_place, src, out);
        } else {
            report_missing(b, now, src, out);
        }
        return nullptr;
    }

    std::set<const RecordedGpu*> accounted;  // current GPUs explained by a baseline entry
    std::vector<const RecordedGpu*> unverified;

private:
    static void report_replaced(const RecordedGpu& b, const RecordedGpu& at_place, const DiffSources& src,
                                std::vector<Finding>& out) {
        out.push_back(
            rule("baseline.gpu_replaced")
                .finding(
                    fmt::format("A different card sits at {}: {} was recorded there, {} is there now", where(b),
                                b.uuid, at_place.uuid),
                    {{gpu_ref(at_place)},
                     {{src.record, fmt::format("{} at {} VBIOS {}", b.uuid, where(b), b.vbios)},
                      {"/proc/driver/nvidia/gpus/" + at_place.pci + "/information",
                       fmt::format("{} VBIOS {}", at_place.uuid, at_place.vbios)}},
                     "If the card was swapped on purpose, run acceptance (gpudx accept) on it and save a new "
                     "baseline "
                     "(gpudx baseline save); otherwise find out who replaced it before scheduling jobs."}));
    }

    static void report_missing(const RecordedGpu& b, const NodeRecord& now, const DiffSources& src,
                               std::vector<Finding>& out) {
        std::string list;
        for (auto& g : now.gpus) list += (list.empty() ? "" : ", ") + g.pci;
        if (list.empty()) list = "none";
        out.push_back(
            rule("baseline.gpu_missing")
                .finding(fmt::format("{} recorded at {} is not on this node any more", b.uuid.empty() ? "GPU" : b.uuid,
                                     where(b)),
                         {{gpu_ref(b)},
                          {{src.record, fmt::format("{} at {}", b.uuid, where(b))},
                           {src.now, fmt::format("{} GPU(s) now: {}", now.gpus.size(), list)}},
                          "Drain the node; check the card is seated and powered (a reboot may bring it back), "
                          "then look for "
                          "'fallen off the bus' in the kernel log (gpudx diagnose) before reseating or RMA."}));
    }

    std::map<std::string, const RecordedGpu*> now_by_uuid_, now_by_pci_, now_by_slot_;
    std::set<std::string> base_uuids_;
};

// A recorded GPU against the same card now: its place, its PCIe link, its VBIOS.
void compare_gpu(const RecordedGpu& b, const RecordedGpu& n, const DiffSources& src, std::vector<Finding>& out) {
    if (n.pci != b.pci || (!b.slot.empty() && !n.slot.empty() && n.slot != b.slot)) {
        out.push_back(rule("baseline.gpu_moved")
                          .finding(fmt::format("{} moved from {} to {}", b.uuid, where(b), where(n)),
                                   {{gpu_ref(n)},
                                    {{src.record, where(b)}, {src.now, where(n)}},
                                    "Jobs and configuration naming the old address (CUDA_VISIBLE_DEVICES by index, "
                                    "NCCL topology files, "
                                    "Slurm gres.conf) now point at another card; update them or put the card back, "
                                    "then save a new "
                                    "baseline."}));
    }
    bool cur_lower = link_lower(b.link_current, n.link_current);
    bool max_lower = link_lower(b.link_max, n.link_max);
    if (cur_lower || max_lower) {
        out.push_back(
            rule("baseline.link_lower")
                .finding(
                    fmt::format("PCIe link of {} is lower than recorded: now {} (max {}), recorded {} (max {})",
                                describe(gpu_ref(n)), link_text(n.link_current), link_text(n.link_max),
                                link_text(b.link_current), link_text(b.link_max)),
                    {{gpu_ref(n)},
                     {{src.record, fmt::format("current {} max {}", link_text(b.link_current), link_text(b.link_max))},
                      {sysfs(n.pci, "current_link_speed") + ", current_link_width", link_text(n.link_current)},
                      {sysfs(n.pci, "max_link_speed") + ", max_link_width", link_text(n.link_max)}},
                     "Reseat the card or its riser and check the slot; host-device bandwidth drops with the link "
                     "(run gpudx accept to measure it)."}));
    }
    if (!b.vbios.empty() && !n.vbios.empty() && to_lower(b.vbios) != to_lower(n.vbios)) {
        out.push_back(
            rule("baseline.vbios_changed")
                .finding(fmt::format("VBIOS of {} changed from {} to {}", describe(gpu_ref(n)), b.vbios, n.vbios),
                         {{gpu_ref(n)},
                          {{src.record, b.vbios}, {"/proc/driver/nvidia/gpus/" + n.pci + "/information", n.vbios}},
                          "Confirm the firmware update was planned and is in the node class's tested set (gpudx "
                          "matrix check), "
                          "then save a new baseline."}));
    }
}

// "gpu 0000:1b:00.0", "nvswitch", "an unknown device": what NVML said is at the other end of a link.
std::string remote_end(const RecordedNvlink& l) {
    std::string out = l.remote_type;
    if (!l.remote_pci.empty()) out += (out.empty() ? "" : " ") + l.remote_pci;
    return out.empty() ? std::string("an unknown device") : out;
}

const RecordedNvlink* link_numbered(const std::vector<RecordedNvlink>& links, unsigned n) {
    for (auto& l : links)
        if (l.link == n) return &l;
    return nullptr;
}

// Whether an active link now leads elsewhere than recorded. An end unread on either side is not a change, and a
// peer GPU at another address with the same UUID is the same peer (it moved: baseline.gpu_moved says so).
bool remote_end_changed(const RecordedNvlink& was, const RecordedNvlink& now, const NodeRecord& base,
                        const NodeRecord& current) {
    if (!was.remote_type.empty() && !now.remote_type.empty() && was.remote_type != now.remote_type) return true;
    if (was.remote_pci.empty() || now.remote_pci.empty() || was.remote_pci == now.remote_pci) return false;
    auto then_uuid = by_pci_uuid(base, was.remote_pci), now_uuid = by_pci_uuid(current, now.remote_pci);
    return then_uuid.empty() || then_uuid != now_uuid;
}

// A recorded GPU's NVLinks against the same card now: where each active link leads, and whether any is left.
void compare_nvlinks(const RecordedGpu& b, const RecordedGpu& n, const NodeRecord& base, const NodeRecord& now,
                     const DiffSources& src, std::vector<Finding>& out) {
    if (!b.nvlinks || !n.nvlinks) return;  // not read on one side: nothing to compare
    std::vector<unsigned> was_active;
    for (auto& l : *b.nvlinks)
        if (l.active) was_active.push_back(l.link);
    if (was_active.empty()) return;
    size_t active_now = std::count_if(n.nvlinks->begin(), n.nvlinks->end(), [](auto& l) { return l.active; });
    if (active_now == 0) {
        const RecordedNvlink* first = link_numbered(*b.nvlinks, was_active.front());
        std::vector<unsigned> inactive;
        for (auto& l : *n.nvlinks) inactive.push_back(l.link);
        out.push_back(
            rule("baseline.nvlink_lost")
                .finding(fmt::format("{}: no NVLink is active now; the record has {} active (link {} to {})",
                                     describe(gpu_ref(n)), was_active.size(), first->link, remote_end(*first)),
                         {{gpu_ref(n)},
                          {{src.record, fmt::format("active: {}", fmt::join(was_active, ","))},
                           {"nvmlDeviceGetFieldValues NVML_FI_DEV_NVLINK_GET_STATE",
                            n.nvlinks->empty() ? std::string("no link (Not Supported or a link count of 0)")
                                               : fmt::format("inactive: {}", fmt::join(inactive, ","))}},
                          "Check `nvidia-smi nvlink -s -i <UUID>`, the kernel log for NVLink Xids (74, 144-150) "
                          "and, on NVSwitch systems, nvidia-fabricmanager; reset the GPU. Without NVLink its peer "
                          "traffic falls back to PCIe or fails."}));
        return;
    }
    std::vector<std::string> elsewhere, was_text, now_text;
    for (auto& w : *b.nvlinks) {
        if (!w.active) continue;
        const RecordedNvlink* l = link_numbered(*n.nvlinks, w.link);
        // A link down now, with others active, is health.nvlink_down's (or matrix.nvlinks_below's).
        if (!l || !l->active || !remote_end_changed(w, *l, base, now)) continue;
        elsewhere.push_back(fmt::format("link {}: was {}, now {}", w.link, remote_end(w), remote_end(*l)));
        was_text.push_back(fmt::format("link {}: {}", w.link, remote_end(w)));
        now_text.push_back(fmt::format("link {}: {}", w.link, remote_end(*l)));
    }
    if (elsewhere.empty()) return;
    out.push_back(rule("baseline.nvlink_remote_changed")
                      .finding(fmt::format("{}: {} NVLink(s) lead elsewhere than recorded: {}", describe(gpu_ref(n)),
                                           elsewhere.size(), join_strings(elsewhere, "; ")),
                               {{gpu_ref(n)},
                                {{src.record, join_strings(was_text, "; ")},
                                 {"nvmlDeviceGetNvLinkRemotePciInfo_v2, nvmlDeviceGetNvLinkRemoteDeviceType",
                                  join_strings(now_text, "; ")}},
                                "The NVLink topology changed: a GPU, an NVLink bridge or an NVSwitch tray was moved "
                                "or replaced. If that was planned, run gpudx accept and save a new baseline; otherwise "
                                "check the hardware before jobs land."}));
}

// Current GPUs no recorded one explains.
void report_extra_gpus(const NodeRecord& base, const NodeRecord& now, const std::set<const RecordedGpu*>& accounted,
                       const DiffSources& src, std::vector<Finding>& out) {
    for (auto& g : now.gpus) {
        if (accounted.contains(&g)) continue;
        out.push_back(
            rule("baseline.gpu_extra")
                .finding(fmt::format("{} at {} was not in the baseline", g.uuid.empty() ? "A GPU" : g.uuid, where(g)),
                         {{gpu_ref(g)},
                          {{src.record, fmt::format("{} GPU(s) recorded", base.gpus.size())}, {src.now, where(g)}},
                          "If the card was added on purpose, run acceptance on it (gpudx accept) and save a new "
                          "baseline."}));
    }
}

// GPUs found only at their recorded place, without a UUID now to prove they are the same cards.
void report_unverified_identity(const std::vector<const RecordedGpu*>& unverified, const DiffSources& src,
                                std::vector<Finding>& out) {
    if (unverified.empty()) return;
    Finding f = rule("baseline.identity_unverified").finding({});
    std::string list;
    for (auto* g : unverified) {
        f.subjects.push_back(gpu_ref(*g));
        list += (list.empty() ? "" : ", ") + g->pci;
    }
    f.message = fmt::format("A GPU is present at {} but its UUID is unknown now, so a replacement cannot be ruled out",
                            list);
    f.evidence.push_back({src.now, "no UUID from procfs, NVML or CUDA"});
    f.next_step = "Load the driver (or diagnose the module layer) and run the diff again to compare UUIDs.";
    out.push_back(std::move(f));
}

// The node's software stack against the record: driver, kernel, module file, CUDA, Fabric Manager.
void report_stack_changes(const NodeRecord& base, const NodeRecord& now, const DiffSources& src,
                          std::vector<Finding>& out) {
    auto changed = [&](const Rule& r, std::string_view what, const std::string& was, const std::string& is,
                       std::string_view source, std::string next) {
        if (was.empty() || is.empty() || was == is) return;
        out.push_back(r.finding(fmt::format("{} changed from {} to {}", what, was, is),
                                {{}, {{src.record, was}, {std::string(source), is}}, std::move(next)}));
    };
    changed(rule("baseline.driver_changed"), "NVIDIA driver", base.driver_version, now.driver_version,
            "/proc/driver/nvidia/version",
            "Confirm the driver update was planned and is in the node class's tested set (gpudx matrix check); "
            "then save a new baseline.");
    changed(rule("baseline.kernel_changed"), "Kernel", base.kernel_release, now.kernel_release,
            "/proc/sys/kernel/osrelease",
            "Check a module was built for the new kernel (gpudx diagnose, module layer) and that the kernel is in "
            "the tested set; then save a new baseline.");
    changed(rule("baseline.module_file_changed"), "nvidia module file", base.module_file, now.module_file,
            "module directory of the running kernel",
            "Check which package installed the new module file (DKMS or a packaged build) and that its version matches "
            "the user-space driver.");
    changed(rule("baseline.cuda_changed"), "CUDA driver version", cuda_version_text(base.cuda_driver_version),
            cuda_version_text(now.cuda_driver_version), "cuDriverGetVersion",
            "Check the CUDA runtime of the workloads is supported by this driver; then save a new baseline.");
    changed(rule("baseline.fabric_manager_changed"), "Fabric Manager", base.fabric_manager, now.fabric_manager,
            "libraries layer",
            "Fabric Manager must match the driver version exactly; restart it after the driver update.");
}

// Recorded libraries the loader now resolves to another file or version.
void report_library_changes(const NodeRecord& base, const NodeRecord& now, const DiffSources& src,
                            std::vector<Finding>& out) {
    for (auto& bl : base.libraries) {
        if (bl.path.empty()) continue;
        auto it = std::find_if(now.libraries.begin(), now.libraries.end(),
                               [&](const RecordedLibrary& l) { return l.soname == bl.soname; });
        if (it == now.libraries.end() || it->path.empty()) continue;  // a missing library is the libraries check's job
        if (it->path == bl.path && it->version == bl.version) continue;
        out.push_back(rule("baseline.library_changed")
                          .finding(fmt::format("{} now resolves to {} ({}), recorded {} ({})", bl.soname, it->path,
                                               it->version.empty() ? "version unknown" : it->version, bl.path,
                                               bl.version.empty() ? "version unknown" : bl.version),
                                   {{},
                                    {{src.record, bl.path + " " + bl.version},
                                     {"dynamic loader resolution (LD_LIBRARY_PATH, /etc/ld.so.cache)",
                                      it->path + " " + it->version}},
                                    "Find what put the other copy first on the loader path (LD_LIBRARY_PATH, a "
                                    "container mount, ldconfig); "
                                    "gpudx diagnose shows every copy."}));
    }
}

// Errors first, then by layer; findings of one severity and layer keep the order they were found in.
void sort_by_severity_and_layer(std::vector<Finding>& out) {
    std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
        if (a.severity != b.severity) return a.severity > b.severity;
        return a.layer < b.layer;
    });
}

}  // namespace

std::vector<Finding> diff_records(const NodeRecord& base, const NodeRecord& now, const std::string& baseline_path,
                                  const std::string& now_source) {
    std::vector<Finding> out;
    const DiffSources src{baseline_path.empty() ? std::string("baseline") : "baseline " + baseline_path, now_source};
    GpuMatcher matcher(base, now);
    for (auto& b : base.gpus)
        if (const RecordedGpu* n = matcher.find(b, now, src, out)) {
            compare_gpu(b, *n, src, out);
            compare_nvlinks(b, *n, base, now, src, out);
        }
    report_extra_gpus(base, now, matcher.accounted, src, out);
    report_unverified_identity(matcher.unverified, src, out);
    report_stack_changes(base, now, src, out);
    report_library_changes(base, now, src, out);
    check_recurrence_after_reboot(base, now, src.record, out);
    sort_by_severity_and_layer(out);
    return out;
}

std::vector<Finding> diff_against_baseline(const NodeRecord& baseline, const Snapshot& now) {
    std::string source = now.root.empty() || now.root == "/" ? "snapshot" : "snapshot of " + now.root;
    if (!now.collected_at.empty()) source += " at " + now.collected_at;
    return diff_records(baseline, make_node_record(now), {}, source);
}

int exit_code_for(const std::vector<Finding>& findings) {
    bool warn = false;
    for (auto& f : findings) {
        if (f.severity == Severity::error) return 1;
        if (f.severity == Severity::warning) warn = true;
    }
    return warn ? 2 : 0;
}

}  // namespace gpudx
