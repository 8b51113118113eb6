#!/usr/bin/env bash
# An operator replays this node's capture with `gpudx diagnose --root` on another 2×H200 node without
# --no-driver: the host layers are the capture's, but NVML and CUDA answer for the machine gpudx runs on, which
# has driver 570.86.15 (CUDA 12.8) and other cards at the same two addresses. gpudx must notice that the
# driver answers are not this node's. (The stand-ins play the other node's driver.)
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
python3 - <<'PY'
import json
base = json.load(open("_driver/h200x2.json"))
other = {"GPU-992cb470-9027-88f4-48a9-a9a329d6978d": "GPU-7c3a9e10-4b2d-5f81-96ae-0d1f2e3c4b5a",
         "GPU-40cd403d-66ba-4608-72b9-5be5031085dc": "GPU-e2b41f6d-83c5-27a9-d0f4-5a6b7c8d9e01"}
cuda = base["cuda"]
cuda["driver_version"] = 12080
for d in cuda["devices"]:
    d["uuid"] = other[d["uuid"]]
json.dump({
    "base": "h200x2.json",
    "nvml_override": {"driver_version": "570.86.15", "nvml_version": "12.570.86.15", "cuda_driver_version": 12080},
    "nvml_device_override": {
        "0": {"uuid": other["GPU-992cb470-9027-88f4-48a9-a9a329d6978d"], "serial": "1652925031187"},
        "1": {"uuid": other["GPU-40cd403d-66ba-4608-72b9-5be5031085dc"], "serial": "1652925030954"}},
    "cuda": cuda,
}, open("_driver/answers.json", "w"), indent=1)
PY
