#include "identity/verify.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "core/proc_maps.hpp"
#include "core/text.hpp"

namespace gpudx {

namespace {

constexpr std::string_view kStateMagic = "gpudx-shim-state 1";

bool same_bus(std::string_view a, std::string_view b) {
    auto pa = PciAddress::parse(a), pb = PciAddress::parse(b);
    return pa && pb && *pa == *pb;
}


// A state file of the live machine: opened without following a link, judged by what was opened (never by a
// name that could be swapped between a check and the read), then read.
Result<std::string> read_trusted_state_file(const std::string& path, const std::vector<uint32_t>& process_uids,
                                            size_t max_bytes) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ELOOP) return fail(path + " is not trusted: a symbolic link, not the shim's own file", path, err);
        return fail(path + ": " + std::strerror(err), path, err);
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        return fail(path + ": " + std::strerror(err), path, err);
    }
    auto why = state_file_distrust({S_ISREG(st.st_mode), st.st_uid, st.st_mode}, process_uids);
    if (!why.empty()) {
        ::close(fd);
        return fail(path + " is not trusted: " + why, path);
    }
    std::string text;
    char buf[16384];
    ssize_t n;
    while (text.size() <= max_bytes && ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
        if (n > 0) text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    if (text.size() > max_bytes) return fail(path + ": larger than a state file can be", path);
    return text;
}

}  // namespace

Result<ShimState> parse_shim_state(std::string_view text) {
    auto lines = split_lines(text);
    if (lines.empty() || trim(lines.front()) != kStateMagic)
        return fail("not a gpudx shim state file (first line is not \"gpudx-shim-state 1\")");
    if (trim(lines.back()) != "end") return fail("state file is truncated (no \"end\" line)");
    ShimState s;
    for (size_t i = 1; i + 1 < lines.size(); ++i) {
        auto fields = split_ws(lines[i]);
        if (fields.empty()) continue;
        std::string_view key = fields[0];
        std::string_view value = fields.size() > 1 ? fields[1] : std::string_view{};
        if (key == "pid") {
            s.pid = static_cast<int>(parse_int(value).value_or(0));
        } else if (key == "start_ticks") {
            s.start_ticks = parse_uint(value).value_or(0);
        } else if (key == "mode") {
            s.mode = value;
        } else if (key == "proc_root") {
            s.proc_root = value;
        } else if (key == "nvml") {
            s.nvml = value;
        } else if (key == "updated_unix_ms") {
            s.updated_unix_ms = parse_int(value).value_or(0);
        } else if (key == "nvml_translations") {
            s.nvml_translations = parse_uint(value).value_or(0);
        } else if (key == "ordinal") {
            ShimOrdinalState o;
            auto ordinal = parse_int(value);
            if (!ordinal) return fail(fmt::format("line {}: bad ordinal \"{}\"", i + 1, value));
            o.ordinal = static_cast<int>(*ordinal);
            for (size_t f = 2; f < fields.size(); ++f) {
                auto eq = fields[f].find('=');
                if (eq == std::string_view::npos) continue;
                std::string_view k = fields[f].substr(0, eq), v = fields[f].substr(eq + 1);
                if (k == "uuid") o.uuid = v;
                else if (k == "driver_bus") o.driver_bus = v;
                else if (k == "current_bus") o.current_bus = v;
                else if (k == "source") o.source = v;
                else if (k == "corrected") o.corrected = parse_uint(v).value_or(0);
                else if (k == "uuid_changes") o.uuid_changes = static_cast<unsigned>(parse_uint(v).value_or(0));
                else if (k == "handed" && v != "-")
                    for (auto h : split(v, ',')) o.handed_out.emplace_back(h);
            }
            s.ordinals.push_back(std::move(o));
        }
    }
    return s;
}

std::optional<std::string> shim_mapping(std::string_view maps_text) {
    for (const auto& mapping : parse_proc_mappings(maps_text)) {
        auto file = mapping.file_name();
        if (file.starts_with("libgpudx_shim") && file.find(".so") != std::string_view::npos)
            return std::string(mapping.path);
    }
    return std::nullopt;
}

std::vector<std::string> identity_caching_libraries(std::string_view maps_text) {
    static constexpr std::string_view kPrefixes[] = {"libcudart.so", "libnccl.so", "libtorch_cuda.so",
                                                     "libcuda.so",   "libnvidia-ml.so"};
    std::vector<std::string> found;
    for (const auto& mapping : parse_proc_mappings(maps_text)) {
        auto file = mapping.file_name();
        for (auto prefix : kPrefixes)
            if (file.starts_with(prefix) && std::find(found.begin(), found.end(), file) == found.end())
                found.emplace_back(file);
    }
    return found;
}

