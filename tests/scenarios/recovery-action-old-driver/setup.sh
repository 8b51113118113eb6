#!/usr/bin/env bash
# A driver older than NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: the capture's own answers, so the stand-in answers the field Not Supported for both GPUs; gpudx lists it among the unsupported queries and reports nothing (an old driver is not a fault).
set -euo pipefail
"$SCENARIO"/../recovery-action.sh 
