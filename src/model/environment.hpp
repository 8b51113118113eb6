#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudx {

// A variable of the environment something ran under (CUDA_VISIBLE_DEVICES for the CUDA probe): its value, or
// nullopt when it was unset. Reports and the snapshot spell unset kUnsetVariable, as they always have.
struct EnvValue : std::optional<std::string> {
    using std::optional<std::string>::optional;
    EnvValue(std::optional<std::string> value) : std::optional<std::string>(std::move(value)) {}
};
inline constexpr std::string_view kUnsetVariable = "<unset>";
// The value as reports show it.
inline std::string value_or_unset(const std::optional<std::string>& value) {
    return value ? *value : std::string(kUnsetVariable);
}

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
