#pragma once
// Pure parsers behind collect_devices (collectors.hpp), exposed for unit tests.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/root.hpp"
#include "model/collector_status.hpp"
#include "model/devices.hpp"

namespace gpudx {

// /etc/group: "name:password:gid:members" per line -> gid to name (first name wins for a gid); malformed lines skipped.
std::map<uint32_t, std::string> parse_etc_group(std::string_view text);

// The GPU device nodes under the root's /dev (nvidia*, nvidia-caps/*, kfd, dri/renderD*), into layer.nodes; nodes
// that exist but cannot be examined become problems of `status`. collect_devices and the per-process view share it.
void collect_device_nodes(const Root& root, DevicesLayer& layer, CollectorStatus& status);
// The GPU device files process `pid` holds open (/proc/PID/fd), sorted; an Error when its fd table is unreadable
// (another user's process: EACCES) or gone (ENOENT).
Result<std::vector<std::string>> open_gpu_devices(const Root& root, int pid);

}  // namespace gpudx
