#include "rules/reference/xid_policy.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/toml.hpp"
#include "rules/reference/catalogue_blob.hpp"

namespace gpudx {

namespace {

// Where a node sits in its file: "ORIGIN:LINE".
std::string where(const std::string& origin, const toml::source_region& r) { return toml_where(origin, r); }

// Reads the keys of one table, each checked against the list it may hold; every error names the key's line.
class TableReader {
public:
    TableReader(const toml::table& t, const std::string& origin, std::string context)
        : t_(t), origin_(origin), context_(std::move(context)) {}

    Result<void> only(std::initializer_list<std::string_view> keys) const {
        for (auto&& [key, node] : t_) {
            if (std::find(keys.begin(), keys.end(), key.str()) != keys.end()) continue;
            std::string allowed;
            for (auto k : keys) allowed += (allowed.empty() ? "" : ", ") + std::string(k);
            return fail(fmt::format("{}: unknown key `{}` in {} (allowed: {})", where(origin_, key.source()),
                                    key.str(), context_, allowed),
                        origin_);
        }
        return {};
    }

    // A string key: nullopt when absent; an error when present and not a string (or absent and required).
    Result<std::optional<std::string>> text(std::string_view key, bool required = false) const {
        const toml::node* n = t_.get(key);
        if (!n) {
            if (required)
                return fail(fmt::format("{}: {} has no `{}`", where(origin_, t_.source()), context_, key), origin_);
            return std::optional<std::string>{};
        }
        auto v = n->value<std::string>();
        if (!v)
            return fail(fmt::format("{}: `{}` in {} must be a string", line(key), key, context_), origin_);
        return std::optional<std::string>{*v};
    }

    // An array of non-empty strings: nullopt when absent; an error naming the line when anything else.
    Result<std::optional<std::vector<std::string>>> strings(std::string_view key) const {
        const toml::node* n = t_.get(key);
        if (!n) return std::optional<std::vector<std::string>>{};
        const toml::array* a = n->as_array();
        std::vector<std::string> out;
        if (a)
            for (auto& item : *a) {
                auto v = item.value<std::string>();
                if (!v || v->empty()) {
                    a = nullptr;
                    break;
                }
                out.push_back(*v);
            }
        if (!a)
            return fail(fmt::format("{}: `{}` in {} must be an array of names, as [\"Ampere\", \"Hopper\"]", line(key), key,
                                    context_),
                        origin_);
        return std::optional<std::vector<std::string>>{std::move(out)};
    }

    Result<std::optional<Severity>> severity(std::string_view key, bool required) const {
        auto s = text(key, required);
        if (!s) return std::unexpected(s.error());
        if (!*s) return std::optional<Severity>{};
        auto parsed = parse_severity(**s);
        if (!parsed)
            return fail(fmt::format("{}: {} \"{}\" in {} is not info, warning or error", line(key), key, **s, context_),
                        origin_);
        return std::optional<Severity>{*parsed};
    }

    // A whole number in [lo, hi], nullopt when absent.
    Result<std::optional<int64_t>> number(std::string_view key, int64_t lo, int64_t hi) const {
        const toml::node* n = t_.get(key);
        if (!n) return std::optional<int64_t>{};
        auto v = n->value<int64_t>();
        if (!v || *v < lo || *v > hi)
            return fail(fmt::format("{}: `{}` in {} must be a whole number from {} to {}", line(key), key, context_, lo,
                                    hi),
                        origin_);
        return std::optional<int64_t>{*v};
    }

