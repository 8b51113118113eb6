#!/usr/bin/env bash
# The same forward-compatibility libcuda, but the job puts /usr/local/cuda/compat first on LD_LIBRARY_PATH
# (as the CUDA images' entrypoint does on data-center GPUs): the loader picks it, so it is a second libcuda,
# named as the forward-compatibility copy.
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
: > "$compat/libcuda.so.590.44.01"
ln -s libcuda.so.590.44.01 "$compat/libcuda.so.1"
ln -s cuda-12.8 usr/local/cuda
cat > _commands/environment.txt <<'ENV'
LD_LIBRARY_PATH=/usr/local/cuda/compat
PATH=/usr/local/cuda/bin:/usr/bin:/bin
ENV
