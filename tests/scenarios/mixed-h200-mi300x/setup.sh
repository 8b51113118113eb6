#!/usr/bin/env bash
# The 2×H200 node with two AMD Instinct MI300Xs added at 0000:00:08.0 and 0000:00:09.0 (amdgpu 6.8.5, ROCm
# 6.2.0, both in the KFD topology, /dev/kfd and their render nodes): a mixed-vendor host, healthy.
set -euo pipefail
python3 "$FIXTURES/make_mi300x8.py" --add-to . --gpus 0000:00:08.0,0000:00:09.0 --rocm 6.2.0
