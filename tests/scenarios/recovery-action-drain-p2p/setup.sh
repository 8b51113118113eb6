#!/usr/bin/env bash
# The driver asks for peer-to-peer traffic to be drained (NVML_GPU_RECOVERY_ACTION_DRAIN_P2P, 3).
set -euo pipefail
"$SCENARIO"/../recovery-action.sh 3
