#!/usr/bin/env bash
# Besides its two H200s this node carries an AMD Instinct MI210 (0000:00:08.0) for ROCm builds. amdgpu loads
# and binds it, so /dev/dri/renderD128 exists, but the node's custom kernel (6.18.44-fc) was configured
# without CONFIG_HSA_AMD: amdgpu has no KFD, /dev/kfd is never created, and ROCm/HIP sees no GPU.
set -euo pipefail
addr=0000:00:08.0
dev=sys/devices/pci0000:00/$addr
mkdir -p "$dev"
echo 0x038000 > "$dev/class"
echo 0x1002 > "$dev/vendor"
echo 0x740f > "$dev/device"
echo 0x1002 > "$dev/subsystem_vendor"
echo 0x0c34 > "$dev/subsystem_device"
echo 0x02 > "$dev/revision"
echo -1 > "$dev/numa_node"
echo "32.0 GT/s PCIe" > "$dev/current_link_speed"
echo "32.0 GT/s PCIe" > "$dev/max_link_speed"
echo 16 > "$dev/current_link_width"
echo 16 > "$dev/max_link_width"
echo "../../../bus/pci/drivers/amdgpu" > "$dev/driver"
printf 'DRIVER=amdgpu\nPCI_CLASS=38000\nPCI_ID=1002:740F\nPCI_SUBSYS_ID=1002:0C34\nPCI_SLOT_NAME=%s\n' "$addr" > "$dev/uevent"
echo "../../../devices/pci0000:00/$addr" > "sys/bus/pci/devices/$addr"
echo "amdgpu 15065088 0 - Live 0xffffffffc1e00000" >> proc/modules
mkdir -p dev/dri
echo "0o20660 226:128" > dev/dri/renderD128.devnode
cat >> _commands/dmesg.txt <<'LOG'
[    0.612004] [drm] amdgpu kernel modesetting enabled.
[    0.612871] amdgpu 0000:00:08.0: enabling device (0000 -> 0002)
[    1.402210] [drm] Initialized amdgpu 3.64.0 for 0000:00:08.0 on minor 0
LOG
