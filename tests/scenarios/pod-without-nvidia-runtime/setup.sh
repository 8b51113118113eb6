#!/usr/bin/env bash
# A Kubernetes pod was allocated GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) by the NVIDIA
# device plugin, which set NVIDIA_VISIBLE_DEVICES, but the pod spec has no runtimeClassName: nvidia and
# the node's default runtime is runc, so the NVIDIA hook never ran. The container has no /dev/nvidia*
# node and none of the driver's libraries (/usr/local/nvidia/lib64 is empty, and the image's loader cache,
# built without them, does not list them); /proc and /sys still show the host's driver and both GPUs.
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
rm -f dev/nvidia*.devnode
rm -rf dev/nvidia-caps
sed -i -e '/libcuda\.so/d' -e '/libnvidia-ml\.so/d' -e '/libcudadebugger\.so/d' -e '/libvdpau_nvidia\.so/d' \
    _commands/ldconfig-p.txt
mkdir -p usr/local/nvidia/lib64
