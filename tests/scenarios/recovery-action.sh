#!/usr/bin/env bash
# recovery-action.sh N: the setup of the recovery-action-* scenarios. The H200s of the capture answer
# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION Not Supported in h200x2.json (it has no "gpu_recovery_action"), as a driver
# older than the field does; with N, GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0, NVML index 1)
# answers N (nvmlDeviceGpuRecoveryAction_t); without N, the capture's answers stay as recorded.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
if [[ $# -eq 0 ]]; then
  echo '{"base": "h200x2.json"}' > _driver/answers.json
else
  printf '{"base": "h200x2.json", "nvml_device_override": {"1": {"gpu_recovery_action": %d}}}\n' "$1" > _driver/answers.json
fi
