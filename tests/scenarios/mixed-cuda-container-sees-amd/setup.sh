#!/usr/bin/env bash
# On the mixed host (2×H200 + 2×MI300X), a CUDA container was given both H200s by the NVIDIA runtime, but its
# compose file also passes --device /dev/dri (for video decode) and --device /dev/kfd: it can open both
# MI300Xs, which the scheduler gives to other jobs.
set -euo pipefail
python3 "$FIXTURES/make_mi300x8.py" --add-to . --gpus 0000:00:08.0,0000:00:09.0 --rocm 6.2.0
mkdir -p proc/1
printf '0::/system.slice/docker-2b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfe.scope\n' > proc/1/cgroup
cat > _commands/environment.txt <<'ENV'
NVIDIA_VISIBLE_DEVICES=GPU-992cb470-9027-88f4-48a9-a9a329d6978d,GPU-40cd403d-66ba-4608-72b9-5be5031085dc
NVIDIA_DRIVER_CAPABILITIES=compute,utility
CUDA_VERSION=12.8.1
ENV
