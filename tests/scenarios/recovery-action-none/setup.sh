#!/usr/bin/env bash
# No recovery pending (NVML_GPU_RECOVERY_ACTION_NONE, 0): a healthy GPU on a driver that has the field.
set -euo pipefail
"$SCENARIO"/../recovery-action.sh 0
