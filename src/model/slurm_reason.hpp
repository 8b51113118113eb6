#pragma once
// The reason gpudx gives Slurm when it drains a node, as a struct: "gpudx: <finding id> <the rest>". gpudx knows
// its own drains by the prefix, read back through `scontrol show node`; whoever drains the node keeps the struct
// (the finding it names) instead of parsing the text it wrote, and parse() is for text Slurm hands back, which
// may be anyone's.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

// Every Slurm reason gpudx writes starts with this, then a blank; a reason without it is someone else's.
inline constexpr std::string_view kSlurmReasonPrefix = "gpudx:";
// Slurm keeps the reason in its state files and prints it in sinfo, sacct and emails: at most this many bytes,
// so `sinfo -R` shows it whole.
inline constexpr size_t kSlurmReasonMaxBytes = 80;

struct SlurmReason {
    std::string finding;  // the id of the finding that drained the node: "pcie.fell_off_bus"
    std::string rest;     // what follows it: the GPU named, "(+more)"; empty when nothing does

    // "gpudx: pcie.fell_off_bus GPU-... 0000:00:06.0": plain ASCII (anything else becomes '?'), cut to
    // kSlurmReasonMaxBytes with "..." when longer.
    std::string format() const;
    // Whether format() keeps every byte: no cut.
    bool fits() const;
    // A reason as Slurm shows it; nullopt when it is not gpudx's (no prefix: an admin's, Slurm's own "Not
    // responding"). The finding is the first word after the prefix, the rest what follows, trimmed.
    static std::optional<SlurmReason> parse(std::string_view text);

    bool operator==(const SlurmReason&) const = default;
};

}  // namespace gpudx
