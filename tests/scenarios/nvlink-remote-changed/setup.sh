#!/usr/bin/env bash
# The node record (record.json beside this file: `gpudx baseline save` of this capture with the stand-in driver's
# answers) has every NVLink of both H200s leading to an NVSwitch. Now NVLink 3 of GPU-992cb470 (0000:00:06.0) and
# NVLink 11 of GPU-40cd403d (0000:00:07.0) answer a GPU at their other end: the NVLink topology changed.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
python3 - <<'PY'
import json
base = json.load(open("_driver/h200x2.json"))
links = [json.loads(json.dumps(d["nvlinks"])) for d in base["nvml"]["devices"]]
links[0][3]["remote_type"] = "gpu"
links[1][11]["remote_type"] = "gpu"
json.dump({"base": "h200x2.json", "nvml_device_override": {"0": {"nvlinks": links[0]}, "1": {"nvlinks": links[1]}}},
          open("_driver/answers.json", "w"), indent=1)
PY
