#!/usr/bin/env bash
# A Kubernetes pod correctly given one GPU: the NVIDIA device plugin allocated
# GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) and the NVIDIA runtime injected /dev/nvidia1
# only. NVML and CUDA inside the pod see that card alone; /proc and /sys still show the host's two GPUs.
set -euo pipefail
mkdir -p proc/1
printf '0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod7c1d2e3f_4a5b_4c6d_8e9f_0a1b2c3d4e5f.slice/cri-containerd-9e8d7c6b5a4f30211203f4e5d6c7b8a99e8d7c6b5a4f30211203f4e5d6c7b8a9.scope\n' > proc/1/cgroup
cat > _commands/environment.txt <<'ENV'
NVIDIA_VISIBLE_DEVICES=GPU-40cd403d-66ba-4608-72b9-5be5031085dc
NVIDIA_DRIVER_CAPABILITIES=compute,utility
KUBERNETES_SERVICE_HOST=10.96.0.1
KUBERNETES_SERVICE_PORT=443
PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin
ENV
rm -f dev/nvidia0.devnode
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json", "nvml_drop_devices": [0], "cuda_drop_devices": [0]}' > _driver/answers.json
