#!/usr/bin/env bash
# A capture assembled from two gathers of this node: /sys, /proc and /dev from today's, and _driver/ (NVML and
# CUDA answers) copied from one taken before a maintenance moved GPU-992cb470-9027-88f4-48a9-a9a329d6978d
# from 0000:00:08.0 (on a riser since retired) to 0000:00:06.0. The recorded answers still place that card
# at 0000:00:08.0, and give GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) device minor 0: it
# was the first card the driver probed then. gpudx must flag the answers as not matching the node.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
python3 - <<'PY'
import json
base = json.load(open("_driver/h200x2.json"))
n0, n1 = base["nvml"]["devices"]          # 0000:00:06.0 GPU-992cb470..., 0000:00:07.0 GPU-40cd403d...
c0, c1 = base["cuda"]["devices"]
# Then: index/ordinal 0 = GPU-40cd403d at 0000:00:07.0 (minor 0), 1 = GPU-992cb470 at 0000:00:08.0 (minor 1).
n1.update(index=0, minor=0)
n0.update(index=1, minor=1, bus_id="00000000:00:08.0")
c1.update(ordinal=0)
c0.update(ordinal=1, bus_id="0000:00:08.0", pci="0000:00:08.0", attr_device=8)
base["nvml"]["devices"] = [n1, n0]
base["cuda"]["devices"] = [c1, c0]
base["recorded_from"] = "this node before the maintenance (GPU-992cb470 at 0000:00:08.0)"
json.dump(base, open("_driver/answers.json", "w"), indent=1)
PY
rm _driver/h200x2.json
