#include "rules/xid_policy.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/toml_text.hpp"

namespace gpudx {

namespace {

// Kept byte-for-byte equal to data/xid-policy.toml (tests/unit/test_xid_policy.cpp compares them), so the
// single binary carries its policy to nodes that have no data directory.
constexpr std::string_view kBuiltinPolicy = R"gpudx_xid_policy(
# gpudx Xid policy: what each NVIDIA Xid code means, how severe gpudx calls it, and what to do.
#
# The binary carries this exact text as its built-in default (a unit test keeps the two equal).
# `gpudx diagnose --xid-policy FILE` and `gpudx xid --xid-policy FILE` read a site policy in this
# same format; its entries replace the built-in ones code by code, and the rest stay built-in.
# Keys: version (required), [default] for codes not listed, [xid.<code>] with meaning, severity
# (info, warning or error), action, and an optional note. Unknown keys are errors.
# Where gpudx differs from DCGM, Azure's health checks or the Kubernetes device plugin, the
# note says so; docs/kernel-log.md explains why.

version = "2026.11.1"

[default]
severity = "warning"
action = "This code is not in gpudx's policy. Look it up in NVIDIA's Xid catalog for the installed driver branch; if it repeats on one GPU, drain that GPU and collect `nvidia-bug-report.sh`."

[xid.8]
meaning = "GPU stopped processing (channel idle timeout)"
severity = "warning"
action = "Restart the application. If it repeats on the same GPU with different jobs, reset the GPU and contact NVIDIA support with a bug report."

[xid.11]
meaning = "Invalid or corrupted push buffer stream"
severity = "warning"
action = "Restart the application; check the CUDA and driver versions it was built for."

[xid.12]
meaning = "Driver error handling a GPU exception"
severity = "warning"
action = "Restart the application; if it repeats, collect `nvidia-bug-report.sh` and contact NVIDIA support."

[xid.13]
meaning = "Graphics engine exception (usually an application fault: out-of-range access, illegal instruction)"
severity = "warning"
action = "Debug the application (compute-sanitizer, CUDA_LAUNCH_BLOCKING=1). Suspect the GPU only if different applications hit it on this GPU and not on others."
note = "The Kubernetes device plugin ignores 13 as an application error; gpudx still shows it as a warning."

[xid.31]
meaning = "GPU memory page fault (MMU fault; usually an illegal address in the application)"
severity = "warning"
action = "Debug the application (compute-sanitizer). If several applications fault on this GPU only, reset it and run `gpudx accept`."
note = "The Kubernetes device plugin ignores 31 as an application error; gpudx still shows it as a warning."

[xid.32]
meaning = "Invalid or corrupted push buffer stream reported by the DMA controller (often PCIe signal quality)"
severity = "warning"
action = "Check this GPU's PCIe link (gpudx pcie findings, AER counters); reseat the card or riser if it repeats."

[xid.38]
meaning = "Driver firmware error"
severity = "warning"
action = "Restart the application; if it repeats, update the driver and contact NVIDIA support."

[xid.43]
meaning = "GPU stopped processing: the application hit a fault and was stopped; the GPU stays healthy"
severity = "info"
action = "Look at the application's own error; no action on the node."
note = "Ignored by the Kubernetes device plugin; DCGM does not treat it as fatal either."

[xid.44]
meaning = "Graphics engine fault during context switch"
severity = "error"
action = "Drain the GPU, reset it (nvidia-smi -r -i <UUID>) and run `gpudx accept`; contact NVIDIA support if it repeats."

[xid.45]
meaning = "Preemptive cleanup after an earlier error, or the application was stopped (Ctrl-C, kill, GPU reset)"
severity = "info"
action = "Look at the Xid logged just before it on the same GPU; 45 alone needs no action."
note = "Ignored by the Kubernetes device plugin."

[xid.48]
meaning = "Double-bit (uncorrectable) ECC error"
severity = "error"
action = "Drain the GPU and reset it (nvidia-smi -r -i <UUID>) or reboot; check retired pages / remapped rows (gpudx driver findings). Replace the card if uncorrectable errors recur."
note = "Fatal in DCGM as well."

[xid.54]
meaning = "Auxiliary power is not connected to the GPU board"
severity = "error"
action = "Power the node down and connect the board's auxiliary power cables."

[xid.56]
meaning = "Display engine error"
severity = "warning"
action = "Display path only; update the driver if it repeats."

[xid.57]
meaning = "Error programming the video memory interface"
severity = "error"
action = "Drain the GPU and reset it; if it repeats, contact NVIDIA support for a replacement."

[xid.58]
meaning = "Unstable video memory interface detected"
severity = "error"
action = "Drain the GPU and reset it; if it repeats, contact NVIDIA support for a replacement."

[xid.61]
meaning = "Internal micro-controller breakpoint or warning"
severity = "warning"
action = "Watch for a 62 on the same GPU; collect `nvidia-bug-report.sh` if it repeats."

[xid.62]
meaning = "Internal micro-controller halt"
severity = "error"
action = "Drain the GPU, reset it or reboot the node, and collect `nvidia-bug-report.sh` for NVIDIA support."

[xid.63]
meaning = "ECC page retirement or row remapping recorded (takes effect at the next GPU reset)"
severity = "warning"
action = "Reset the GPU at the next idle window so the retirement or remap takes effect; watch remapped rows and retired pages for growth."
note = "Fatal in Azure's health checks; a warning in DCGM. gpudx: the memory repaired itself and the card keeps its capacity, so it asks for a reset, not a drain."

[xid.64]
meaning = "ECC page retirement or row remapping failed"
severity = "error"
action = "Drain the GPU and reset it; if remapping keeps failing (rows exhausted), replace the card."

[xid.68]
meaning = "Video decoder (NVDEC) exception"
severity = "warning"
action = "Affects video decode only. Restart the application; if it repeats on this GPU, reset the GPU."
note = "Fatal in Azure's health checks, ignored by the Kubernetes device plugin. gpudx: compute engines are unaffected, so it warns rather than drains, but does not hide it."

[xid.69]
meaning = "Graphics engine class error"
severity = "warning"
action = "Restart the application; if it repeats, update the driver and contact NVIDIA support."

[xid.74]
meaning = "NVLink error"
severity = "error"
action = "Drain the GPUs on both ends of the link, reset them (or reboot), check `nvidia-smi nvlink -s` and the fabric manager; reseat or replace the bridge or board if it recurs."
note = "Fatal in DCGM as well."

[xid.79]
meaning = "GPU has fallen off the bus (it no longer answers on PCIe)"
severity = "error"
action = "Drain the node and reboot it; the GPU cannot be reset in place. If it recurs, check the slot, riser, power and thermals, then replace the card."
note = "Fatal in DCGM as well."

[xid.81]
meaning = "VGA subsystem error"
severity = "warning"
action = "Display path only; update the driver if it repeats."

[xid.92]
meaning = "High single-bit ECC error rate"
severity = "warning"
action = "Corrected errors, no data lost. Watch this GPU for 48, 63, 94 or 95; schedule a reset and memory test (`gpudx accept`) at the next window."
note = "Fatal in Azure's health checks; a warning in DCGM. gpudx: the errors were corrected, so it is a predictor, not a failure."

[xid.93]
meaning = "Non-fatal violation of the provisioned InfoROM wear limit"
severity = "warning"
action = "Plan a card replacement with NVIDIA support."

[xid.94]
meaning = "Contained ECC error: the application using the bad memory was stopped; others are unaffected"
severity = "warning"
action = "Restart the stopped application. Reset the GPU when it is idle so the pending row remap applies; if 94 repeats on this GPU or a 95 follows, drain it."
note = "A warning in DCGM; critical in Azure's health checks and others. gpudx: containment worked and the GPU keeps serving other jobs, so it warns and asks for a reset at the next window."

[xid.95]
meaning = "Uncontained ECC error: every application on the GPU is affected"
severity = "error"
action = "Drain the GPU and reset it (nvidia-smi -r -i <UUID>) or reboot; check remapped rows; replace the card if it recurs."
note = "Fatal in DCGM as well."

[xid.109]
meaning = "Context switch timeout"
severity = "warning"
action = "Restart the application; if it repeats with different applications on this GPU, reset the GPU."
note = "Ignored by the Kubernetes device plugin as an application error."

[xid.110]
meaning = "Security fault"
severity = "error"
action = "Drain the GPU, reboot the node, and contact NVIDIA support with a bug report."

[xid.119]
meaning = "GSP RPC timeout: the GPU System Processor stopped answering the driver"
severity = "error"
action = "Drain the GPU and reset it, or reboot the node; update the driver if it repeats."
note = "Fatal in DCGM as well."

[xid.120]
meaning = "GSP error"
severity = "error"
action = "Drain the GPU and reset it, or reboot the node; collect `nvidia-bug-report.sh` for NVIDIA support."
note = "Fatal in DCGM as well."

[xid.121]
meaning = "C2C (chip-to-chip) link error"
severity = "error"
action = "Drain the node and reboot it; contact NVIDIA support if it recurs."

[xid.122]
meaning = "SPI PMU RPC read failure"
severity = "warning"
action = "Collect `nvidia-bug-report.sh`; contact NVIDIA support if it repeats."

[xid.123]
meaning = "SPI PMU RPC write failure"
severity = "warning"
action = "Collect `nvidia-bug-report.sh`; contact NVIDIA support if it repeats."

[xid.124]
meaning = "SPI PMU RPC erase failure"
severity = "warning"
action = "Collect `nvidia-bug-report.sh`; contact NVIDIA support if it repeats."

[xid.125]
meaning = "InfoROM file-system failure"
severity = "warning"
action = "Collect `nvidia-bug-report.sh`; contact NVIDIA support."

[xid.137]
meaning = "NVLink FLA privilege error"
severity = "warning"
action = "Check the application's use of fabric memory; contact NVIDIA support if it repeats."

[xid.140]
meaning = "Unrecovered ECC error"
severity = "error"
action = "Drain the GPU and reset it or reboot; replace the card if it recurs."
note = "Fatal in DCGM as well."

[xid.143]
meaning = "GPU initialization failure"
severity = "error"
action = "Reboot the node; if the GPU still fails to initialise, check power and seating, then replace it."

[xid.144]
meaning = "NVLink SAW error"
severity = "error"
action = "Drain the GPU, reset it or reboot, and check NVLink and fabric manager health."

[xid.145]
meaning = "NVLink RLW error"
severity = "error"
action = "Drain the GPU, reset it or reboot, and check NVLink and fabric manager health."

[xid.146]
meaning = "NVLink TLW error"
severity = "error"
action = "Drain the GPU, reset it or reboot, and check NVLink and fabric manager health."

[xid.147]
meaning = "NVLink TREX error"
severity = "error"
action = "Drain the GPU, reset it or reboot, and check NVLink and fabric manager health."

[xid.148]
meaning = "NVLink NVLPW_CTRL error"
severity = "error"
action = "Drain the GPU, reset it or reboot, and check NVLink and fabric manager health."

[xid.149]
meaning = "NVLink NETIR error"
severity = "error"
action = "Drain the GPU, reset it or reboot, and check NVLink and fabric manager health."

[xid.150]
meaning = "NVLink MSE error"
severity = "error"
action = "Drain the GPU, reset it or reboot, and check NVLink and fabric manager health."

[xid.154]
meaning = "GPU recovery action changed (the driver now asks for a reset, a reboot or a drain)"
severity = "error"
action = "Read the action in the log line (or NVML's recovery action) and carry it out: GPU reset, node reboot, or drain and reset."
)gpudx_xid_policy";

constexpr const char* kBuiltinOrigin = "built-in";

std::string where(const std::string& origin, const toml::source_region& r) {
    return r.begin.line > 0 ? fmt::format("{}:{}", origin, r.begin.line) : origin;
}

Result<std::string> required_string(const toml::table& t, std::string_view key, const std::string& origin,
                                    const std::string& context) {
    const toml::node* n = t.get(key);
    if (!n) return fail(fmt::format("{}: {} has no `{}`", where(origin, t.source()), context, key), origin);
    auto v = n->value<std::string>();
    if (!v) return fail(fmt::format("{}: `{}` in {} must be a string", where(origin, n->source()), key, context), origin);
    return *v;
}

// Reads one rule table ([default] or [xid.N]); `allow_meaning` is false for [default].
Result<XidRule> read_rule(const toml::table& t, int code, const std::string& origin, const std::string& context,
                          bool require_meaning) {
    static constexpr std::string_view kKeys[] = {"meaning", "severity", "action", "note"};
    for (auto&& [key, node] : t) {
        if (std::find(std::begin(kKeys), std::end(kKeys), key.str()) == std::end(kKeys))
            return fail(fmt::format("{}: unknown key `{}` in {} (allowed: meaning, severity, action, note)",
                                    where(origin, key.source()), key.str(), context),
                        origin);
    }
    XidRule r;
    r.code = code;
    r.origin = origin;
    if (require_meaning) {
        auto m = required_string(t, "meaning", origin, context);
        if (!m) return std::unexpected(m.error());
        r.meaning = *m;
    } else if (auto m = t["meaning"].value<std::string>()) {
        r.meaning = *m;
    }
    auto sev = required_string(t, "severity", origin, context);
    if (!sev) return std::unexpected(sev.error());
    auto parsed = parse_severity(*sev);
    if (!parsed)
        return fail(fmt::format("{}: severity \"{}\" in {} is not info, warning or error",
                                where(origin, t.get("severity")->source()), *sev, context),
                    origin);
    r.severity = *parsed;
    auto action = required_string(t, "action", origin, context);
    if (!action) return std::unexpected(action.error());
    r.action = *action;
    if (const toml::node* n = t.get("note")) {
        auto v = n->value<std::string>();
        if (!v) return fail(fmt::format("{}: `note` in {} must be a string", where(origin, n->source()), context), origin);
        r.note = *v;
    }
    return r;
}

// A policy file may be partial (a site overriding a few codes): `complete` asks for [default] too.
Result<XidPolicy> parse_policy(std::string_view text, const std::string& origin, bool complete) {
    if (auto bad = check_toml_text(text))
        return fail(fmt::format("{}:{}:{}: {}", origin, bad->line, bad->column, bad->message), origin);
    toml::table root;
    // Fault-isolation boundary: a reader of a third-party format (toml++ reports a syntax error by throwing).
    try {
        root = toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        return fail(fmt::format("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column,
                                e.description()),
                    origin);
    }
    XidPolicy p;
    for (auto&& [key, node] : root) {
        if (key != "version" && key != "default" && key != "xid")
            return fail(fmt::format("{}: unknown key `{}` (allowed: version, default, xid)", where(origin, key.source()),
                                    key.str()),
                        origin);
    }
    const toml::node* version = root.get("version");
    if (!version) return fail(fmt::format("{}: no `version = \"...\"`; a policy must say which version it is", origin), origin);
    auto v = version->value<std::string>();
    if (!v || v->empty())
        return fail(fmt::format("{}: `version` must be a non-empty string", where(origin, version->source())), origin);
    p.version = *v;
    if (const toml::node* d = root.get("default")) {
        const toml::table* t = d->as_table();
        if (!t) return fail(fmt::format("{}: `default` must be a table", where(origin, d->source())), origin);
        auto r = read_rule(*t, 0, origin, "[default]", false);
        if (!r) return std::unexpected(r.error());
        p.fallback = *r;
    } else if (complete) {
        return fail(fmt::format("{}: no [default] table for codes the policy does not list", origin), origin);
    }
    if (const toml::node* x = root.get("xid")) {
        const toml::table* xt = x->as_table();
        if (!xt) return fail(fmt::format("{}: `xid` must hold tables like [xid.79]", where(origin, x->source())), origin);
        for (auto&& [key, node] : *xt) {
            std::string name(key.str());
            int code = 0;
            bool numeric = !name.empty() && name.size() <= 6 && name.find_first_not_of("0123456789") == std::string::npos;
            if (numeric) code = std::stoi(name);
            if (!numeric || code <= 0)
                return fail(fmt::format("{}: [xid.{}]: an Xid code must be a positive number", where(origin, key.source()),
                                        name),
                            origin);
            const toml::table* t = node.as_table();
            if (!t) return fail(fmt::format("{}: xid.{} must be a table", where(origin, node.source()), name), origin);
            auto r = read_rule(*t, code, origin, "[xid." + name + "]", true);
            if (!r) return std::unexpected(r.error());
            p.rules[code] = std::move(*r);
        }
    }
    return p;
}

}  // namespace

