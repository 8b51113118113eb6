// `gpudx xid CODE` explains one Xid code from the policy (NVIDIA's catalog entry, its buckets, gpudx's severity and
// next step, when it escalates); `gpudx xid --sxid CODE` an NVSwitch SXid; `gpudx xid --list` the whole policy.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/reference/xid_policy.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace gpudx::app {
namespace {

struct XidCmdOptions {
    std::string code;  // as typed: checked here, so "-1" and "99999999999" get a message that says what a code is
    bool list = false;
    bool sxid = false;
    std::string policy_file;
    std::string format = "text";
};

int parse_code(const std::string& text, bool sxid) {
    const char* what = sxid ? "SXid" : "Xid";
    bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    // Leading zeros aside, more than five digits is out of range; stoi cannot overflow on five.
    size_t significant = digits ? text.size() - std::min(text.find_first_not_of('0'), text.size()) : 0;
    int code = digits && significant <= 5 ? (significant == 0 ? 0 : std::stoi(text)) : -1;
    if (code < 1 || code > kMaxXidCode)
        throw UsageError{fmt::format("xid: \"{}\" is not an {} code: a code is a whole number from 1 to {}, as in "
                                     "\"NVRM: Xid (PCI:0000:00:06): 79, ...\"{}",
                                     text, what, kMaxXidCode, sxid ? " or \"SXid (PCI:0000:86:00.0): 12028, ...\"" : "")};
    return code;
}

nlohmann::json escalation_json(const std::optional<XidEscalation>& e) {
    if (!e) return nullptr;
    return {{"repeats", e->repeats}, {"within_s", e->within_s}, {"severity", to_string(e->severity)}, {"action", e->action}};
}

nlohmann::json rule_json(const XidPolicy& p, const XidRule& r, int code, bool known, bool sxid) {
    nlohmann::json j{{"code", code},         {"known", known},          {"meaning", r.meaning},
                     {"severity", to_string(r.severity)}, {"action", r.action}, {"origin", known ? r.origin : "default"}};
    if (!r.note.empty()) j["note"] = r.note;
    if (sxid) {
        j["name"] = r.name;
        j["class"] = r.sxid_class;
        return j;
    }
    j["causes"] = r.causes;
    j["mnemonic"] = r.mnemonic;
    j["description"] = r.description;
    j["immediate"] = r.immediate;
    j["investigatory"] = r.investigatory;
    j["generations"] = r.generations;
    const XidBucket* b = known ? p.immediate_bucket(code) : nullptr;
    j["immediate_meaning"] = b ? b->meaning : "";
    j["recovery"] = b ? b->recovery : "";
    j["escalation"] = escalation_json(known ? p.escalation(code) : std::nullopt);
    return j;
}

std::string explain(const XidPolicy& p, int code, bool sxid) {
    const char* what = sxid ? "SXid" : "Xid";
    bool known = sxid ? p.knows_sxid(code) : p.knows(code);
    const XidRule& r = sxid ? p.sxid(code) : p.rule(code);
    std::string out;
    if (!known) {
        out += fmt::format("{} {}: unknown to this policy.\n", what, code);
        out += fmt::format("  default treatment: {}\n", to_string(r.severity));
        out += fmt::format("  action:   {}\n", r.action);
        out += fmt::format("  policy:   {} (default for unlisted codes)\n", p.version);
        return out;
    }
    out += fmt::format("{} {}: {}\n", what, code, r.meaning);
    if (!r.mnemonic.empty()) out += fmt::format("  NVIDIA:   {} \"{}\"\n", r.mnemonic, r.description);
    if (sxid && !r.name.empty())
        out += fmt::format("  NVIDIA:   \"{}\", {}\n", r.name, r.sxid_class.empty() ? "class not given" : r.sxid_class);
    if (!r.causes.empty()) out += fmt::format("  causes:   {} (NVIDIA's older Xid listing)\n", join_strings(r.causes, ", "));
    if (!sxid) {
        const XidBucket* b = p.immediate_bucket(code);
        std::string immediate = r.immediate.empty() ? std::string("none given") : r.immediate;
        if (b) immediate += " (" + b->meaning + ")";
        out += fmt::format("  buckets:  immediate {}; investigatory {}\n", immediate,
                           r.investigatory.empty() ? std::string("none given") : r.investigatory);
        if (!r.generations.empty()) out += fmt::format("  GPUs:     {}\n", join_strings(r.generations, ", "));
    }
    out += fmt::format("  severity: {}\n", to_string(r.severity));
    out += fmt::format("  action:   {}\n", r.action);
    if (!r.note.empty()) out += fmt::format("  note:     {}\n", r.note);
    if (!sxid) {
        if (auto e = p.escalation(code))
            out += fmt::format("  repeats:  {} on one GPU within {:.0f} s escalate to {}: {}\n", e->repeats, e->within_s,
                               to_string(e->severity), e->action);
        else
            out += "  repeats:  never escalate\n";
    }
    out += fmt::format("  policy:   {} ({})\n", p.version, r.origin);
    return out;
}

std::string list_text(const XidPolicy& p) {
    std::string out = fmt::format("Xid policy {}\n\n{:>5}  {:<8} {:<20} {:<24} {}\n", p.version, "code", "severity",
                                  "immediate", "investigatory", "meaning");
    for (auto& [code, r] : p.rules) {
        out += fmt::format("{:>5}  {:<8} {:<20} {:<24} {}", code, to_string(r.severity), r.immediate.empty() ? "-" : r.immediate,
                           r.investigatory.empty() ? "-" : r.investigatory, r.meaning);
        if (r.origin != "built-in") out += fmt::format("  [{}]", r.origin);
        out += "\n";
    }
    out += fmt::format("{:>5}  {:<8} {:<20} {:<24} {}\n", "other", to_string(p.fallback.severity), "-", "-",
                       "codes not listed");
    out += fmt::format("\nNVSwitch SXids\n\n{:>5}  {:<8} {:<12} {}\n", "code", "severity", "class",
                       "meaning (a Fatal line is always an error)");
    for (auto& [code, r] : p.sxids) {
        out += fmt::format("{:>5}  {:<8} {:<12} {}", code, to_string(r.severity), r.sxid_class.empty() ? "-" : r.sxid_class,
                           r.meaning);
        if (r.origin != "built-in") out += fmt::format("  [{}]", r.origin);
        out += "\n";
    }
    out += fmt::format("{:>5}  {:<8} {}\n", "other", to_string(p.sxid_fallback.severity), "SXids not listed");
    return out;
}

nlohmann::json list_json(const XidPolicy& p) {
    nlohmann::json j{{"policy_version", p.version}, {"codes", nlohmann::json::array()}, {"sxids", nlohmann::json::array()}};
    for (auto& [code, r] : p.rules) j["codes"].push_back(rule_json(p, r, code, true, false));
    j["default"] = rule_json(p, p.fallback, 0, false, false);
    for (auto& [code, r] : p.sxids) j["sxids"].push_back(rule_json(p, r, code, true, true));
    j["sxid_default"] = rule_json(p, p.sxid_fallback, 0, false, true);
    j["buckets"] = nlohmann::json::object();
    for (auto& [name, b] : p.buckets) {
        nlohmann::json bj{{"meaning", b.meaning}};
        if (b.implies) bj["implies"] = to_string(*b.implies);
        if (!b.recovery.empty()) bj["recovery"] = b.recovery;
        if (b.escalation.repeats > 0)
            bj["escalation"] = escalation_json(b.escalation);
        j["buckets"][name] = std::move(bj);
    }
    return j;
}

int run_xid(const XidCmdOptions& o) {
    XidPolicy loaded;
    const XidPolicy* policy = &builtin_xid_policy();
    if (!o.list && o.code.empty()) throw UsageError{"xid: give a code (`gpudx xid 79`, `gpudx xid --sxid 12028`) or --list"};
    std::optional<int> code;
    if (!o.list) code = parse_code(o.code, o.sxid);
    if (!o.policy_file.empty()) {
        auto p = load_xid_policy_file(o.policy_file);
        if (!p) throw UsageError{p.error().message};
        loaded = std::move(*p);
        policy = &loaded;
    }
    std::string text;
    if (o.format == "json") {
        nlohmann::json j;
        if (o.list) {
            j = list_json(*policy);
        } else {
            bool known = o.sxid ? policy->knows_sxid(*code) : policy->knows(*code);
            const XidRule& r = o.sxid ? policy->sxid(*code) : policy->rule(*code);
            j = {{"policy_version", policy->version}};
            j[o.sxid ? "sxid" : "xid"] = rule_json(*policy, r, *code, known, o.sxid);
        }
        text = j.dump(2) + "\n";
    } else {
        text = o.list ? list_text(*policy) : explain(*policy, *code, o.sxid);
    }
    write_output("", text, o.format == "json" ? OutputKind::data : OutputKind::text);
    return 0;
}

CommandRegistrar register_xid{
    {"xid", "Explain an NVIDIA Xid or NVSwitch SXid code: NVIDIA's buckets, severity, action (policy versioned and overridable)", 60,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<XidCmdOptions>();
         auto* code = cmd.add_option("code", o->code,
                                     "The code, 1 to 99999, as in \"NVRM: Xid (PCI:0000:00:06): 79, ...\" (with --sxid: "
                                     "\"nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, ...\")")
                          ->type_name("CODE");
         cmd.add_flag("--sxid", o->sxid, "The code is an NVSwitch SXid");
         cmd.add_flag("--list", o->list, "List every Xid and SXid the policy knows, with NVIDIA's buckets")->excludes(code);
         cmd.add_option("--xid-policy", o->policy_file,
                        "Site policy (TOML, same format as data/xid-policy.toml); its codes replace the built-in ones")
             ->type_name("FILE");
         cmd.add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         cmd.footer("Examples:\n  gpudx xid 79\n  gpudx xid 154 --format json\n  gpudx xid --sxid 20034\n"
                    "  gpudx xid --list\n  gpudx xid 63 --xid-policy /etc/gpudx/xid-policy.toml");
         return [o] { return run_xid(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app
