// Kernel-log rules: Xids (severity from the Xid policy, chains, repeats, the recovery action of Xid 154), NVSwitch
// SXids, "fallen off the bus", AER events, IOMMU faults, and Secure Boot / lockdown refusing a module (a
// module-layer fact found in the log), and the fallback for a GPU component's failure line that nothing else
// explains.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rules/engine/families.hpp"
#include "rules/reference/component_lines.hpp"
#include "rules/reference/recovery_action.hpp"
#include "rules/reference/result_codes.hpp"
#include "rules/reference/signatures.hpp"
#include "rules/reference/xid_policy.hpp"
#include "core/nvlink_xid.hpp"
#include "core/pci_address.hpp"
#include "core/text.hpp"

namespace gpudx {
namespace {

using C = Collector;
constexpr Rule kRules[] = {
    {"kernel_log.xid", Layer::kernel_log, Severity::warning, {C::kernel_log},
     "an NVIDIA Xid, with the meaning, severity and action the Xid policy gives its code (the policy's default, "
     "a warning, for an unlisted code), one per GPU and code however many lines (a storm: the count, first and last "
     "time); an Xid 154 takes the severity of the recovery action it states, an Xid \"caused by previous Xid N\" is "
     "attributed to N (info); an NVLink 5 Xid (144-150) is one per unit and link, names the link, unit and error "
     "status from its line, and is at most a warning when the driver says Nonfatal"},
    {"kernel_log.xid_from_nvml", Layer::kernel_log, Severity::warning, {C::kernel_log},
     "an Xid that NVML delivered to the agent (nvmlEventTypeXidCriticalError) and the kernel log it reads does not "
     "show (no /dev/kmsg in the container, a ring buffer that wrapped): judged by the Xid policy as kernel_log.xid"},
    {"kernel_log.xid_repeated", Layer::kernel_log, Severity::error, {C::kernel_log},
     "an Xid code repeating on one GPU past its threshold in the window (per code or per NVIDIA bucket in the Xid "
     "policy): escalated, with the bucket's next step (a reset that did not hold becomes CHECK_MECHANICALS)"},
    {"kernel_log.sxid", Layer::kernel_log, Severity::warning, {C::kernel_log, C::pcie},
     "an NVSwitch SXid, attributed to the switch by its PCI address with the ports (links) its lines name and "
     "NVIDIA's class for the code (fabric manager guide: non-fatal, fatal, always-fatal): an error when the driver "
     "says Fatal, else the SXid policy's severity (also when the report states no severity, which it says)"},
    {"kernel_log.fallen_off_bus", Layer::kernel_log, Severity::error, {C::kernel_log, C::pcie},
     "the kernel log says a GPU fell off the bus"},
    {"kernel_log.aer_corrected", Layer::kernel_log, Severity::warning, {C::kernel_log, C::pcie},
     "PCIe AER corrected errors logged for a GPU or a device above one"},
    {"kernel_log.aer_uncorrected", Layer::kernel_log, Severity::error, {C::kernel_log, C::pcie},
     "PCIe AER uncorrectable (fatal or non-fatal) errors logged for a GPU or a device above one"},
    {"kernel_log.iommu_fault", Layer::kernel_log, Severity::error, {C::kernel_log, C::pcie},
     "the IOMMU blocked DMA from a GPU (a warning for another device)"},
    {"module.signature_refused", Layer::module, Severity::error, {C::kernel_log, C::module},
     "Secure Boot or lockdown refused an unsigned module (a warning when nvidia itself is loaded)"},
    {"module.unsigned_loaded", Layer::module, Severity::info, {C::kernel_log},
     "a module loaded without a valid signature and tainted the kernel"},
    {"kernel_log.gpu_component_error", Layer::kernel_log, Severity::warning, {C::kernel_log},
     "a line of a GPU component (NVRM, nvidia, nvidia-nvswitch, -peermem, -uvm, -drm, -modeset, -nvlink, the fabric "
     "manager, amdgpu, kfd) that says failed, error, timeout, fault, hang, reset or a negative errno, and that no "
     "other rule, signature or result code explains: one warning per component and device, with the line"},
};
consteval const Rule& rule(std::string_view id) { return declared_rule(kRules, id); }

std::string when(const std::optional<double>& mono, const std::string& wall) {
    if (!wall.empty()) return wall;
    if (mono) return fmt::format("{:.6f} s after boot", *mono);
    return "time unknown";
}

std::string first_last(const KernelLogTally& t) {
    std::string first = when(t.first_monotonic_s, t.first_wall_time);
    if (t.count == 1) return "at " + first;
    return fmt::format("{} times, first at {}, last at {}", t.count, first, when(t.last_monotonic_s, t.last_wall_time));
}

bool is_gpu(const Snapshot& s, const std::string& pci) {
    if (std::find(s.pcie.gpus.begin(), s.pcie.gpus.end(), pci) != s.pcie.gpus.end()) return true;
    return std::any_of(s.module.nvidia_gpus.begin(), s.module.nvidia_gpus.end(),
                       [&](auto& g) { return g.address == pci; });
}

// The GPUs a device's events concern: itself when it is a GPU, else the GPUs below it (a root port or
// switch reporting errors for the link that feeds them).
std::vector<GpuRef> gpus_at_or_below(const CheckContext& ctx, const std::string& pci) {
    const auto& s = ctx.snapshot;
    if (pci.empty()) return {};
    if (is_gpu(s, pci)) return {ctx.gpu(pci)};
    std::vector<GpuRef> out;
    for (auto& g : s.pcie.gpus) {
        auto path = pcie_path_up(s.pcie, g);
        if (std::any_of(path.begin(), path.end(), [&](const PciDevice* d) { return d->parent == pci; }))
            out.push_back(ctx.gpu(g));
    }
    return out;
}

std::string name_device(const CheckContext& ctx, const std::string& pci) {
    if (pci.empty()) return "a device the line does not name";
    if (is_gpu(ctx.snapshot, pci)) return describe(ctx.gpu(pci));
    return "PCI device " + pci;
}

void add_occurrences(Finding& f, const std::string& source, const KernelLogTally& t) {
    f.evidence.push_back({source, t.last_text});
    if (t.count > 1 && t.first_text != t.last_text) f.evidence.push_back({source, t.first_text});
}

// "<UUID>" in a next step becomes the GPU's UUID (its PCI address when no source knows the UUID).
std::string for_gpu(std::string step, const CheckContext& ctx, const std::string& pci) {
    if (pci.empty()) return step;
    std::string uuid = ctx.gpu(pci).uuid;
    std::string id = uuid.empty() ? pci : uuid;
    size_t at;
    while ((at = step.find("<UUID>")) != std::string::npos) step.replace(at, 6, id);
    return step;
}

std::string gpu_named(const CheckContext& ctx, const std::string& pci) {
    return pci.empty() ? std::string("a GPU the line does not name") : describe(ctx.gpu(pci));
}

// "... caused by previous Xid 149": the code the driver names as the cause.
std::optional<int> caused_by(std::string_view text) {
    static constexpr std::string_view kWords = "caused by previous Xid ";
    size_t at = text.find(kWords);
    if (at == std::string_view::npos) return std::nullopt;
    auto digits = text.substr(at + kWords.size());
    digits = digits.substr(0, digits.find_first_not_of("0123456789"));
    if (digits.empty() || digits.size() > 5) return std::nullopt;
    auto n = parse_uint(digits);
    if (!n || *n == 0) return std::nullopt;
    return static_cast<int>(*n);
}

// NVIDIA's catalog entry for the code, as evidence: mnemonic and buckets.
std::optional<Evidence> catalog_evidence(const XidRule& r) {
    if (r.mnemonic.empty() && r.immediate.empty()) return std::nullopt;
    std::string text = r.mnemonic;
    if (!r.immediate.empty()) text += fmt::format("{}immediate {}", text.empty() ? "" : "; ", r.immediate);
    if (!r.investigatory.empty()) text += fmt::format(", investigatory {}", r.investigatory);
    return Evidence{"NVIDIA Xid catalog", text};
}

void check_xids(const CheckContext& ctx, const XidPolicy& policy, std::vector<Finding>& out) {
    const auto& log = ctx.snapshot.kernel_log;
    for (auto& t : log.tallies) {
        if (t.kind != TallyKind::xid) continue;
        const XidRule& xid = policy.rule(t.code);
        bool known = policy.knows(t.code);
        Severity severity = xid.severity;
        std::string next_step = xid.action;
        std::string meaning = known ? xid.meaning : "not in the Xid policy";
        std::string detail;
        // Xid 154: the last line states the action the driver asks for now.
        std::optional<StatedRecoveryAction> stated;
        if (t.code == 154) stated = recovery_action_in_text(t.last_text);
        auto cause = caused_by(t.last_text);
        if (stated) {
            RecoveryAction a = recovery_action(stated->value);
            severity = a.severity;
            next_step = std::string(a.next_step);
            detail = fmt::format("; the driver now asks for {} (0x{:x}{})", a.name, stated->value,
                                 stated->wording.empty() ? "" : ", \"" + stated->wording + "\"");
        } else if (cause && *cause != t.code) {
            // The driver names the Xid this one follows from: that one is the fault (its own finding and
            // kernel_log.xid_caused_by say what to do); this one is its consequence.
            severity = Severity::info;
            detail = fmt::format("; caused by Xid {} (attributed to it)", *cause);
            next_step = fmt::format("Act on Xid {} on this GPU (`gpudx xid {}`): the driver says it caused this one.",
                                    *cause, *cause);
        }
        // NVLink 5 (144-150): the line names the unit, the link and whether the driver found it fatal. NVIDIA's
        // decode table gives most errors the driver calls non-fatal no immediate action (IGNORE), so such a line
        // is at most a warning; repeats still escalate (kernel_log.xid_repeated).
        std::string decoded;
        if (is_nvlink5_xid(t.code))
            if (auto d = parse_nvlink_xid(t.last_text)) {
                decoded = "; " + d->describe();
                if (d->fatal == false && severity > Severity::warning && !stated) {
                    severity = Severity::warning;
                    decoded += " (the driver calls it non-fatal: a warning)";
                }
            }
        Finding f = rule("kernel_log.xid").finding(severity, {});
        if (!t.device.empty()) f.subjects.push_back(ctx.gpu(t.device));
        // One text of its own size: a storm over many GPUs holds one finding per GPU and code.
        f.message = fmt::format("Xid {} ({}) on {}{}: {}{}{}{}", t.code, meaning, gpu_named(ctx, t.device), decoded,
                                first_last(t), detail, t.processes.empty() ? "" : "; processes: ",
                                fmt::join(t.processes, ", "));
        auto catalog = catalog_evidence(xid);
        f.evidence.reserve(2 + (t.count > 1 && t.first_text != t.last_text) + (catalog ? 1 : 0));
        add_occurrences(f, log.source, t);
        f.evidence.push_back(
            {"xid policy " + policy.version, fmt::format("{} {} ({})", t.code, to_string(xid.severity),
                                                         known ? xid.origin : "default for unlisted codes")});
        if (catalog) f.evidence.push_back(std::move(*catalog));
        f.next_step = for_gpu(next_step, ctx, t.device);
        out.push_back(std::move(f));
    }
}

// Xids NVML delivered to the agent (Snapshot::nvml_events) that no kernel-log tally shows for that GPU and code:
// the agent's only sight of them when it cannot read the kernel log. One finding per GPU and code, as for the log.
void check_nvml_xids(const CheckContext& ctx, const XidPolicy& policy, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    bool log_read = s.collected(Collector::kernel_log);
    std::set<std::pair<std::string, int>> in_log;
    if (log_read)
        for (auto& t : s.kernel_log.tallies)
            if (t.kind == TallyKind::xid) in_log.insert({normalize_pci(t.device), t.code});
    struct Seen {
        const NvmlEvent* first = nullptr;
        const NvmlEvent* last = nullptr;
        size_t count = 0;
    };
    std::map<std::pair<std::string, int>, Seen> seen;
    std::vector<std::pair<std::string, int>> order;
    for (auto& e : s.nvml_events) {
        if (e.type != NvmlEventType::xid || e.data == 0 || e.data > static_cast<unsigned long long>(kMaxXidCode)) continue;
        auto key = std::make_pair(normalize_pci(e.pci), static_cast<int>(e.data));
        if (in_log.count(key)) continue;
        Seen& k = seen[key];
        if (!k.first) order.push_back(key), k.first = &e;
        k.last = &e;
        ++k.count;
    }
    for (auto& key : order) {
        auto& [pci, code] = key;
        const Seen& k = seen[key];
        const XidRule& xid = policy.rule(code);
        bool known = policy.knows(code);
        Finding f = rule("kernel_log.xid_from_nvml").finding(xid.severity, {});
        if (!pci.empty()) f.subjects.push_back(ctx.gpu(pci));
        std::string when = k.count == 1 ? fmt::format("at {}", k.first->time)
                                        : fmt::format("{} times, {} to {}", k.count, k.first->time, k.last->time);
        f.message = fmt::format("Xid {} ({}) on {}: delivered by NVML {}; {}", code,
                                known ? xid.meaning : "not in the Xid policy", gpu_named(ctx, pci), when,
                                log_read ? "the kernel log read does not show it"
                                         : "the kernel log could not be read here");
        f.evidence.push_back({"NVML event", fmt::format("nvmlEventTypeXidCriticalError, data {}, GPU {} ({}), {}", code,
                                                        k.last->uuid, k.last->pci, k.last->time)});
        f.evidence.push_back(
            {"xid policy " + policy.version, fmt::format("{} {} ({})", code, to_string(xid.severity),
                                                         known ? xid.origin : "default for unlisted codes")});
        if (auto catalog = catalog_evidence(xid)) f.evidence.push_back(std::move(*catalog));
        f.next_step = for_gpu(xid.action, ctx, pci);
        out.push_back(std::move(f));
    }
}

// A code repeating on one GPU within its window escalates (XidPolicy::escalation). The window slides over the
// kept events: `repeats` of them within `within_s` seconds of each other. Events the driver says another Xid
// caused are that one's, not repeats of their own.
double event_time(const XidEvent& e) {
    if (e.monotonic_s) return *e.monotonic_s;
    return static_cast<double>(e.wall_s.value_or(0));
}

std::string bucket_name(const XidPolicy& policy, int code) {
    const XidBucket* bucket = policy.immediate_bucket(code);
    return bucket ? bucket->name : std::string("none");
}

// An Xid code escalated on one GPU (its message is the caller's: what was counted, and how): the severity, the GPU,
// the latest line and an earlier one, the policy's threshold and the escalation's next step.
Finding xid_escalated(const CheckContext& ctx, const XidPolicy& policy, int code, const XidEscalation& esc,
                      const std::string& pci, std::string_view last_text, std::optional<std::string_view> earlier_text) {
    Finding f = rule("kernel_log.xid_repeated").finding(std::max(esc.severity, policy.rule(code).severity), {});
    if (!pci.empty()) f.subjects.push_back(ctx.gpu(pci));
    const auto& source = ctx.snapshot.kernel_log.source;
    f.evidence.push_back({source, std::string(last_text)});
    if (earlier_text) f.evidence.push_back({source, std::string(*earlier_text)});
    f.evidence.push_back({"xid policy " + policy.version, fmt::format("{}: {} repeats within {:.0f} s escalate to {}",
                                                                      code, esc.repeats, esc.within_s,
                                                                      to_string(esc.severity))});
    f.next_step = for_gpu(esc.action, ctx, pci);
    return f;
}

// The repeats a tally proves within the threshold's window: cut its first-to-last span into windows of the
// threshold's length; one of them holds at least count / windows events, so that many within the window is
// certain, not an average.
struct TallyRepeats {
    std::optional<double> span;
    uint64_t certain = 0;
};
TallyRepeats tally_repeats(const KernelLogTally& t, const XidEscalation& esc) {
    TallyRepeats r;
    if (t.first_monotonic_s && t.last_monotonic_s) r.span = *t.last_monotonic_s - *t.first_monotonic_s;
    uint64_t windows = !r.span ? 1 : std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(*r.span / esc.within_s)));
    r.certain = (t.count + windows - 1) / windows;
    return r;
}

