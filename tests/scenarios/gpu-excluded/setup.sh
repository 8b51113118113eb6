#!/usr/bin/env bash
# 0000:00:07.0 was excluded with NVreg_ExcludedGpus: the driver lists it as excluded, NVML and CUDA will not use it.
set -euo pipefail
sed -i 's/^GPU Excluded:.*/GPU Excluded:\t Yes/' proc/driver/nvidia/gpus/0000:00:07.0/information
sed -i 's/^ExcludedGpus: .*/ExcludedGpus: "GPU-40cd403d-66ba-4608-72b9-5be5031085dc"/' proc/driver/nvidia/params
