#!/usr/bin/env bash
# A job's wrapper script hides the GPUs from its CPU-only preprocessing step with
# `export CUDA_VISIBLE_DEVICES=` and never restores them: the training step inherits the empty value, and
# CUDA sees no GPU although both H200s are healthy (NVML, which ignores the variable, lists both).
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json"}' > _driver/answers.json
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=6230
SLURM_STEP_ID=1
SLURM_JOB_GPUS=0,1
SLURM_STEP_GPUS=0,1
CUDA_VISIBLE_DEVICES=
PATH=/usr/bin:/bin
ENV
