#!/usr/bin/env bash
# Slurm job 8813 was allocated one GPU (global index 0: GPU-992cb470-9027-88f4-48a9-a9a329d6978d,
# 0000:00:06.0) on a node with ConstrainDevices=yes: the job's device cgroup lets it open /dev/nvidia0 only,
# so NVML and CUDA inside the job list that one card, while PCIe, /proc/driver/nvidia and /dev still show
# both. This is the correct confinement: nothing is missing.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json", "nvml_drop_devices": [1], "cuda_drop_devices": [1]}' > _driver/answers.json
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=8813
SLURM_STEP_ID=0
SLURM_JOB_GPUS=0
SLURM_STEP_GPUS=0
SLURM_LOCALID=0
CUDA_VISIBLE_DEVICES=0
PATH=/usr/bin:/bin
ENV
