#include "model/json_support.hpp"
#include "model/layer_json.hpp"

namespace gpudx {
GPUDX_JSON(DeviceNode, path, type, major, minor, mode, gid, group, caller_can_open)
GPUDX_JSON(DeviceHolder, pid, name, uid, state, cgroup, container_id, slurm_job_id, cgroup_exists, devices)
GPUDX_JSON(DevicesLayer, nodes, holders, processes_scanned, processes_unreadable)
GPUDX_DEFINE_LAYER_JSON(DevicesLayer)
}  // namespace gpudx