std::optional<Severity> parse_severity(std::string_view s) {
    if (s == "info") return Severity::info;
    if (s == "warning") return Severity::warning;
    if (s == "error") return Severity::error;
    return std::nullopt;
}

const XidRule& XidPolicy::rule(int code) const {
    auto it = rules.find(code);
    return it == rules.end() ? fallback : it->second;
}

std::string_view builtin_xid_policy_text() { return kBuiltinPolicy.substr(kBuiltinPolicy.starts_with('\n') ? 1 : 0); }

const XidPolicy& builtin_xid_policy() {
    static const XidPolicy policy = [] {
        auto p = parse_policy(builtin_xid_policy_text(), kBuiltinOrigin, true);
        // The text is fixed at build time and covered by a unit test; an empty policy is the safe fallback.
        return p ? std::move(*p) : XidPolicy{"invalid built-in", {}, {}};
    }();
    return policy;
}

Result<XidPolicy> parse_xid_policy(std::string_view text, const std::string& origin) {
    return parse_policy(text, origin, true);
}

Result<XidPolicy> load_xid_policy_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(fmt::format("{}: cannot read the Xid policy file", path), path);
    std::ostringstream ss;
    ss << in.rdbuf();
    auto site = parse_policy(ss.str(), path, false);
    if (!site) return site;
    XidPolicy merged = builtin_xid_policy();
    merged.version = fmt::format("{} ({}) over built-in {}", site->version, path, merged.version);
    if (!site->fallback.action.empty()) merged.fallback = site->fallback;
    for (auto& [code, r] : site->rules) merged.rules[code] = r;
    return merged;
}

}  // namespace gpudx
