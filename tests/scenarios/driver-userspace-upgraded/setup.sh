#!/usr/bin/env bash
# The driver's user-space libraries were upgraded to 580.172.08 while the 580.159.04 kernel module stays
# loaded (no reboot, no module reload). The loader picks the new libnvidia-ml and libcuda: nvmlInit fails
# with "Driver/library version mismatch" and cuInit with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, and the kernel
# logs NVRM's API mismatch each time a client opens the driver.
set -euo pipefail
for dir in usr/local/nvidia/lib64 lib; do
  mkdir -p "$dir"
  for lib in libcuda libnvidia-ml; do
    : > "$dir/$lib.so.580.172.08"
    ln -s "$lib.so.580.172.08" "$dir/$lib.so.1"
  done
done
cat >> _commands/dmesg.txt <<'LOG'
[ 9604.227310] NVRM: API mismatch: the client has the version 580.172.08, but
[ 9604.227310] NVRM: this kernel module has the version 580.159.04.  Please
[ 9604.227310] NVRM: make sure that this kernel module and all NVIDIA driver
[ 9604.227310] NVRM: components have the same version.
LOG
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "faults": [{"call": "nvmlInit", "result": 18}, {"call": "cuInit", "result": 803}]
}
JSON
