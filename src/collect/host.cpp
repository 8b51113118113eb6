#include "collect/host.hpp"

#include <cerrno>
#include <map>

#include "collect/collectors.hpp"
#include "core/text.hpp"

namespace gpudx {
namespace {

// os-release values may be quoted with " or ' and use shell escapes.
std::string unquote(std::string_view v) {
    v = trim(v);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '\\' && i + 1 < v.size()) ++i;
        out += v[i];
    }
    return out;
}

}  // namespace

std::string parse_os_release_pretty_name(std::string_view text) {
    std::map<std::string, std::string> kv;
    for (auto line : split_lines(text)) {
        line = trim(line);
        if (line.empty() || line.front() == '#') continue;
        auto eq = line.find('=');
        if (eq == std::string_view::npos) continue;
        kv[std::string(trim(line.substr(0, eq)))] = unquote(line.substr(eq + 1));
    }
    if (auto it = kv.find("PRETTY_NAME"); it != kv.end() && !it->second.empty()) return sanitize_utf8(it->second);
    std::string name = kv.count("NAME") ? kv["NAME"] : "";
    std::string version = kv.count("VERSION") ? kv["VERSION"] : "";
    return sanitize_utf8(std::string(trim(name + " " + version)));
}

std::optional<bool> parse_secure_boot_efivar(std::string_view bytes) {
    if (bytes.size() < 5) return std::nullopt;
    return static_cast<unsigned char>(bytes[4]) == 1;
}

std::string parse_kernel_version_from_proc_version(std::string_view text) {
    auto line = trim(split_lines(text).empty() ? std::string_view{} : split_lines(text)[0]);
    auto hash = line.find(" #");
    if (hash == std::string_view::npos) return {};
    return sanitize_utf8(trim(line.substr(hash + 1)));
}

std::string parse_kernel_release_from_proc_version(std::string_view text) {
    auto fields = split_ws(text);
    if (fields.size() < 3 || fields[0] != "Linux" || fields[1] != "version") return {};
    return sanitize_utf8(fields[2]);
}

CollectorStatus collect_host(const CollectContext& ctx, HostInfo& host) {
    const Root& root = ctx.root;
    CollectorStatus st = status_ok(Collector::host);
    // A missing file is a problem only when the value has no other source.
    auto read = [&](const char* path) -> std::optional<std::string> {
        auto r = root.read_file(path, 256 * 1024);
        if (r) return std::move(*r);
        st.problems.push_back({path, r.error().message});
        return std::nullopt;
    };
    auto read_quiet = [&](const char* path) -> std::optional<std::string> {
        auto r = root.read_file(path, 256 * 1024);
        if (r) return std::move(*r);
        return std::nullopt;
    };

    if (auto t = read_quiet("/proc/sys/kernel/hostname")) host.hostname = sanitize_utf8(trim(*t));
    else if (auto e = read_quiet("/etc/hostname")) host.hostname = sanitize_utf8(trim(*e));
    else st.problems.push_back({"/proc/sys/kernel/hostname", "hostname not readable (nor /etc/hostname)"});

    auto proc_version = read_quiet("/proc/version");
    if (auto t = read_quiet("/proc/sys/kernel/osrelease")) host.kernel_release = sanitize_utf8(trim(*t));
    else if (proc_version) host.kernel_release = parse_kernel_release_from_proc_version(*proc_version);
    if (host.kernel_release.empty()) st.problems.push_back({"/proc/sys/kernel/osrelease", "kernel release not readable"});

    if (auto t = read_quiet("/proc/sys/kernel/version")) host.kernel_version = sanitize_utf8(trim(*t));
    else if (proc_version) host.kernel_version = parse_kernel_version_from_proc_version(*proc_version);

    if (auto t = read("/proc/sys/kernel/random/boot_id")) host.boot_id = sanitize_utf8(trim(*t));
    if (auto t = read_quiet("/etc/os-release")) host.os_release = parse_os_release_pretty_name(*t);
    else if (auto u = read_quiet("/usr/lib/os-release")) host.os_release = parse_os_release_pretty_name(*u);
    else st.problems.push_back({"/etc/os-release", "os-release not readable (nor /usr/lib/os-release)"});
    if (auto t = read("/proc/cmdline")) host.cmdline = sanitize_utf8(trim(*t));

    // Absent on legacy-BIOS boots and when efivarfs is not mounted: unknown, not "off".
    constexpr const char* kSecureBoot = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";
    auto sb = root.read_file(kSecureBoot, 4096);
    if (sb) {
        host.secure_boot = parse_secure_boot_efivar(*sb);
        if (!host.secure_boot) st.problems.push_back({kSecureBoot, "shorter than 5 bytes"});
    } else if (sb.error().sys_errno != ENOENT) {
        st.problems.push_back({kSecureBoot, sb.error().message});
    }

    if (host.kernel_release.empty() && host.hostname.empty() && host.cmdline.empty()) {
        st.state = CollectorState::no_data;
        st.message = "no procfs in this root";
        st.path = "/proc";
    }
    return st;
}

}  // namespace gpudx