    std::string line(std::string_view key) const {
        const toml::node* n = t_.get(key);
        return where(origin_, n ? n->source() : t_.source());
    }
    const std::string& context() const { return context_; }

private:
    const toml::table& t_;
    const std::string& origin_;
    std::string context_;
};

// `Result<T>` plumbing for the readers: assigns the value or returns the error from the enclosing function.
#define GPUDX_TRY(target, expr)                                  \
    do {                                                         \
        auto gpudx_try_value = (expr);                           \
        if (!gpudx_try_value) return std::unexpected(gpudx_try_value.error()); \
        target = std::move(*gpudx_try_value);                    \
    } while (0)

constexpr unsigned kMaxRepeats = 1000000;
constexpr int64_t kMaxWindowSeconds = 366LL * 24 * 3600;

Result<XidBucket> read_bucket(const toml::table& t, const std::string& name, const std::string& origin) {
    TableReader r(t, origin, "[bucket." + name + "]");
    if (auto ok = r.only({"meaning", "implies", "recovery", "repeats", "within_s", "escalate_severity", "escalation"});
        !ok)
        return std::unexpected(ok.error());
    XidBucket b;
    b.name = name;
    b.origin = origin;
    std::optional<std::string> meaning, recovery, escalation;
    GPUDX_TRY(meaning, r.text("meaning", true));
    b.meaning = *meaning;
    GPUDX_TRY(b.implies, r.severity("implies", false));
    GPUDX_TRY(recovery, r.text("recovery"));
    if (recovery && *recovery != "reset" && *recovery != "reboot")
        return fail(fmt::format("{}: recovery \"{}\" in {} is not reset or reboot", r.line("recovery"), *recovery,
                                r.context()),
                    origin);
    b.recovery = recovery.value_or("");
    std::optional<int64_t> repeats, within;
    GPUDX_TRY(repeats, r.number("repeats", 0, kMaxRepeats));
    GPUDX_TRY(within, r.number("within_s", 1, kMaxWindowSeconds));
    b.escalation.repeats = static_cast<unsigned>(repeats.value_or(0));
    if (within) b.escalation.within_s = static_cast<double>(*within);
    std::optional<Severity> escalated;
    GPUDX_TRY(escalated, r.severity("escalate_severity", false));
    if (escalated) b.escalation.severity = *escalated;
    GPUDX_TRY(escalation, r.text("escalation"));
    b.escalation.action = escalation.value_or("");
    if (b.escalation.repeats > 0 && b.escalation.action.empty())
        return fail(fmt::format("{}: {} escalates after {} repeats but has no `escalation` (the next step then)",
                                r.line("repeats"), r.context(), b.escalation.repeats),
                    origin);
    return b;
}

// The bucket names a value refers to: its words in capitals (CHECK_APP/CUDA, N/A), so NVIDIA's wording around
// them ("Solo: RESTART_FM Not Solo: IGNORE (follow other Xid)") stays as the catalog writes it.
std::vector<std::string> bucket_words(std::string_view value) {
    std::vector<std::string> out;
    size_t i = 0;
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/'; };
    while (i < value.size()) {
        if (!word_char(value[i])) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < value.size() && word_char(value[j])) ++j;
        std::string_view w = value.substr(i, j - i);
        bool has_upper = std::any_of(w.begin(), w.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
        bool has_lower = std::any_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; });
        if (w.size() >= 2 && has_upper && !has_lower) out.emplace_back(w);
        i = j;
    }
    return out;
}

// Reads one rule table ([default], [sxid_default], [xid.N] or [sxid.N]). `kind` says which keys it may hold.
enum class RuleKind { fallback, xid, sxid };