// The Xid events of one GPU and code, as check_xid_repeats slides its window over them: a time each, and the texts
// once per run of equal ones. They are the log's kept events (at most 10,000, in diagnose and explain alike); a
// longer storm is judged by its tally.
struct XidTimeline {
    std::vector<double> times;  // event_time, in the log's order
    // (first event, text) for each run of equal texts, each a view of the snapshot's kept event (a storm's 10,000 kept
    // events are not copied again).
    std::vector<std::pair<uint32_t, std::string_view>> texts;
    bool timed = true;  // every event has a time

    std::string_view text(size_t event) const {
        auto run = std::upper_bound(texts.begin(), texts.end(), event,
                                    [](size_t k, const auto& r) { return k < r.first; });
        return std::prev(run)->second;
    }
};

// Every Xid event of the log (or every one kept), by GPU and code. Events the driver says another Xid caused are
// that one's, not repeats of their own.
struct XidTimelines {
    std::map<std::pair<std::string, int>, XidTimeline> by_gpu_code;
    uint64_t events = 0;

    // `e` outlives these timelines (a snapshot's kept events): its text is not copied.
    void add(const XidEvent& e) {
        ++events;
        if (caused_by(e.text)) return;
        XidTimeline& t = by_gpu_code[{e.pci, e.code}];
        t.timed = t.timed && (e.monotonic_s || e.wall_s);
        if (t.texts.empty() || t.texts.back().second != e.text)
            t.texts.emplace_back(static_cast<uint32_t>(t.times.size()), e.text);
        t.times.push_back(event_time(e));
    }
};

