#!/usr/bin/env bash
# A driver older than NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: the capture's own answers, which have no
# "gpu_recovery_action", so the stand-in answers the field Not Supported for both GPUs. gpudx lists the field among
# the unsupported queries and reports nothing: an old driver is not a fault.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json"}' > _driver/answers.json
