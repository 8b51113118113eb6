#!/usr/bin/env bash
# Slurm allocated job 8812 one GPU (global index 1, 0000:00:07.0) but cgroup.conf lacks ConstrainDevices=yes,
# so the job can open both H200s: NVML inside it lists GPU-992cb470-9027-88f4-48a9-a9a329d6978d
# (0000:00:06.0) too, which belongs to whichever job Slurm gives it next.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json"}' > _driver/answers.json
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=8812
SLURM_STEP_ID=0
SLURM_JOB_GPUS=1
SLURM_STEP_GPUS=1
SLURM_LOCALID=0
CUDA_VISIBLE_DEVICES=1
PATH=/usr/bin:/bin
ENV
