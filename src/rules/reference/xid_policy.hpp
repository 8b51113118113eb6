#pragma once
// How severe each NVIDIA Xid and NVSwitch SXid code is and what to do about it: explicit, versioned and
// overridable (data/xid-policy.toml, docs/kernel-log.md), with NVIDIA's resolution buckets from its Xid catalog.
// The default is compiled in so the one binary works anywhere.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/finding.hpp"
#include "core/error.hpp"

namespace gpudx {

// What a code repeating on one GPU becomes: `repeats` occurrences within `within_s` seconds.
struct XidEscalation {
    unsigned repeats = 0;  // 0: never escalates
    double within_s = 3600;
    Severity severity = Severity::error;
    std::string action;

    bool operator==(const XidEscalation&) const = default;
};

// One of NVIDIA's resolution buckets (RESET_GPU, IGNORE, CHECK_APP/CUDA, ...).
struct XidBucket {
    std::string name;
    std::string meaning;
    std::optional<Severity> implies;  // set for the buckets NVIDIA uses as an immediate action
    std::string recovery;             // "reset", "reboot" or "" (the bucket asks for neither)
    XidEscalation escalation;
    std::string origin;

    bool operator==(const XidBucket&) const = default;
};

struct XidRule {
    int code = 0;  // 0 for the default rule
    std::string mnemonic;       // NVIDIA's (ROBUST_CHANNEL_GPU_TIMEOUT_ERROR)
    std::string description;    // NVIDIA's
    std::string immediate;      // NVIDIA's immediate resolution bucket; empty where the catalog gives none
    std::string investigatory;  // NVIDIA's investigatory bucket, as the catalog writes it
    // The GPUs the entry applies to: its own `generations`, else the policy's (the catalog's scope) for an entry
    // of the catalog; empty for gpudx's own entries and the defaults.
    std::vector<std::string> generations;
    // The causes NVIDIA's older Xid listing marks for the code (kXidCauses), for the codes gpudx takes from it.
    std::vector<std::string> causes;
    std::string name;        // SXid: NVIDIA's name for it in the fabric manager guide
    std::string sxid_class;  // SXid: NVIDIA's class (kSxidClasses), empty when the policy gives none
    std::string meaning;        // gpudx's words (the description when the policy gives none)
    Severity severity = Severity::warning;
    std::string action;
    std::string note;    // why gpudx differs from the bucket or from other tools, when it does
    std::optional<unsigned> repeats;   // overrides the bucket's escalation threshold
    std::optional<double> within_s;
    std::string origin;  // "built-in" or the policy file it came from

    bool operator==(const XidRule&) const = default;
};

struct XidPolicy {
    std::string version;  // "2026.12.1", or "site 1 (FILE) over built-in 2026.12.1" for a merged policy
    std::vector<std::string> generations;  // the GPU generations the catalog covers (top-level `generations`)
    XidRule fallback;     // codes not listed
    std::map<int, XidRule> rules;
    std::map<std::string, XidBucket> buckets;
    XidRule sxid_fallback;  // SXids not listed
    std::map<int, XidRule> sxids;

    // The rule for a code; the fallback (code 0) when it is not listed.
    const XidRule& rule(int code) const;
    bool knows(int code) const { return rules.count(code) > 0; }
    const XidRule& sxid(int code) const;
    bool knows_sxid(int code) const { return sxids.count(code) > 0; }
    // The code's immediate bucket, null when it has none (or is unlisted).
    const XidBucket* immediate_bucket(int code) const;
    // The code's escalation: its bucket's, with the code's own threshold over it; nullopt when it never escalates.
    std::optional<XidEscalation> escalation(int code) const;

    bool operator==(const XidPolicy&) const = default;
};

// Compiled in: data/xid-policy.toml as the build parsed it (rules/reference/catalogue_blob.hpp), read on first use.
const XidPolicy& builtin_xid_policy();

// Parses a complete policy. `origin` names it in errors ("FILE:LINE: ...") and in XidRule::origin.
// Syntax errors, unknown keys, bad severities, buckets not declared and codes that are not numbers are errors.
Result<XidPolicy> parse_xid_policy(std::string_view text, const std::string& origin);
// A site policy file: its entries replace the built-in ones code by code (buckets by name), and may name the
// buckets either declares.
Result<XidPolicy> load_xid_policy_file(const std::string& path);

// The cause columns of NVIDIA's older Xid listing, in its order: HW error, driver error, user application error,
// system memory corruption, bus error, thermal issue, frame-buffer corruption.
inline constexpr std::string_view kXidCauses[] = {"hw", "driver", "user_app", "system_memory", "bus", "thermal", "fb"};
// The fabric manager guide's sections of SXids.
inline constexpr std::string_view kSxidClasses[] = {"non-fatal", "fatal", "always-fatal"};

// Xid and SXid codes are positive and at most this (the driver prints them as decimal numbers of up to 5 digits).
inline constexpr int kMaxXidCode = 99999;

}  // namespace gpudx
