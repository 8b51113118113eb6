#pragma once
// Pure parsers for the per-process files the devices and environment collectors read
// (/proc/PID/status, /proc/PID/cgroup) and for what a cgroup path says about its owner.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

struct ProcStatus {
    std::optional<uint32_t> uid;  // real uid, first field of "Uid:"
    std::string state;            // "Z" from "State:\tZ (zombie)"
    std::string name;             // "Name:"
    std::optional<uint32_t> ppid; // "PPid:"
};
ProcStatus parse_proc_status(std::string_view text);

struct CgroupLine {
    unsigned hierarchy = 0;
    std::vector<std::string> controllers;  // empty for the unified (v2) line "0::/path"
    std::string path;
};
// Lines "ID:CONTROLLERS:PATH"; malformed lines are skipped.
std::vector<CgroupLine> parse_proc_cgroup(std::string_view text);
// The path that best names the process's cgroup: v2 line, else the devices controller, else the first.
std::string primary_cgroup_path(const std::vector<CgroupLine>& lines);
// Where that cgroup lives: {mount, directory}, e.g. {"/sys/fs/cgroup", "/sys/fs/cgroup/system.slice/x.scope"}, or
// {"/sys/fs/cgroup/devices", ...} for v1. v2_mount is where the unified hierarchy is mounted ("/sys/fs/cgroup", or
// "/sys/fs/cgroup/unified" on hybrid systems). Both empty when there is no line.
struct CgroupLocation {
    std::string mount, directory;
};
CgroupLocation cgroup_directory(const std::vector<CgroupLine>& lines, std::string_view v2_mount = "/sys/fs/cgroup");

struct CgroupOwner {
    std::string runtime;       // docker, containerd, crio, podman, kubernetes, lxc, slurm, ""
    std::string container_id;  // 64 hex digits, when the path names one
    std::string slurm_job_id;  // from "job_NNN"
};
// Reads "docker-<id>.scope", "/docker/<id>", "cri-containerd-<id>.scope", "crio-<id>.scope", "libpod-<id>.scope",
// "/kubepods...", "/lxc/NAME", "/slurm/uid_N/job_N/..." and the systemd-slurm "job_N" forms.
CgroupOwner cgroup_owner(std::string_view path);

}  // namespace gpudx