void check_xid_repeats(const CheckContext& ctx, const XidPolicy& policy, const XidTimelines& xids,
                       std::vector<Finding>& out) {
    const auto& log = ctx.snapshot.kernel_log;
    // The log keeps the newest Xid events and its tallies count every one: when it kept fewer than it counted, a
    // GPU's kept events may be the tail of a longer storm.
    uint64_t tallied = 0;
    std::map<std::pair<std::string, int>, std::vector<const KernelLogTally*>> tallies_of;
    for (auto& t : log.tallies)
        if (t.kind == TallyKind::xid) tallied += t.count, tallies_of[{t.device, t.code}].push_back(&t);
    const bool capped = tallied > xids.events;
    std::set<std::pair<std::string, int>> escalated;
    for (auto& [key, events] : xids.by_gpu_code) {
        auto& [pci, code] = key;
        auto esc = policy.escalation(code);
        if (!esc || events.times.size() < esc->repeats) continue;
        // The events in time order (a log is, but for dmesg's interleaving CPUs): an index, only when needed.
        std::vector<uint32_t> order;
        auto at = [&](size_t k) -> size_t { return order.empty() ? k : order[k]; };
        auto time = [&](size_t k) { return events.times[at(k)]; };
        if (events.timed && !std::is_sorted(events.times.begin(), events.times.end())) {
            order.resize(events.times.size());
            for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
            std::stable_sort(order.begin(), order.end(),
                             [&](uint32_t a, uint32_t b) { return events.times[a] < events.times[b]; });
        }
        // Without times, every event is in the window the log covers (the current boot, or --since).
        size_t count = events.times.size(), first = 0, last = count - 1;
        bool found = !events.timed;
        if (events.timed)
            for (size_t i = 0, j = 0; j < count; ++j) {
                while (time(j) - time(i) > esc->within_s) ++i;
                if (j - i + 1 >= esc->repeats) first = i, last = j, found = true;  // the latest such run
            }
        if (!found) continue;
        size_t n = last - first + 1;
        // A storm longer than its kept events: its tally proves more (below), where the kept tail would say only
        // "10000 times" beside a finding that counts 31034. Only a key with one tally: an NVLink 5 Xid is tallied
        // per unit and link, each with a span of its own, and the tally path below judges each alone.
        if (auto t = tallies_of.find(key); capped && t != tallies_of.end() && t->second.size() == 1 &&
                                           t->second[0]->count > count &&
                                           tally_repeats(*t->second[0], *esc).certain >= n)
            continue;
        Finding f = xid_escalated(ctx, policy, code, *esc, pci, events.text(at(last)),
                                  n > 1 ? std::optional(events.text(at(first))) : std::nullopt);
        std::string span = events.timed ? fmt::format("{} times within {:.0f} s", n, time(last) - time(first))
                                        : fmt::format("{} times in the window (the log gives no times)", n);
        f.message = fmt::format("Xid {} ({}) repeats on {}: {} (threshold {} within {:.0f} s, bucket {}): escalated",
                                code, policy.rule(code).meaning, gpu_named(ctx, pci), span, esc->repeats, esc->within_s,
                                bucket_name(policy, code));
        out.push_back(std::move(f));
        escalated.insert(key);
    }
    // A storm longer than the kept events: the tally's count over its first-to-last span (tally_repeats). Only
    // when the events were capped: otherwise the events above are the whole story ("caused by" lines left out).
    if (!capped) return;
    for (auto& t : log.tallies) {
        if (t.kind != TallyKind::xid || escalated.count({t.device, t.code})) continue;
        auto esc = policy.escalation(t.code);
        if (!esc || t.count < esc->repeats) continue;
        auto [span, certain] = tally_repeats(t, *esc);
        if (certain < esc->repeats) continue;
        Finding f = xid_escalated(ctx, policy, t.code, *esc, t.device, t.last_text,
                                  t.first_text != t.last_text ? std::optional<std::string_view>(t.first_text)
                                                              : std::nullopt);
        f.message = fmt::format("Xid {} ({}) repeats on {}: {} times {}, so at least {} within {:.0f} s (threshold {}, "
                                "bucket {}): escalated",
                                t.code, policy.rule(t.code).meaning, gpu_named(ctx, t.device), t.count,
                                span ? fmt::format("in {:.0f} s", *span) : std::string("in the window"), certain,
                                esc->within_s, esc->repeats, bucket_name(policy, t.code));
        out.push_back(std::move(f));
    }
}

