#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

struct HostInfo {
    std::string hostname;
    std::string kernel_release;
    std::string kernel_version;
    std::string boot_id;
    std::string os_release;  // PRETTY_NAME
    std::string cmdline;
    std::optional<bool> secure_boot;
};

struct ContainerInfo {
    bool in_container = false;
    std::string runtime;  // docker, podman, kubernetes, containerd, crio, lxc, ""
    std::string container_id;
    std::string cgroup;
    std::vector<std::string> evidence;  // what told us, "FILE: value" or "VARIABLE=value"
};

struct EnvironmentLayer {
    ContainerInfo container;
    std::map<std::string, std::string> variables;  // GPU-relevant variables only
};

}  // namespace gpudx
