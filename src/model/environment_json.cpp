#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_JSON(HostInfo, hostname, kernel_release, kernel_version, boot_id, os_release, cmdline, secure_boot)
GPUDX_JSON(ContainerInfo, in_container, runtime, container_id, cgroup, evidence)
GPUDX_JSON(EnvironmentLayer, container, variables)
GPUDX_DEFINE_LAYER_JSON(HostInfo)
GPUDX_DEFINE_LAYER_JSON(EnvironmentLayer)
}  // namespace gpudx
