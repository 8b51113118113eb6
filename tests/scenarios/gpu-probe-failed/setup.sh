#!/usr/bin/env bash
# The firmware left BAR1 of 0000:00:07.0 unassigned and the kernel runs with pci=realloc=off (see
# /proc/cmdline), so nvidia's probe refused the card: it stays on PCIe bound to no driver, the driver has no
# record or device node for it, and NVML and CUDA see only GPU-992cb470-9027-88f4-48a9-a9a329d6978d
# (0000:00:06.0).
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:07.0
rm -f "$dev/driver"
sed -i '/^DRIVER=/d' "$dev/uevent"
rm -rf proc/driver/nvidia/gpus/0000:00:07.0
rm -f dev/nvidia1.devnode
sed -i '/NVRM: loading NVIDIA UNIX/r /dev/stdin' _commands/dmesg.txt <<'LOG'
[    0.551204] NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:
[    0.551204] NVRM: BAR1 is 0M @ 0x0 (PCI:0000:00:07.0)
[    0.551210] nvidia: probe of 0000:00:07.0 failed with error -1
[    0.551388] NVRM: The NVIDIA probe routine failed for 1 device(s).
LOG
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json", "nvml_drop_devices": [1], "cuda_drop_devices": [1]}' > _driver/answers.json
