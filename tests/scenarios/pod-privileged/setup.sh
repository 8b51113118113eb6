#!/usr/bin/env bash
# A Kubernetes pod was allocated GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) by the NVIDIA
# device plugin, but it runs with securityContext.privileged: true, which gives it every host device
# node: /dev/nvidia0 (GPU-992cb470-9027-88f4-48a9-a9a329d6978d, 0000:00:06.0, another pod's card) too.
set -euo pipefail
# The pod: containerd under the kubelet (its cgroup names the pod and the container).
mkdir -p proc/1
printf '0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_5f60_4a1b_9c2d_3e4f5a6b7c8d.slice/cri-containerd-4f9a1c2b3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8.scope\n' > proc/1/cgroup
cat > _commands/environment.txt <<'ENV'
NVIDIA_VISIBLE_DEVICES=GPU-40cd403d-66ba-4608-72b9-5be5031085dc
NVIDIA_DRIVER_CAPABILITIES=compute,utility
KUBERNETES_SERVICE_HOST=10.96.0.1
KUBERNETES_SERVICE_PORT=443
PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin
ENV
