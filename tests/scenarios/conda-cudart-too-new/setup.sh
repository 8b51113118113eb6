#!/usr/bin/env bash
# A job activates a conda environment whose cuda-cudart package is CUDA 13.1 (libcudart.so.13 ->
# libcudart.so.13.1.80, first on LD_LIBRARY_PATH), while the node's driver branch 580 supports CUDA 13.0:
# the runtime starts only through minor-version compatibility (PTX built for 13.1 cannot be JIT-compiled).
set -euo pipefail
env_lib=opt/conda/envs/train/lib
mkdir -p "$env_lib"
: > "$env_lib/libcudart.so.13.1.80"
ln -s libcudart.so.13.1.80 "$env_lib/libcudart.so.13"
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=9310
CONDA_PREFIX=/opt/conda/envs/train
LD_LIBRARY_PATH=/opt/conda/envs/train/lib
PATH=/opt/conda/envs/train/bin:/usr/bin:/bin
ENV