std::vector<uint32_t> parse_status_uids(std::string_view status_text) {
    std::vector<uint32_t> uids;
    for (auto line : split_lines(status_text)) {
        if (!line.starts_with("Uid:")) continue;
        for (auto field : split_ws(line.substr(4)))
            if (auto v = parse_uint(field); v && *v <= UINT32_MAX) uids.push_back(static_cast<uint32_t>(*v));
        break;
    }
    return uids;
}

std::string state_file_distrust(const StateFileOwnership& file, const std::vector<uint32_t>& process_uids) {
    if (!file.regular) return "not a regular file";
    if (file.uid != 0 && std::find(process_uids.begin(), process_uids.end(), file.uid) == process_uids.end())
        return fmt::format("owned by uid {}, which is neither the process's user nor root", file.uid);
    if (file.mode & (S_IWGRP | S_IWOTH))
        return fmt::format("writable by users other than its owner (mode {:04o})", file.mode & 07777);
    return {};
}

std::optional<int> parse_nspid(std::string_view status_text) {
    for (auto line : split_lines(status_text)) {
        if (!line.starts_with("NSpid:")) continue;
        auto fields = split_ws(line.substr(6));
        if (fields.empty()) return std::nullopt;
        auto v = parse_int(fields.back());
        return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
    }
    return std::nullopt;
}

std::optional<unsigned long long> parse_start_ticks(std::string_view stat_text) {
    auto close = stat_text.rfind(')');  // the command name may hold blanks and parentheses
    if (close == std::string_view::npos) return std::nullopt;
    auto fields = split_ws(stat_text.substr(close + 1));
    // fields[0] is field 3 (state); field 22 is fields[19].
    if (fields.size() < 20) return std::nullopt;
    return parse_uint(fields[19]);
}

std::optional<std::string> environ_value(std::string_view environ_text, std::string_view name) {
    for (auto entry : split(environ_text, '\0')) {
        if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
            return std::string(entry.substr(name.size() + 1));
    }
    return std::nullopt;
}

std::map<std::string, std::string> node_gpus_by_uuid(const Root& node) {
    std::map<std::string, std::string> out;
    auto dirs = node.list_dir("/proc/driver/nvidia/gpus");
    if (!dirs) return out;
    for (const auto& dir : *dirs) {
        auto text = node.read_file("/proc/driver/nvidia/gpus/" + dir + "/information", 64 * 1024);
        if (!text) continue;
        std::string uuid, location;
        for (const auto& [key, value] : parse_key_values(*text)) {
            if (key == "GPU UUID") uuid = to_lower(value);
            if (key == "Bus Location") location = value;
        }
        auto address = PciAddress::parse(location.empty() ? dir : location);
        if (!uuid.empty() && address) out[uuid] = address->str();
    }
    return out;
}