// The switch ports (links) a report's lines name, as ", on link 28" or ", on links 24, 25, 28".
std::string links_text(std::initializer_list<const KernelLogTally*> tallies) {
    std::set<int> links;
    for (auto* t : tallies)
        if (t) links.insert(t->links.begin(), t->links.end());
    if (links.empty()) return {};
    std::string out;
    for (int n : links) out += (out.empty() ? "" : ", ") + std::to_string(n);
    return fmt::format(", on link{} {}", links.size() > 1 ? "s" : "", out);
}

// SXids, per switch and code: the report's lines say Fatal or Non-fatal; its "Severity N"/"Data" lines belong to
// it. A report whose lines state neither is still reported, with the policy's severity, and says so.
void check_sxids(const CheckContext& ctx, const XidPolicy& policy, std::vector<Finding>& out) {
    const auto& log = ctx.snapshot.kernel_log;
    struct Report {
        const KernelLogTally* fatal = nullptr;
        const KernelLogTally* nonfatal = nullptr;
        const KernelLogTally* unstated = nullptr;
        const KernelLogTally* detail = nullptr;
    };
    std::map<std::pair<std::string, int>, Report> reports;
    std::vector<std::pair<std::string, int>> order;
    for (auto& t : log.tallies) {
        if (!is_sxid(t.kind)) continue;
        auto key = std::make_pair(t.device, t.code);
        if (!reports.count(key)) order.push_back(key);
        Report& r = reports[key];
        if (t.kind == TallyKind::sxid_fatal) r.fatal = &t;
        else if (t.kind == TallyKind::sxid_nonfatal) r.nonfatal = &t;
        else if (t.kind == TallyKind::sxid_unstated) r.unstated = &t;
        else r.detail = &t;
    }
    for (auto& key : order) {
        const Report& r = reports[key];
        auto& [pci, code] = key;
        const XidRule& sxid = policy.sxid(code);
        bool known = policy.knows_sxid(code);
        const KernelLogTally* main = r.fatal ? r.fatal : r.nonfatal ? r.nonfatal : r.unstated ? r.unstated : r.detail;
        Severity severity = r.fatal ? Severity::error : sxid.severity;
        std::string stated = r.fatal      ? "Fatal"
                             : r.nonfatal ? "Non-fatal"
                                          : "no severity stated in its lines";
        Finding f = rule("kernel_log.sxid").finding(severity, {});
        if (!pci.empty()) f.subjects.push_back(GpuRef{{}, pci, SubjectKind::nvswitch});
        std::string name = main->module.empty() ? std::string("NVSwitch") : "NVSwitch " + main->module;
        std::string what = known ? sxid.meaning : "not in the SXid policy";
        if (known && !sxid.sxid_class.empty()) what += "; NVIDIA: " + sxid.sxid_class;
        f.message = fmt::format("{} ({}) reported SXid {} ({}), {}{}: {}", name, pci.empty() ? "address not stated" : pci,
                                code, what, stated, links_text({r.fatal, r.nonfatal, r.unstated, r.detail}), first_last(*main));
        if (r.fatal && r.nonfatal) f.message += fmt::format("; also non-fatal {} time(s)", r.nonfatal->count);
        add_occurrences(f, log.source, *main);
        if (r.detail && r.detail != main) f.evidence.push_back({log.source, r.detail->last_text});
        f.evidence.push_back({"xid policy " + policy.version,
                              fmt::format("SXid {} {} ({})", code, to_string(sxid.severity),
                                          known ? sxid.origin : "default for unlisted SXids")});
        // A fatal report of a code the policy calls less than an error: the drain comes first, then its action.
        bool drain_first = r.fatal && sxid.severity != Severity::error;
        f.next_step = drain_first ? "Drain the node: a fatal SXid breaks NVLink traffic through the switch. Reset the "
                                    "NVSwitches and GPUs (a reboot does it), restart nvidia-fabricmanager; then: " +
                                        sxid.action
                                  : sxid.action;
        out.push_back(std::move(f));
    }
}

