#!/usr/bin/env bash
# Every node running NVIDIA's CUDA container images carries the forward-compatibility libcuda in
# /usr/local/cuda/compat. The loader opens it only when LD_LIBRARY_PATH or ld.so.conf names that folder;
# here nothing does, so the node is healthy: the compat copy is no second libcuda the loader could pick.
set -euo pipefail
compat=usr/local/cuda-12.8/compat
mkdir -p "$compat"
: > "$compat/libcuda.so.570.124.06"
printf 'libcuda.so.570.124.06\n' > "$compat/libcuda.so.1"
ln -s cuda-12.8 usr/local/cuda
