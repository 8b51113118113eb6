#!/usr/bin/env bash
# The driver is wedged on GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0): every new driver call
# that touches the GPU blocks. NVML's nvmlDeviceGetUUID for device 1 never returns, nor does cuInit. gpudx
# runs each probe in a child it kills at the deadline (0.5 s here, so the test stays fast) and reports the
# call that hung.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "faults": [{"call": "nvmlDeviceGetUUID", "device": 1, "hang": true},
            {"call": "cuInit", "hang": true}]
}
JSON