Result<XidRule> read_rule(const toml::table& t, int code, const std::string& origin, const std::string& context,
                          RuleKind kind, const std::map<std::string, XidBucket>& buckets) {
    TableReader r(t, origin, context);
    Result<void> keys = kind == RuleKind::xid
                            ? r.only({"mnemonic", "description", "immediate", "investigatory", "generations", "causes",
                                      "meaning", "severity", "action", "note", "repeats", "within_s"})
                        : kind == RuleKind::sxid ? r.only({"name", "class", "meaning", "severity", "action", "note"})
                                                 : r.only({"meaning", "severity", "action", "note"});
    if (!keys) return std::unexpected(keys.error());
    XidRule rule;
    rule.code = code;
    rule.origin = origin;
    std::optional<std::string> v;
    for (auto [key, field] : {std::pair{"mnemonic", &rule.mnemonic}, std::pair{"description", &rule.description},
                              std::pair{"immediate", &rule.immediate}, std::pair{"investigatory", &rule.investigatory},
                              std::pair{"meaning", &rule.meaning}, std::pair{"note", &rule.note},
                              std::pair{"name", &rule.name}, std::pair{"class", &rule.sxid_class}}) {
        GPUDX_TRY(v, r.text(key));
        *field = v.value_or("");
    }
    if (!rule.immediate.empty()) {
        auto b = buckets.find(rule.immediate);
        if (b == buckets.end() || !b->second.implies)
            return fail(fmt::format("{}: immediate bucket \"{}\" in {} is not declared (a [bucket.NAME] with `implies`)",
                                    r.line("immediate"), rule.immediate, context),
                        origin);
    }
    for (auto& word : bucket_words(rule.investigatory))
        if (!buckets.count(word))
            return fail(fmt::format("{}: investigatory bucket \"{}\" in {} is not declared (no [bucket.{}])",
                                    r.line("investigatory"), word, context, word),
                        origin);
    std::optional<std::vector<std::string>> generations;
    GPUDX_TRY(generations, r.strings("generations"));
    if (generations) rule.generations = std::move(*generations);
    std::optional<std::vector<std::string>> causes;
    GPUDX_TRY(causes, r.strings("causes"));
    if (causes) {
        for (auto& c : *causes)
            if (std::find(std::begin(kXidCauses), std::end(kXidCauses), c) == std::end(kXidCauses))
                return fail(fmt::format("{}: cause \"{}\" in {} is not one of hw, driver, user_app, system_memory, bus, "
                                        "thermal, fb",
                                        r.line("causes"), c, context),
                            origin);
        rule.causes = std::move(*causes);
    }
    if (!rule.sxid_class.empty() &&
        std::find(std::begin(kSxidClasses), std::end(kSxidClasses), rule.sxid_class) == std::end(kSxidClasses))
        return fail(fmt::format("{}: class \"{}\" in {} is not non-fatal, fatal or always-fatal", r.line("class"),
                                rule.sxid_class, context),
                    origin);
    if (rule.meaning.empty()) rule.meaning = rule.name;
    if (rule.meaning.empty()) rule.meaning = rule.description;
    if (kind != RuleKind::fallback && rule.meaning.empty())
        return fail(fmt::format("{}: {} has no `meaning` (or `description`)", where(origin, t.source()), context), origin);
    std::optional<Severity> severity;
    GPUDX_TRY(severity, r.severity("severity", true));
    rule.severity = *severity;
    GPUDX_TRY(v, r.text("action", true));
    rule.action = *v;
    std::optional<int64_t> n;
    GPUDX_TRY(n, r.number("repeats", 0, kMaxRepeats));
    if (n) rule.repeats = static_cast<unsigned>(*n);
    GPUDX_TRY(n, r.number("within_s", 1, kMaxWindowSeconds));
    if (n) rule.within_s = static_cast<double>(*n);
    // A site entry without `immediate` takes the built-in one's when merged (load_xid_policy_file).
    if (rule.repeats.value_or(0) > 0 && !rule.immediate.empty()) {
        auto b = buckets.find(rule.immediate);
        if (b == buckets.end() || b->second.escalation.action.empty())
            return fail(fmt::format("{}: {} sets `repeats` but its immediate bucket has no `escalation` to escalate to",
                                    r.line("repeats"), context),
                        origin);
    }
    return rule;
}

// "[xid.79]": the code, or an error naming the line.
Result<int> table_code(const toml::key& key, const std::string& origin, std::string_view family) {
    std::string name(key.str());
    bool numeric = !name.empty() && name.size() <= 5 && name.find_first_not_of("0123456789") == std::string::npos;
    int code = numeric ? std::stoi(name) : 0;
    if (code <= 0)
        return fail(fmt::format("{}: [{}.{}]: an {} code must be a positive number, from 1 to {}", where(origin, key.source()),
                                family, name, family == "xid" ? "Xid" : "SXid", kMaxXidCode),
                    origin);
    return code;
}

