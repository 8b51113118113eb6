// `gpudx xid CODE` explains one Xid code from the policy; `gpudx xid --list` lists the whole policy.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/common.hpp"
#include "rules/xid_policy.hpp"
#include "core/error.hpp"

namespace gpudx::app {
namespace {

struct XidCmdOptions {
    std::optional<int> code;
    bool list = false;
    std::string policy_file;
    std::string format = "text";
};

nlohmann::json rule_json(const XidRule& r, bool known) {
    nlohmann::json j{{"code", r.code},           {"known", known},       {"meaning", r.meaning},
                     {"severity", to_string(r.severity)}, {"action", r.action}, {"origin", r.origin}};
    if (!r.note.empty()) j["note"] = r.note;
    return j;
}

std::string explain(const XidPolicy& p, int code) {
    const XidRule& r = p.rule(code);
    std::string out;
    if (p.knows(code)) {
        out += fmt::format("Xid {}: {}\n", code, r.meaning);
        out += fmt::format("  severity: {}\n", to_string(r.severity));
        out += fmt::format("  action:   {}\n", r.action);
        if (!r.note.empty()) out += fmt::format("  note:     {}\n", r.note);
    } else {
        out += fmt::format("Xid {}: unknown to this policy.\n", code);
        out += fmt::format("  default treatment: {}\n", to_string(r.severity));
        out += fmt::format("  action:   {}\n", r.action);
    }
    out += fmt::format("  policy:   {} ({})\n", p.version, p.knows(code) ? r.origin : "default for unlisted codes");
    return out;
}

std::string list_text(const XidPolicy& p) {
    std::string out = fmt::format("Xid policy {}\n\n{:>5}  {:<8} {}\n", p.version, "code", "severity", "meaning");
    for (auto& [code, r] : p.rules) {
        out += fmt::format("{:>5}  {:<8} {}", code, to_string(r.severity), r.meaning);
        if (r.origin != "built-in") out += fmt::format("  [{}]", r.origin);
        out += "\n";
    }
    out += fmt::format("{:>5}  {:<8} {}\n", "other", to_string(p.fallback.severity), "codes not listed");
    return out;
}

int run_xid(const XidCmdOptions& o) {
    XidPolicy loaded;
    const XidPolicy* policy = &builtin_xid_policy();
    if (!o.policy_file.empty()) {
        auto p = load_xid_policy_file(o.policy_file);
        if (!p) throw UsageError{p.error().message};
        loaded = std::move(*p);
        policy = &loaded;
    }
    if (!o.list && !o.code) throw UsageError{"xid: give a code (`gpudx xid 79`) or --list"};
    std::string text;
    if (o.format == "json") {
        nlohmann::json j{{"policy_version", policy->version}};
        if (o.list) {
            j["codes"] = nlohmann::json::array();
            for (auto& [code, r] : policy->rules) j["codes"].push_back(rule_json(r, true));
            j["default"] = rule_json(policy->fallback, false);
        } else {
            j["xid"] = rule_json(policy->rule(*o.code), policy->knows(*o.code));
            j["xid"]["code"] = *o.code;
        }
        text = j.dump(2) + "\n";
    } else {
        text = o.list ? list_text(*policy) : explain(*policy, *o.code);
    }
    write_output("", text);
    return 0;
}

CommandRegistrar reg{
    {"xid", "Explain an NVIDIA Xid code: meaning, severity, action (policy versioned and overridable)", 60,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<XidCmdOptions>();
         auto* code = cmd.add_option("code", o->code, "The Xid code, as in \"NVRM: Xid (PCI:0000:00:06): 79, ...\"")
                          ->check(CLI::Range(1, 100000));
         cmd.add_flag("--list", o->list, "List every code the policy knows")->excludes(code);
         cmd.add_option("--xid-policy", o->policy_file,
                        "Site policy (TOML, same format as data/xid-policy.toml); its codes replace the built-in ones")
             ->type_name("FILE");
         cmd.add_option("--format", o->format, "text (default), json")->check(CLI::IsMember({"text", "json"}));
         cmd.footer("Examples:\n  gpudx xid 79\n  gpudx xid --list\n  gpudx xid 63 --xid-policy /etc/gpudx/xid-policy.toml");
         return [o] { return run_xid(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app