VerifyReport evaluate_identity(int pid, std::string_view maps_text, const std::optional<ShimState>& state,
                               const std::map<std::string, std::string>& node_gpus, long long now_unix_ms) {
    VerifyReport r;
    r.pid = pid;
    auto shim = shim_mapping(maps_text);
    r.shim_loaded = shim.has_value();
    r.shim_path = shim.value_or("");
    r.libraries = identity_caching_libraries(maps_text);
    r.state = state;
    if (!r.shim_loaded) {
        r.verdict = IdentityVerdict::unknown;
        r.summary = fmt::format(
            "the gpudx shim is not loaded in process {} (no libgpudx_shim.so in /proc/{}/maps), so gpudx cannot see "
            "which bus ids its CUDA driver reports. After a restore onto other GPUs they are stale. Start the "
            "process with LD_PRELOAD=/path/to/libgpudx_shim.so before checkpointing it.",
            pid, pid);
        r.exit_code = 3;
        return r;
    }
    if (!state) {
        r.summary = fmt::format(
            "the shim is loaded ({}) but has published no state yet: the process has made no PCI identity call "
            "since it started (or since it arrived on this node). The next cuDeviceGetPCIBusId, PCI attribute or "
            "NVML bus-id call publishes it.{}",
            r.shim_path, r.state_problem.empty() ? "" : " (" + r.state_problem + ")");
        r.exit_code = 3;
        return r;
    }
    if (state->updated_unix_ms > 0) r.state_age_s = static_cast<double>(now_unix_ms - state->updated_unix_ms) / 1000.0;
    bool observe = state->mode == "observe";
    // Which UUID sits at each address on this node, to name the card a stale bus id points at.
    std::map<std::string, std::string> uuid_at;
    for (const auto& [uuid, bus] : node_gpus) uuid_at[bus] = uuid;

    int n_inconsistent = 0, n_unknown = 0, n_corrected = 0, n_stale_copies = 0;
    for (const auto& o : state->ordinals) {
        VerifiedOrdinal v;
        v.state = o;
        std::string uuid = to_lower(o.uuid);
        if (auto it = node_gpus.find(uuid); it != node_gpus.end()) v.node_bus = it->second;
        std::string driver = bus_or_empty(o.driver_bus), current = bus_or_empty(o.current_bus);
        auto owner_of = [&](const std::string& bus) {
            auto it = uuid_at.find(bus);
            if (it == uuid_at.end()) return std::string("no GPU of this node");
            return it->second.starts_with("gpu-") ? "GPU-" + it->second.substr(4) : it->second;
        };
        if (!v.node_bus.empty() && !current.empty() && v.node_bus != current) {
            v.verdict = IdentityVerdict::unknown;
            v.explanation = fmt::format(
                "the shim last saw {} at {}, but on this node it is at {}: the state predates a move; the next "
                "identity call in the process refreshes it",
                o.uuid, current, v.node_bus);
        } else if (current.empty()) {
            v.verdict = IdentityVerdict::unknown;
            v.explanation = fmt::format(
                "the shim could not find {} in /proc/driver/nvidia/gpus or NVML, so the driver's bus id {} is "
                "passed through unverified",
                shown_or_unknown(o.uuid), shown_or_unknown(o.driver_bus));
        } else if (driver.empty()) {
            v.verdict = IdentityVerdict::unknown;
            v.explanation = "the driver's bus id for this ordinal has not been observed";
        } else if (driver == current) {
            v.verdict = IdentityVerdict::consistent;
            v.explanation = fmt::format("the driver reports {}, where {} sits", current, o.uuid);
        } else if (observe) {
            v.verdict = IdentityVerdict::inconsistent;
            v.explanation = fmt::format(
                "the driver reports {} ({}), but {} sits at {}; the shim runs in observe mode "
                "(GPUDX_SHIM_MODE=observe) and did not correct it",
                driver, owner_of(driver), o.uuid, current);
        } else {
            v.verdict = IdentityVerdict::corrected;
            v.explanation = fmt::format(
                "the driver still reports {} ({}) after a restore; the shim answers {}, where {} sits ({} answer(s) "
                "corrected so far)",
                driver, owner_of(driver), current, o.uuid, o.corrected);
        }
        switch (v.verdict) {
            case IdentityVerdict::inconsistent: ++n_inconsistent; break;
            case IdentityVerdict::unknown: ++n_unknown; break;
            case IdentityVerdict::corrected: ++n_corrected; break;
            case IdentityVerdict::consistent: break;
        }
        // Values handed out before the restore live on in whatever copied them.
        for (const auto& h : o.handed_out) {
            if (current.empty() || same_bus(h, current)) continue;
            ++n_stale_copies;
            r.cannot_correct.push_back(fmt::format(
                "ordinal {} was given bus id {} before the restore; copies the application kept (its own "
                "variables, NCCL's NVML handles and topology, PyTorch's device properties) still name the old "
                "card",
                o.ordinal, h));
        }
        r.ordinals.push_back(std::move(v));
    }
    bool restored = std::any_of(state->ordinals.begin(), state->ordinals.end(),
                                [](const auto& o) { return o.uuid_changes > 0; }) ||
                    n_corrected > 0 || n_inconsistent > 0;
    if (restored) {
        r.cannot_correct.push_back(
            "cudaGetDeviceProperties: the CUDA runtime caches pciBusID, pciDeviceID and pciDomainID when it "
            "initialises; properties read before the restore keep the old card's values (the shim cannot refresh "
            "a statically linked runtime's cache)");
        bool nccl = std::any_of(r.libraries.begin(), r.libraries.end(),
                                [](const std::string& l) { return l.starts_with("libnccl"); });
        r.cannot_correct.push_back(fmt::format(
            "IPC and peer mappings imported before the restore (cuIpcOpenMemHandle, "
            "cuMemImportFromShareableHandle, NCCL's P2P/SHM transports) are resolved inside the driver against "
            "the old identity{}; create new communicators after the restore",
            nccl ? " — NCCL is loaded in this process" : ""));
    }
    if (state->nvml_translations > 0)
        r.cannot_correct.push_back(fmt::format(
            "{} NVML lookup(s) by a pre-restore bus id were translated to the card's new address; where the old "
            "address still exists on this node NVML's own answer (the other card) stands",
            state->nvml_translations));

    if (state->ordinals.empty()) {
        r.verdict = IdentityVerdict::unknown;
        r.summary = "the shim's state lists no CUDA devices (the driver reported none when it was written)";
        r.exit_code = 3;
    } else if (n_inconsistent > 0) {
        r.verdict = IdentityVerdict::inconsistent;
        r.summary = fmt::format(
            "{} of {} ordinal(s) report a bus id that is not their card's: this process names the wrong GPU "
            "(NVML by that bus id finds another card, or nothing on another node)",
            n_inconsistent, state->ordinals.size());
        r.exit_code = 1;
    } else if (n_unknown > 0) {
        r.verdict = IdentityVerdict::unknown;
        r.summary = fmt::format("{} of {} ordinal(s) could not be verified", n_unknown, state->ordinals.size());
        r.exit_code = 3;
    } else if (n_corrected > 0) {
        r.verdict = IdentityVerdict::corrected;
        r.summary = fmt::format(
            "the driver reports stale bus ids for {} ordinal(s) after a restore; the shim corrects every answer "
            "that passes through it{}",
            n_corrected, n_stale_copies ? ", but values copied before the restore are stale (below)" : "");
        r.exit_code = 0;
    } else {
        r.verdict = IdentityVerdict::consistent;
        r.summary = "every ordinal's bus id is the address of the card with its UUID";
        r.exit_code = 0;
    }
    return r;
}