const toml::table* sub_table(const toml::table& root, std::string_view key) { return root[key].as_table(); }

// A policy file may be partial (a site overriding a few codes): `complete` asks for [default] and [sxid_default]
// too. `known_buckets` are the buckets its codes may name besides its own (the built-in ones, for a site file).
Result<XidPolicy> parse_policy(std::string_view text, const std::string& origin, bool complete,
                               const std::map<std::string, XidBucket>& known_buckets) {
    auto parsed = parse_toml(text, origin);
    if (!parsed) return std::unexpected(parsed.error());
    const toml::table& root = *parsed;
    static constexpr std::string_view kTopKeys[] = {"version", "generations", "default", "sxid_default", "bucket",
                                                    "xid", "sxid"};
    for (auto&& [key, node] : root) {
        if (std::find(std::begin(kTopKeys), std::end(kTopKeys), key.str()) == std::end(kTopKeys))
            return fail(fmt::format("{}: unknown key `{}` (allowed: version, generations, default, sxid_default, bucket, "
                                    "xid, sxid)",
                                    where(origin, key.source()), key.str()),
                        origin);
        if (key != "version" && key != "generations" && !node.as_table())
            return fail(fmt::format("{}: `{}` must be a table", where(origin, node.source()), key.str()), origin);
    }
    const toml::node* version = root.get("version");
    if (!version) return fail(fmt::format("{}: no `version = \"...\"`; a policy must say which version it is", origin), origin);
    auto v = version->value<std::string>();
    if (!v || v->empty())
        return fail(fmt::format("{}: `version` must be a non-empty string", where(origin, version->source())), origin);
    XidPolicy p;
    p.version = *v;
    {
        std::optional<std::vector<std::string>> g;
        GPUDX_TRY(g, TableReader(root, origin, "the policy").strings("generations"));
        if (g) p.generations = std::move(*g);
    }
    std::map<std::string, XidBucket> buckets = known_buckets;
    if (const toml::table* bt = sub_table(root, "bucket")) {
        for (auto&& [key, node] : *bt) {
            std::string name(key.str());
            const toml::table* t = node.as_table();
            if (!t) return fail(fmt::format("{}: bucket.{} must be a table", where(origin, node.source()), name), origin);
            auto b = read_bucket(*t, name, origin);
            if (!b) return std::unexpected(b.error());
            p.buckets[name] = *b;
            buckets[name] = std::move(*b);
        }
    }
    struct Fallback {
        const char* key;
        XidRule* rule;
    };
    for (auto [key, target] : {Fallback{"default", &p.fallback}, Fallback{"sxid_default", &p.sxid_fallback}}) {
        if (const toml::table* t = sub_table(root, key)) {
            auto r = read_rule(*t, 0, origin, fmt::format("[{}]", key), RuleKind::fallback, buckets);
            if (!r) return std::unexpected(r.error());
            *target = std::move(*r);
        } else if (complete && target == &p.fallback) {
            return fail(fmt::format("{}: no [{}] table for codes the policy does not list", origin, key), origin);
        } else if (complete) {
            *target = p.fallback;  // SXids not listed get what unlisted Xids get
        }
    }
    struct Family {
        const char* key;
        RuleKind kind;
        std::map<int, XidRule>* rules;
    };
    for (auto [key, kind, rules] : {Family{"xid", RuleKind::xid, &p.rules}, Family{"sxid", RuleKind::sxid, &p.sxids}}) {
        const toml::table* xt = sub_table(root, key);
        if (!xt) continue;
        for (auto&& [k, node] : *xt) {
            auto code = table_code(k, origin, key);
            if (!code) return std::unexpected(code.error());
            const toml::table* t = node.as_table();
            if (!t) return fail(fmt::format("{}: {}.{} must be a table", where(origin, node.source()), key, *code), origin);
            auto r = read_rule(*t, *code, origin, fmt::format("[{}.{}]", key, *code), kind, buckets);
            if (!r) return std::unexpected(r.error());
            (*rules)[*code] = std::move(*r);
        }
    }
    // A catalog entry that names no GPUs of its own applies to every GPU the catalog covers.
    for (auto& [code, r] : p.rules)
        if (r.generations.empty() && !r.mnemonic.empty()) r.generations = p.generations;
    return p;
}

