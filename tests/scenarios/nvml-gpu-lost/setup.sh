#!/usr/bin/env bash
# GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) fell off the bus during a job (Xid 79). PCIe
# still enumerates it from the boot-time state, but the driver has marked it lost: NVML answers
# NVML_ERROR_GPU_IS_LOST for it (as `nvidia-smi` does: "Unable to determine the device handle for GPU
# 0000:00:07.0: GPU is lost"), and CUDA enumerates only 0000:00:06.0.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "faults": [{"call": "nvmlDeviceGetHandleByIndex", "device": 1, "result": 15}],
 "cuda_drop_devices": [1]
}
JSON
cat >> _commands/dmesg.txt <<'LOG'
[ 7342.118734] NVRM: GPU at PCI:0000:00:07: GPU-40cd403d-66ba-4608-72b9-5be5031085dc
[ 7342.118741] NVRM: Xid (PCI:0000:00:07): 79, pid=51877, name=python3, GPU has fallen off the bus.
[ 7342.118755] NVRM: GPU 0000:00:07.0: GPU has fallen off the bus.
LOG