Result<VerifyReport> verify_process(const Root& root, int pid, const VerifyOptions& options) {
    std::string proc = "/proc/" + std::to_string(pid);
    auto maps = root.read_file(proc + "/maps", 64 * 1024 * 1024);
    if (!maps) {
        if (!root.exists(proc)) return fail(fmt::format("no process {}", pid), proc);
        return fail(fmt::format("cannot read {}/maps: {} (run as the process's owner or root)", proc,
                                maps.error().message),
                    proc + "/maps", maps.error().sys_errno);
    }
    auto environ = root.read_file(proc + "/environ", 4 * 1024 * 1024);
    auto env = [&](std::string_view name) -> std::optional<std::string> {
        return environ ? environ_value(*environ, name) : std::nullopt;
    };
    std::optional<unsigned long long> start_ticks;
    if (auto stat = root.read_file(proc + "/stat")) start_ticks = parse_start_ticks(*stat);

    // The shim names its file after the PID it sees itself as (inside a PID namespace that differs).
    std::vector<int> names{pid};
    std::vector<uint32_t> uids;
    if (auto status = root.read_file(proc + "/status")) {
        if (auto ns = parse_nspid(*status); ns && *ns != pid) names.push_back(*ns);
        uids = parse_status_uids(*status);
    }
    std::vector<std::string> dirs;
    if (!options.state_dir.empty()) dirs.push_back(options.state_dir);
    if (auto d = env("GPUDX_SHIM_STATE_DIR")) dirs.push_back(*d);
    dirs.push_back("/dev/shm");
    dirs.push_back("/tmp");

    std::optional<ShimState> state;
    std::string state_path, problem;
    for (const auto& dir : dirs) {
        for (int name : names) {
            std::string path = dir + "/gpudx-shim." + std::to_string(name);
            // A capture is a recorded folder, not a shared directory: ownership is checked on the live machine.
            constexpr size_t kMaxStateBytes = 1024 * 1024;
            auto text = root.is_live() ? read_trusted_state_file(path, uids, kMaxStateBytes)
                                       : root.read_file(path, kMaxStateBytes);
            if (!text) {
                if (root.is_live() && text.error().sys_errno != ENOENT) problem = text.error().message;
                continue;
            }
            auto parsed = parse_shim_state(*text);
            if (!parsed) {
                problem = path + ": " + parsed.error().message;
                continue;
            }
            if (start_ticks && parsed->start_ticks && *start_ticks != parsed->start_ticks) {
                problem = path + " was written by an earlier process with the same PID";
                continue;
            }
            state = std::move(*parsed);
            state_path = path;
            break;
        }
        if (state) break;
    }

    std::string node_root = options.node_root;
    if (node_root.empty()) node_root = env("GPUDX_SHIM_PROC_ROOT").value_or("");
    std::map<std::string, std::string> node;
    if (node_root.empty() || node_root == "/")
        node = node_gpus_by_uuid(root);
    else
        node = node_gpus_by_uuid(Root(node_root));

    long long now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    VerifyReport r = evaluate_identity(pid, *maps, state, node, now_ms);
    r.state_path = state_path;
    r.state_problem = problem;
    if (!state && r.shim_loaded && !problem.empty()) r.summary += " (" + problem + ")";
    return r;
}

}  // namespace gpudx