#undef GPUDX_TRY

}  // namespace

const XidRule& XidPolicy::rule(int code) const {
    auto it = rules.find(code);
    return it == rules.end() ? fallback : it->second;
}

const XidRule& XidPolicy::sxid(int code) const {
    auto it = sxids.find(code);
    return it == sxids.end() ? sxid_fallback : it->second;
}

const XidBucket* XidPolicy::immediate_bucket(int code) const {
    if (!knows(code)) return nullptr;
    auto it = buckets.find(rule(code).immediate);
    return it == buckets.end() ? nullptr : &it->second;
}

std::optional<XidEscalation> XidPolicy::escalation(int code) const {
    const XidBucket* b = immediate_bucket(code);
    if (!b) return std::nullopt;
    XidEscalation e = b->escalation;
    const XidRule& r = rule(code);
    if (r.repeats) e.repeats = *r.repeats;
    if (r.within_s) e.within_s = *r.within_s;
    if (e.repeats == 0 || e.action.empty()) return std::nullopt;
    return e;
}

const XidPolicy& builtin_xid_policy() {
    // Parsed and checked by the build (tools/compile_catalogues.cpp); read from the binary on first use.
    // Never destroyed: freeing it at exit would cost a process that used it as much again.
    static const XidPolicy& policy = *new XidPolicy(read_builtin_xid_policy());
    return policy;
}

Result<XidPolicy> parse_xid_policy(std::string_view text, const std::string& origin) {
    return parse_policy(text, origin, true, {});
}

Result<XidPolicy> load_xid_policy_file(const std::string& path) {
    auto text = read_input_file(path, 16u << 20);
    if (!text)
        return fail(fmt::format("{}: cannot read the Xid policy file: {}", path, text.error().message), path,
                    text.error().sys_errno);
    const XidPolicy& builtin = builtin_xid_policy();
    auto site = parse_policy(*text, path, false, builtin.buckets);
    if (!site) return site;
    XidPolicy merged = builtin;
    merged.version = fmt::format("{} ({}) over built-in {}", site->version, path, merged.version);
    if (!site->fallback.action.empty()) merged.fallback = site->fallback;
    if (!site->sxid_fallback.action.empty()) merged.sxid_fallback = site->sxid_fallback;
    for (auto& [name, b] : site->buckets) merged.buckets[name] = b;
    if (!site->generations.empty()) merged.generations = site->generations;
    for (auto& [code, r] : site->rules) {
        XidRule& into = merged.rules[code];
        // NVIDIA's catalog fields stay when the site entry only sets gpudx's severity and words.
        for (auto [site_field, builtin_field] : {std::pair{&r.mnemonic, &into.mnemonic}, std::pair{&r.description, &into.description},
                                                 std::pair{&r.immediate, &into.immediate},
                                                 std::pair{&r.investigatory, &into.investigatory}})
            if (site_field->empty()) *site_field = *builtin_field;
        if (r.generations.empty()) r.generations = into.generations;
        if (r.causes.empty()) r.causes = into.causes;
        into = r;
    }
    for (auto& [code, r] : site->sxids) {
        XidRule& into = merged.sxids[code];
        // NVIDIA's name and class stay when the site entry only sets gpudx's severity and words.
        if (r.name.empty()) r.name = into.name;
        if (r.sxid_class.empty()) r.sxid_class = into.sxid_class;
        into = r;
    }
    return merged;
}

}  // namespace gpudx
