#!/usr/bin/env bash
# Slurm job 88213 runs a Docker container that was given its two GPUs' render nodes
# (--device /dev/dri/renderD128 --device /dev/dri/renderD129) but not --device /dev/kfd: HIP finds no GPU
# ("hipErrorNoDevice"). pid 3141 (python3) already holds renderD128. /proc and /sys are the host's.
set -euo pipefail
mkdir -p proc/1 proc/3141/fd
printf '0::/system.slice/docker-8c1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7.scope\n' > proc/1/cgroup
rm -f dev/kfd.devnode
for m in 130 131 132 133 134 135; do rm -f "dev/dri/renderD$m.devnode"; done
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=88213
SLURM_JOB_GPUS=0,1
ROCR_VISIBLE_DEVICES=0,1
ENV
printf 'python3\n' > proc/3141/comm
printf 'Name:\tpython3\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1000\n' > proc/3141/status
printf '0::/system.slice/docker-8c1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7.scope\n' > proc/3141/cgroup
ln -s /dev/dri/renderD128 proc/3141/fd/5
