#!/usr/bin/env bash
# The driver asks for a node reboot (NVML_GPU_RECOVERY_ACTION_NODE_REBOOT, 2).
set -euo pipefail
"$SCENARIO"/../recovery-action.sh 2
