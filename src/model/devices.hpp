#pragma once
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

struct DeviceNode {
    std::string path;  // /dev/nvidia0
    std::string type;  // char, block, directory, missing, other, unknown (exists, could not be examined)
    std::optional<uint32_t> major, minor;
    std::optional<uint32_t> mode;  // permission bits
    std::optional<uint32_t> gid;   // owning group (live, or a capture's devnode record that carries it)
    std::string group;             // its name from /etc/group in the root (video, render ...); empty when unknown
    std::optional<bool> caller_can_open;  // unknown when replaying a capture
};

struct DeviceHolder {
    int pid = 0;
    std::string name;
    std::optional<uint32_t> uid;
    std::string state;   // first letter of /proc/PID/status State: R, S, D, Z ...
    std::string cgroup;  // the unified (v2) path, else the devices controller's, else the first
    std::string container_id;
    std::string slurm_job_id;  // from a job_NNN component of the cgroup path
    // Whether the cgroup directory still exists under /sys/fs/cgroup; unknown when that tree is not readable.
    std::optional<bool> cgroup_exists;
    std::vector<std::string> devices;  // device paths it holds open
};

struct DevicesLayer {
    std::vector<DeviceNode> nodes;
    std::vector<DeviceHolder> holders;
    unsigned processes_scanned = 0;
    unsigned processes_unreadable = 0;  // fd table not readable (EACCES when not root)
};

}  // namespace gpudx