void check_fallen_off(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& log = ctx.snapshot.kernel_log;
    for (auto& t : log.tallies) {
        if (t.kind != TallyKind::fallen_off_bus) continue;
        Finding f = rule("kernel_log.fallen_off_bus").finding({});
        if (!t.device.empty()) f.subjects.push_back(ctx.gpu(t.device));
        f.message = fmt::format("{} fell off the bus: it stopped answering on PCIe ({})", name_device(ctx, t.device),
                                first_last(t));
        add_occurrences(f, log.source, t);
        if (const PciDevice* d = t.device.empty() ? nullptr : find_pci_device(ctx.snapshot.pcie, t.device);
            d && d->config_unreadable)
            f.evidence.push_back({"/sys/bus/pci/devices/" + t.device + "/config", "reads 0xffff (still off the bus)"});
        f.next_step = "Drain the node and power-cycle it (a GPU off the bus cannot be reset in place); if it happens "
                      "again on the same slot, check the riser, power cables and thermals, then replace the card.";
        out.push_back(std::move(f));
    }
}

void check_aer(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& log = ctx.snapshot.kernel_log;
    for (auto& t : log.tallies) {
        bool corrected = t.kind == TallyKind::aer_corrected;
        if (!corrected && t.kind != TallyKind::aer_nonfatal && t.kind != TallyKind::aer_fatal) continue;
        Finding f = (corrected ? rule("kernel_log.aer_corrected") : rule("kernel_log.aer_uncorrected")).finding({});
        f.subjects = gpus_at_or_below(ctx, t.device);
        std::string kind = corrected                        ? "corrected"
                           : t.kind == TallyKind::aer_fatal ? "uncorrectable (fatal)"
                                                            : "uncorrectable (non-fatal)";
        f.message = fmt::format("PCIe AER {} error on {}: {}", kind, name_device(ctx, t.device), first_last(t));
        if (!is_gpu(ctx.snapshot, t.device) && !f.subjects.empty())
            f.message += fmt::format("; it feeds {}", describe(f.subjects.front()));
        add_occurrences(f, log.source, t);
        f.next_step = corrected
                          ? "Corrected errors are retried by the link; if they keep growing, check the link width and "
                            "speed (gpudx pcie findings), reseat the card or riser, and update the BIOS."
                          : "Drain the GPUs behind this device; an uncorrectable PCIe error can corrupt transfers or "
                            "take the GPU off the bus. Reseat or replace the card or riser, check `gpudx diagnose` "
                            "pcie findings, and reboot.";
        out.push_back(std::move(f));
    }
}

