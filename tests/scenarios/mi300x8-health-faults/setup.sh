#!/usr/bin/env bash
# The AMD GPUs' own health as ROCm SMI reports it (docs/amd.md, "Health"), from the stand-in scenario
# mi300x8-health-faults.json over the fixture's recorded answers: GPU 1 (0000:26:00.0) junction at 98 °C (critical
# 100) and throttled for the hotspot in both samples, GPU 2 (0000:46:00.0) UMC corrected errors growing 112 -> 130,
# the XGMI link between GPUs 3 and 5 (0000:65:00.0, 0000:a6:00.0) down (PCIe, 3 hops), GPU 6 (0000:c6:00.0) an XGMI
# error, GPU 7 (0000:e5:00.0) HBM at 106 °C over its critical 105 °C in both samples.
set -euo pipefail
mv _driver/answers.json _driver/recorded.json
python3 - "$STANDIN_SCENARIOS"/mi300x8-health-faults.json <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["base"] = "recorded.json"
json.dump(doc, open("_driver/answers.json", "w"), indent=1)
PY
