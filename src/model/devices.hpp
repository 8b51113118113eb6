#pragma once
#include <optional>
#include <string>
#include <vector>

namespace gpudx {

struct DeviceNode {
    std::string path;  // /dev/nvidia0
    std::string type;  // char, block, missing, other
    std::optional<uint32_t> major, minor;
    std::optional<uint32_t> mode;  // permission bits
    std::optional<bool> caller_can_open;  // unknown when replaying a capture
};

struct DeviceHolder {
    int pid = 0;
    std::string name;
    std::optional<uint32_t> uid;
    std::string cgroup;
    std::string container_id;
    std::vector<std::string> devices;  // device paths it holds open
};

struct DevicesLayer {
    std::vector<DeviceNode> nodes;
    std::vector<DeviceHolder> holders;
};

}  // namespace gpudx
