// Whether the caller may checkpoint a process, and whether that process carries the identity shim.
#include "actions/checkpoint.hpp"

#include <fmt/format.h>

#include "core/text.hpp"
#include "identity/verify.hpp"

namespace gpudx {

// ---------------------------------------------------------------------------------------------------------------
// Safety and identity

std::optional<unsigned> parse_status_uid(std::string_view status_text) {
    for (auto line : split_lines(status_text)) {
        if (!line.starts_with("Uid:")) continue;
        auto fields = split_ws(line.substr(4));
        if (fields.empty()) return std::nullopt;
        auto uid = parse_uint(fields[0]);
        if (!uid || *uid > 0xffffffffULL) return std::nullopt;
        return static_cast<unsigned>(*uid);
    }
    return std::nullopt;
}

Result<void> check_process_access(const Root& root, int pid, unsigned caller_uid) {
    if (pid <= 0) return fail(fmt::format("{} is not a process id", pid));
    std::string path = fmt::format("/proc/{}/status", pid);
    auto status = root.read_file(path);
    if (!status) return fail(fmt::format("no process {} ({})", pid, status.error().message), path);
    auto uid = parse_status_uid(*status);
    if (!uid) return fail(fmt::format("cannot tell who owns process {}: no Uid line in {}", pid, path), path);
    // Like ptrace's rule: a process one started that runs with other credentials (a setuid program) is not
    // one's own. Uid: real, effective, saved, filesystem.
    if (caller_uid != 0 && *uid == caller_uid) {
        for (auto line : split_lines(*status)) {
            if (!line.starts_with("Uid:")) continue;
            for (auto f : split_ws(line.substr(4)))
                if (auto u = parse_uint(f); !u || *u != caller_uid)
                    return fail(fmt::format("refusing process {}: it runs with the credentials of uid {} (a setuid "
                                            "program), not only yours (uid {}); run as root to act on it",
                                            pid, f, caller_uid),
                                path);
        }
    }
    if (caller_uid != 0 && *uid != caller_uid)
        return fail(fmt::format("refusing process {}: it belongs to uid {}, not to you (uid {}); run as root to act "
                                "on another user's process",
                                pid, *uid, caller_uid),
                    path);
    return {};
}

std::optional<std::string> find_loaded_shim(const Root& root, int pid) {
    auto maps = root.read_file(fmt::format("/proc/{}/maps", pid), 64 * 1024 * 1024);
    if (!maps) return std::nullopt;
    return shim_mapping(*maps);
}

}  // namespace gpudx
