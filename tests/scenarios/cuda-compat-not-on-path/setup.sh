#!/usr/bin/env bash
# Every node running NVIDIA's CUDA container images carries the forward-compatibility libcuda in
# /usr/local/cuda/compat. The loader opens it only when LD_LIBRARY_PATH or ld.so.conf names that folder;
# here nothing does, so the node is healthy: the compat copy is no second libcuda the loader could pick.
set -euo pipefail
# The driver's own libraries, where the capture's loader cache names them.
for dir in usr/local/nvidia/lib64 lib; do
  mkdir -p "$dir"
  for lib in libcuda libnvidia-ml; do
    : > "$dir/$lib.so.580.159.04"
    printf '%s.so.580.159.04\n' "$lib" > "$dir/$lib.so.1"
  done
done
compat=usr/local/cuda-12.8/compat
mkdir -p "$compat"
: > "$compat/libcuda.so.570.124.06"
ln -s libcuda.so.570.124.06 "$compat/libcuda.so.1"
ln -s cuda-12.8 usr/local/cuda
