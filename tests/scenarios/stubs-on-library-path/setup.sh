#!/usr/bin/env bash
# A job's image was built with the CUDA toolkit's stubs folder on LD_LIBRARY_PATH (to link against libcuda without
# a GPU) and kept it there; ldconfig, run in the build, gave the stub its soname link libcuda.so.1. At run time the
# loader picks the stub before the driver's libcuda, and cuInit fails with CUDA_ERROR_STUB_LIBRARY (error 34).
# Reported in public: "CUDA library is a stub, had to remove /usr/local/cuda/lib64/stubs"
# (fboulnois/stable-diffusion-docker issue 13), and the stubs folder added to ld.so.conf (NVIDIA/nvidia-docker
# issue 508).
set -euo pipefail
stubs=usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs
mkdir -p "$stubs"
: > "$stubs/libcuda.so"
ln -s libcuda.so "$stubs/libcuda.so.1"
cat > _commands/environment.txt <<ENV
LD_LIBRARY_PATH=/$stubs:/usr/local/nvidia/lib64
ENV
