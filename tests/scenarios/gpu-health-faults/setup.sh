#!/usr/bin/env bash
# The GPU's own health on both H200s, as NVML reports it (docs/gpu-health.md). GPU-992cb470 (0000:00:06.0): NVLink 7
# down among 17 active links, link 3's replay counter growing between the two samples, the hardware holding the
# clocks down (HW slowdown + HW thermal slowdown) in both samples at 90 °C (slowdown at 89). GPU-40cd403d
# (0000:00:07.0): 2 DRAM banks near their last spare row, and its PCIe link replaying (120 -> 134).
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
python3 - <<'PY'
import json
base = json.load(open("_driver/h200x2.json"))
d0, d1 = (json.loads(json.dumps(d)) for d in base["nvml"]["devices"])
d0["nvlinks"][7]["active"] = False
s0 = d0["health"]["samples"][0]
s0.update(clock_event_reasons=0x48, temperature_c=90)
s0["nvlink_errors"] = [e for e in s0["nvlink_errors"] if e["link"] != 7]
s0["nvlink_errors"][3]["replay"] = 12
s1 = json.loads(json.dumps(s0))
s1["after_ms"] = 50
s1["nvlink_errors"][3]["replay"] = 19
d0["health"]["samples"] = [s0, s1]
d1["health"]["row_remap_histogram"] = {"max": 3060, "high": 8, "partial": 2, "low": 1, "none": 1}
t0 = d1["health"]["samples"][0]
t0["pcie_replays"] = 120
t1 = json.loads(json.dumps(t0))
t1["after_ms"] = 50
t1["pcie_replays"] = 134
d1["health"]["samples"] = [t0, t1]
json.dump({"base": "h200x2.json", "nvml_device_override": {"0": {"nvlinks": d0["nvlinks"], "health": d0["health"]},
                                                           "1": {"health": d1["health"]}}},
          open("_driver/answers.json", "w"), indent=1)
PY
