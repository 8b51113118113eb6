#pragma once
// How severe each NVIDIA Xid code is and what to do about it: explicit, versioned and overridable
// (data/xid-policy.toml, docs/kernel-log.md). The default is compiled in so the one binary works anywhere.
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "model/finding.hpp"
#include "core/error.hpp"

namespace gpudx {

struct XidRule {
    int code = 0;  // 0 for the default rule
    std::string meaning;
    Severity severity = Severity::warning;
    std::string action;
    std::string note;    // how other tools treat it, when they differ
    std::string origin;  // "built-in" or the policy file it came from
};

struct XidPolicy {
    std::string version;  // "2026.11.1", or "site 1 over built-in 2026.11.1" for a merged policy
    XidRule fallback;     // codes not listed
    std::map<int, XidRule> rules;

    // The rule for a code; the fallback (code 0) when it is not listed.
    const XidRule& rule(int code) const;
    bool knows(int code) const { return rules.count(code) > 0; }
};

// The policy text compiled into the binary; equal to data/xid-policy.toml (a unit test checks).
std::string_view builtin_xid_policy_text();
const XidPolicy& builtin_xid_policy();

// Parses a policy. `origin` names it in errors ("FILE:LINE: ...") and in XidRule::origin.
// Syntax errors, unknown keys, bad severities and codes that are not numbers are errors.
Result<XidPolicy> parse_xid_policy(std::string_view text, const std::string& origin);
// A site policy file: its entries replace the built-in ones code by code.
Result<XidPolicy> load_xid_policy_file(const std::string& path);

std::optional<Severity> parse_severity(std::string_view s);

}  // namespace gpudx