void check_iommu(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& log = ctx.snapshot.kernel_log;
    for (auto& t : log.tallies) {
        if (t.kind != TallyKind::iommu_fault) continue;
        bool gpu = !t.device.empty() && is_gpu(ctx.snapshot, t.device);
        // A GPU whose DMA the IOMMU blocked has lost data (its job fails or hangs); another device's fault
        // matters to that device.
        Finding f = rule("kernel_log.iommu_fault").finding(gpu ? Severity::error : Severity::warning, {});
        if (gpu) f.subjects.push_back(ctx.gpu(t.device));
        f.message = fmt::format("IOMMU blocked DMA from {}: {}", name_device(ctx, t.device), first_last(t));
        add_occurrences(f, log.source, t);
        f.next_step = gpu ? "GPU DMA to an address the IOMMU does not map: with peer-to-peer or GPUDirect, run "
                            "the IOMMU in passthrough (iommu=pt, or intel_iommu=off / amd_iommu=off where policy "
                            "allows) or disable ACS on the switches; otherwise collect `nvidia-bug-report.sh`."
                          : "Check the device's driver and firmware; IOMMU faults from it are its own DMA bugs.";
        out.push_back(std::move(f));
    }
}

bool nvidia_loaded(const Snapshot& s) {
    return std::any_of(s.module.loaded.begin(), s.module.loaded.end(), [](auto& m) { return m.name == "nvidia"; });
}

