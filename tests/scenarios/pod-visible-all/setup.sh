#!/usr/bin/env bash
# A pod that requested no GPU runs an image built on nvidia/cuda, whose ENV sets NVIDIA_VISIBLE_DEVICES=all.
# The node's default runtime is nvidia and the toolkit accepts the variable from unprivileged containers,
# so both H200s were injected into it, outside the scheduler's accounting.
set -euo pipefail
# The pod: containerd under the kubelet (its cgroup names the pod and the container).
mkdir -p proc/1
printf '0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_5f60_4a1b_9c2d_3e4f5a6b7c8d.slice/cri-containerd-4f9a1c2b3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8.scope\n' > proc/1/cgroup
cat > _commands/environment.txt <<'ENV'
NVIDIA_VISIBLE_DEVICES=all
NVIDIA_DRIVER_CAPABILITIES=compute,utility
NVIDIA_REQUIRE_CUDA=cuda>=13.0
KUBERNETES_SERVICE_HOST=10.96.0.1
KUBERNETES_SERVICE_PORT=443
PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin
ENV
