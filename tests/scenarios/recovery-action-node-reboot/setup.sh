#!/usr/bin/env bash
# The driver asks for a node reboot (NVML_GPU_RECOVERY_ACTION_NODE_REBOOT, 2).
# The H200s of the capture answer NVML_FI_DEV_GET_GPU_RECOVERY_ACTION Not Supported in h200x2.json (it has no
# "gpu_recovery_action"), as a driver older than the field does; this scenario makes GPU-40cd403d-66ba-4608-72b9-5be5031085dc
# (0000:00:07.0, NVML index 1) answer 2; everything else is the capture as recorded.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "nvml_device_override": {
  "1": {"gpu_recovery_action": 2}
 }
}
JSON
