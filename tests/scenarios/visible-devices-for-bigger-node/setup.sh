#!/usr/bin/env bash
# A job template written for the cluster's 4-GPU nodes hard-codes CUDA_VISIBLE_DEVICES=0,1,2,3 and landed
# on this 2-GPU node: CUDA stops at index 2, so the job runs on 2 GPUs while its launcher starts 4 ranks.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json"}' > _driver/answers.json
cat > _commands/environment.txt <<'ENV'
CUDA_VISIBLE_DEVICES=0,1,2,3
CUDA_DEVICE_ORDER=PCI_BUS_ID
PATH=/usr/bin:/bin
ENV
