#!/usr/bin/env bash
# The driver asks for a drain and reset: the GPU runs at reduced capacity (NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET, 4).
set -euo pipefail
"$SCENARIO"/../recovery-action.sh 4
