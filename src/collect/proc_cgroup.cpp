#include "collect/proc_cgroup.hpp"

#include <cctype>

#include "core/text.hpp"

namespace gpudx {

ProcStatus parse_proc_status(std::string_view text) {
    ProcStatus st;
    for (auto line : split_lines(text)) {
        auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        auto key = line.substr(0, colon);
        auto value = trim(line.substr(colon + 1));
        if (key == "Uid") {
            auto f = split_ws(value);
            if (!f.empty())
                if (auto u = parse_uint(f[0]); u && *u <= UINT32_MAX) st.uid = static_cast<uint32_t>(*u);
        } else if (key == "State") {
            if (!value.empty()) st.state = std::string(value.substr(0, 1));
        } else if (key == "Name") {
            st.name = std::string(value);
        } else if (key == "PPid") {
            if (auto u = parse_uint(value); u && *u <= UINT32_MAX) st.ppid = static_cast<uint32_t>(*u);
        }
    }
    return st;
}

std::vector<CgroupLine> parse_proc_cgroup(std::string_view text) {
    std::vector<CgroupLine> out;
    for (auto line : split_lines(text)) {
        auto first = line.find(':');
        if (first == std::string_view::npos) continue;
        auto second = line.find(':', first + 1);
        if (second == std::string_view::npos) continue;
        auto id = parse_uint(line.substr(0, first));
        auto path = trim(line.substr(second + 1));
        if (!id || !path.starts_with("/")) continue;
        CgroupLine c;
        c.hierarchy = static_cast<unsigned>(*id);
        for (auto ctl : split(line.substr(first + 1, second - first - 1), ','))
            if (!ctl.empty()) c.controllers.emplace_back(ctl);
        c.path = std::string(path);
        out.push_back(std::move(c));
    }
    return out;
}

namespace {
const CgroupLine* primary_line(const std::vector<CgroupLine>& lines) {
    for (auto& l : lines)
        if (l.hierarchy == 0 && l.controllers.empty()) return &l;
    for (auto& l : lines)
        for (auto& c : l.controllers)
            if (c == "devices") return &l;
    return lines.empty() ? nullptr : &lines.front();
}

bool is_hex64(std::string_view s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

// The first 64-hex run in a path component, after any of the runtime prefixes.
std::string hex_id_in(std::string_view component) {
    for (size_t i = 0; i + 64 <= component.size(); ++i) {
        if (i > 0 && std::isxdigit(static_cast<unsigned char>(component[i - 1]))) continue;
        auto cand = component.substr(i, 64);
        if (is_hex64(cand) && (i + 64 == component.size() || !std::isxdigit(static_cast<unsigned char>(component[i + 64]))))
            return std::string(cand);
    }
    return {};
}
}  // namespace

std::string primary_cgroup_path(const std::vector<CgroupLine>& lines) {
    auto* l = primary_line(lines);
    return l ? l->path : std::string();
}

CgroupLocation cgroup_directory(const std::vector<CgroupLine>& lines, std::string_view v2_mount) {
    auto* l = primary_line(lines);
    if (!l) return {};
    std::string base(v2_mount);
    if (!l->controllers.empty()) {
        std::string ctl = l->controllers.front();
        if (ctl.starts_with("name=")) ctl = ctl.substr(5);
        base = "/sys/fs/cgroup/" + ctl;
    }
    return {base, l->path == "/" ? base : base + l->path};
}

CgroupOwner cgroup_owner(std::string_view path) {
    CgroupOwner o;
    auto parts = split(path, '/');
    for (size_t i = 0; i < parts.size(); ++i) {
        auto p = parts[i];
        if (p.empty()) continue;
        auto id = hex_id_in(p);
        if (p.starts_with("docker-") || (p == "docker" && i + 1 < parts.size())) {
            if (o.runtime.empty()) o.runtime = "docker";
        } else if (p.starts_with("cri-containerd-") || p == "containerd") {
            if (o.runtime.empty()) o.runtime = "containerd";
        } else if (p.starts_with("crio-")) {
            if (o.runtime.empty()) o.runtime = "crio";
        } else if (p.starts_with("libpod-")) {
            if (o.runtime.empty()) o.runtime = "podman";
        } else if (p.starts_with("kubepods")) {
            o.runtime = "kubernetes";
        } else if (p == "lxc" || p.starts_with("lxc.payload")) {
            if (o.runtime.empty()) o.runtime = "lxc";
        } else if (p.starts_with("job_")) {
            auto n = p.substr(4);
            if (parse_uint(n)) o.slurm_job_id = std::string(n);
        }
        if (!id.empty() && o.container_id.empty() && !p.starts_with("crio-conmon-")) o.container_id = id;
    }
    if (o.runtime.empty() && !o.slurm_job_id.empty()) o.runtime = "slurm";
    if (o.runtime.empty() && !o.container_id.empty()) o.runtime = "container";
    return o;
}

}  // namespace gpudx