void check_module_signatures(const CheckContext& ctx, const std::string& lockdown_line, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    const auto& log = s.kernel_log;
    auto* module_status = s.collector(Collector::module);
    bool module_known = module_status && module_status->state == CollectorState::ok;
    for (auto& t : log.tallies) {
        if (t.kind == TallyKind::module_refused) {
            bool names_nvidia = t.module == "nvidia";
            bool nvidia_missing = module_known && !nvidia_loaded(s);
            Finding f =
                rule("module.signature_refused")
                    .finding((names_nvidia || nvidia_missing || !module_known) ? Severity::error : Severity::warning,
                             {});
            f.message = fmt::format("the kernel refused to load an unsigned or untrusted module ({})", first_last(t));
            if (names_nvidia) f.message += "; the line names the nvidia module";
            else if (nvidia_missing) f.message += "; the nvidia module is not loaded, so it is the likely one";
            else if (module_known) f.message += "; nvidia is loaded, so another module was refused";
            add_occurrences(f, log.source, t);
            if (!lockdown_line.empty()) f.evidence.push_back({log.source, lockdown_line});
            if (module_known) f.evidence.push_back({"/proc/modules", nvidia_loaded(s) ? "nvidia loaded" : "nvidia not loaded"});
            f.next_step = "Secure Boot or kernel lockdown only loads modules signed with a trusted key: enroll the "
                          "key DKMS signs with (`mokutil --import /var/lib/dkms/mok.pub`, confirm at the next boot), "
                          "or install the distribution's pre-signed NVIDIA modules; then `modprobe nvidia`.";
            out.push_back(std::move(f));
        } else if (t.kind == TallyKind::module_unsigned) {
            Finding f = rule("module.unsigned_loaded").finding({});
            f.message = fmt::format("module {} loaded without a valid signature and tainted the kernel ({})",
                                    t.module.empty() ? std::string("(unnamed)") : t.module, first_last(t));
            add_occurrences(f, log.source, t);
            f.next_step = "Nothing is broken now; with Secure Boot enabled this module would be refused. Sign it "
                          "(DKMS with an enrolled MOK) before turning Secure Boot on.";
            out.push_back(std::move(f));
        }
    }
}

// The fallback (rules/reference/component_lines.hpp): what no rule explained, but a GPU component says failed. One
// group per component and device, fed the lines no signature or result code explained.
struct ComponentGroup {
    ComponentFailureLine what;
    size_t count = 0;
    KernelLogLine first, last;
};

struct ComponentGroups {
    std::vector<ComponentGroup> groups;
    // A storm repeats one line: the previous line's reading is reused when this one is the same bytes.
    std::string last_text;  // empty: none
    std::optional<ComponentFailureLine> last_what;

    void add(const KernelLogLine& line) {
        if (last_text.empty() || line.text != last_text) {
            last_what = component_failure_line(line.text);
            last_text = line.text;
        }
        if (!last_what) return;
        auto g = std::find_if(groups.begin(), groups.end(), [&](const ComponentGroup& x) {
            return x.what.component == last_what->component && x.what.pci == last_what->pci;
        });
        if (g == groups.end()) g = groups.insert(groups.end(), ComponentGroup{*last_what, 0, line, {}});
        ++g->count;
        g->last = line;
    }
};

void check_unexplained_component_lines(const CheckContext& ctx, const ComponentGroups& components,
                                       std::vector<Finding>& out) {
    const auto& log = ctx.snapshot.kernel_log;
    for (auto& g : components.groups) {
        Finding f;
        f.id = "kernel_log.gpu_component_error";
        f.layer = Layer::kernel_log;
        f.severity = Severity::warning;
        std::string where;
        if (!g.what.pci.empty()) {
            f.subjects.push_back(ctx.gpu(g.what.pci));
            where = " for " + describe(f.subjects.back());
        }
        const std::string& text = g.first.text;
        f.message = fmt::format("{} reported a failure (\"{}\"){} that gpudx has no rule for: \"{}\"{}", g.what.component,
                                g.what.word, where, text.size() > 240 ? text.substr(0, 240) + "..." : text,
                                g.count > 1 ? fmt::format(" ({} such lines, first at {}, last at {})", g.count,
                                                          when(g.first.monotonic_s, g.first.wall_time),
                                                          when(g.last.monotonic_s, g.last.wall_time))
                                            : "");
        f.evidence.push_back({log.source, g.first.text});
        if (g.count > 1 && g.last.text != g.first.text) f.evidence.push_back({log.source, g.last.text});
        f.next_step = fmt::format(
            "Read the lines around it in the kernel log (`dmesg -T | grep -i -C5 '{}'`) for what the {} was doing; if "
            "it repeats or work on that GPU fails, collect the vendor's report (nvidia-bug-report.sh, or "
            "amdgpu's `dmesg` with `rocm-smi --showall`) for its support. A line known to be harmless can be "
            "catalogued as an `ignore` signature in a site file (--signatures).",
            g.what.component, g.what.component);
        out.push_back(std::move(f));
    }
}

