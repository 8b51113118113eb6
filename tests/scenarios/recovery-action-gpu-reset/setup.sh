#!/usr/bin/env bash
# The driver asks for a GPU reset of one GPU (NVML_GPU_RECOVERY_ACTION_GPU_RESET, 1).
set -euo pipefail
"$SCENARIO"/../recovery-action.sh 1
