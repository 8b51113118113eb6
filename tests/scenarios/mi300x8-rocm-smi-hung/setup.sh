#!/usr/bin/env bash
# The driver is wedged on the GPU at 0000:a6:00.0 (ROCm SMI device 5): its ECC counters never answer. gpudx runs
# the ROCm SMI probe in a child it kills at the deadline (0.5 s here) and names the call and the GPU, from the
# address the probe had already sent.
set -euo pipefail
mv _driver/answers.json _driver/recorded.json
echo '{"base": "recorded.json", "faults": [{"call": "rsmi_dev_ecc_count_get", "device": 5, "hang": true}]}' \
  > _driver/answers.json
