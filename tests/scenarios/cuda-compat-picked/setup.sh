#!/usr/bin/env bash
# The same forward-compatibility libcuda, but the job puts /usr/local/cuda/compat first on LD_LIBRARY_PATH
# (as the CUDA images' entrypoint does on data-center GPUs): the loader picks it, so it is a second libcuda,
# named as the forward-compatibility copy.
set -euo pipefail
compat=usr/local/cuda-12.8/compat
mkdir -p "$compat"
: > "$compat/libcuda.so.590.44.01"
printf 'libcuda.so.590.44.01\n' > "$compat/libcuda.so.1"
ln -s cuda-12.8 usr/local/cuda
cat > _commands/environment.txt <<'ENV'
LD_LIBRARY_PATH=/usr/local/cuda/compat
PATH=/usr/local/cuda/bin:/usr/bin:/bin
ENV
