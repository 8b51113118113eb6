#!/usr/bin/env bash
# ROCm SMI's device 1 sits at 0000:26:00.0 but reports the unique id and render node of the GPU at 0000:85:00.0
# (a library from another ROCm release reading a stale table): anything keyed by ROCm SMI names the wrong GPU.
set -euo pipefail
mv _driver/answers.json _driver/recorded.json
uid=$(python3 -c 'import json; print(json.load(open("_driver/recorded.json"))["rocm_smi"]["devices"][4]["unique_id"])')
echo "{\"base\": \"recorded.json\", \"rocm_smi_device_override\": {\"1\": {\"unique_id\": \"$uid\", \"render_minor\": 132}}}" \
  > _driver/answers.json