// The Xid rules judge Xid and SXid events only (the log's and NVML's): a text without any reads no policy.
bool has_xid_events(const Snapshot& s) {
    return !s.nvml_events.empty() || !s.kernel_log.xids.empty() ||
           std::any_of(s.kernel_log.tallies.begin(), s.kernel_log.tallies.end(),
                       [](const KernelLogTally& t) { return t.kind == TallyKind::xid || is_sxid(t.kind); });
}

}  // namespace

struct KernelLogLineRules::State {
    State(const DiagnoseOptions& options, bool list)
        : catalogue(options.signatures ? *options.signatures : builtin_signature_catalogue()),
          result_codes(options.result_codes),
          list_unrecognised(list),
          signatures(catalogue, [this](const KernelLogLine& l, bool recognised) { after_signatures(l, recognised); }) {}

    const SignatureCatalogue& catalogue;
    ResultCodeScan result_codes;
    bool list_unrecognised;
    std::vector<std::string> unrecognised;
    ComponentGroups components;
    std::string lockdown_line;  // the last line saying the kernel is locked down
    XidTimelines xids;
    SignatureScan signatures;   // last: its lines go on to the members above

    void before_signatures(const KernelLogLine& l) {
        if (l.text.find("locked down") != std::string::npos || l.text.find("Secure boot enabled") != std::string::npos)
            lockdown_line = l.text;
    }
    // The result codes on the lines no signature explained (a signature's wording is the closer one); then a GPU
    // component's failure line that neither explained is never passed in silence.
    void after_signatures(const KernelLogLine& l, bool recognised) {
        if (list_unrecognised && !recognised && is_unrecognised_driver_line(l)) unrecognised.push_back(l.text);
        if (recognised || result_codes.add(l.text)) return;
        components.add(l);
    }
};

KernelLogLineRules::KernelLogLineRules(const DiagnoseOptions& options, bool list_unrecognised)
    : state_(std::make_unique<State>(options, list_unrecognised)) {}
KernelLogLineRules::~KernelLogLineRules() = default;

void KernelLogLineRules::add(KernelLogLine line) {
    state_->before_signatures(line);
    state_->signatures.add(std::move(line));
}

void KernelLogLineRules::add_borrowed(const KernelLogLine& line) {
    state_->before_signatures(line);
    state_->signatures.add_borrowed(line);
}

void KernelLogLineRules::add_borrowed_xid(const XidEvent& event) { state_->xids.add(event); }

void KernelLogLineRules::finish() { state_->signatures.finish(); }

void check_kernel_log_text(const CheckContext& ctx, std::vector<Finding>& out, std::vector<std::string>* unrecognised,
                           KernelLogLineRules* lines) {
    const XidPolicy* policy = !has_xid_events(ctx.snapshot) ? nullptr
                              : ctx.options.xid_policy      ? ctx.options.xid_policy
                                                            : &builtin_xid_policy();
    // Whether or not the log could be read: NVML is the other witness.
    if (policy) check_nvml_xids(ctx, *policy, out);
    auto* st = ctx.snapshot.collector(Collector::kernel_log);
    if (!st || st->state != CollectorState::ok) return;
    std::optional<KernelLogLineRules> own;
    if (!lines) {
        lines = &own.emplace(ctx.options, unrecognised != nullptr);
        for (auto& l : ctx.snapshot.kernel_log.lines) lines->add_borrowed(l);
        for (auto& x : ctx.snapshot.kernel_log.xids) lines->add_borrowed_xid(x);
        lines->finish();
    }
    const KernelLogLineRules::State& read = *lines->state_;
    if (policy) {
        check_xids(ctx, *policy, out);
        check_xid_repeats(ctx, *policy, read.xids, out);
        check_sxids(ctx, *policy, out);
    }
    check_fallen_off(ctx, out);
    check_aer(ctx, out);
    check_iommu(ctx, out);
    check_module_signatures(ctx, read.lockdown_line, out);
    const std::string& source = ctx.snapshot.kernel_log.source;
    read.signatures.findings(ctx, source, out);
    read.result_codes.findings(source, out);
    check_unexplained_component_lines(ctx, read.components, out);
    if (unrecognised) *unrecognised = std::move(lines->state_->unrecognised);
}

std::vector<std::string> kernel_log_text_words(const SignatureCatalogue& catalogue) {
    std::vector<std::string> words = catalogue_gate_words(catalogue);
    for (auto& w : result_code_gate_words()) words.push_back(w);
    for (auto& w : component_gate_words()) words.push_back(w);
    return words;
}

void check_kernel_log(const CheckContext& ctx, std::vector<Finding>& out) { check_kernel_log_text(ctx, out, nullptr); }

constinit const RuleFamily kKernelLogFamily{"kernel_log", Layer::kernel_log, kRules, check_kernel_log};

}  // namespace gpudx
