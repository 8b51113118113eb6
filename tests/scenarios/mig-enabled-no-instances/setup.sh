#!/usr/bin/env bash
# MIG mode was enabled on GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) and survives reboots, but
# its GPU and compute instances do not: after the node rebooted nobody re-created them. NVML lists the GPU
# (MIG on, no instance); CUDA cannot run on a MIG GPU without an instance, so it enumerates only
# 0000:00:06.0.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "nvml_device_override": {
  "1": {"mig_mode": true, "mig_uuids": []}
 },
 "cuda_drop_devices": [1]
}
JSON
