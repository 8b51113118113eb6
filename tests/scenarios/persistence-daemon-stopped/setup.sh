#!/usr/bin/env bash
# nvidia-persistenced is not running (its unit was disabled by a driver reinstall): NVML reports persistence
# mode off on both H200s, so the driver tears the GPUs down whenever the last client exits and every CUDA
# start pays for re-initialisation.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "nvml_device_override": {
  "0": {"persistence_mode": false},
  "1": {"persistence_mode": false}
 }
}
JSON
