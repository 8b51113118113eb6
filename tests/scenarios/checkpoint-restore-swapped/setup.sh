#!/usr/bin/env bash
# A CUDA process was checkpointed and restored with the device map {GPU 0 -> GPU 1, GPU 1 -> GPU 0}. After
# the restore each CUDA ordinal's UUID follows its new GPU but cuDeviceGetPCIBusId still answers the old
# card's address: ordinal 0 claims 0000:00:06.0 with the UUID of 0000:00:07.0 and the reverse, so NVML
# and NCCL, which look GPUs up by bus id, resolve the wrong card. The CUDA answers are those the restored
# process gets (tests/standins/scenarios/stale-bus-id.json).
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json "$STANDIN_SCENARIOS"/stale-bus-id.json _driver/
echo '{"base": "stale-bus-id.json"}' > _driver/answers.json
