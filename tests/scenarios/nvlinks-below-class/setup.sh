#!/usr/bin/env bash
# The node's class says each GPU has 18 NVLinks active (matrix.toml beside this file, `nvlinks_active = 18`).
# GPU-40cd403d (0000:00:07.0) answers NVLinks 7 and 12 inactive, its other 16 active: one error from the class
# naming the GPU and both links, and not health.nvlink_down beside it (one finding per fact).
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
python3 - <<'PY'
import json
base = json.load(open("_driver/h200x2.json"))
d1 = json.loads(json.dumps(base["nvml"]["devices"][1]))
for link in (7, 12):
    d1["nvlinks"][link]["active"] = False
for s in d1["health"]["samples"]:
    s["nvlink_errors"] = [e for e in s["nvlink_errors"] if e["link"] not in (7, 12)]
json.dump({"base": "h200x2.json", "nvml_device_override": {"1": {"nvlinks": d1["nvlinks"], "health": d1["health"]}}},
          open("_driver/answers.json", "w"), indent=1)
PY
