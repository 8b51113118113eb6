#!/usr/bin/env bash
# A job script copied from another node pins its GPUs by that node's ROCm UUIDs: the first one is no GPU here,
# so ROCm hides every GPU and the job fails with "no ROCm-capable device is detected".
set -euo pipefail
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=90112
ROCR_VISIBLE_DEVICES=GPU-5c6b9d1e2f3a4b7c,GPU-6d7c0e2f3a4b5c8d
ENV
