#!/usr/bin/env bash
# This host reserves 0000:00:07.0 for a guest: a driverctl override (driver_override=vfio-pci) makes vfio-pci
# claim it at boot, so the nvidia driver runs only GPU-992cb470-9027-88f4-48a9-a9a329d6978d (0000:00:06.0).
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:07.0
echo "../../../bus/pci/drivers/vfio-pci" > "$dev/driver"
echo vfio-pci > "$dev/driver_override"
sed -i 's/^DRIVER=nvidia$/DRIVER=vfio-pci/' "$dev/uevent"
echo "vfio_pci 16384 1 - Live 0xffffffffc0f20000" >> proc/modules
rm -rf proc/driver/nvidia/gpus/0000:00:07.0
rm -f dev/nvidia1.devnode
# NVML and CUDA run on the host too: they see only the card the nvidia driver holds.
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
echo '{"base": "h200x2.json", "nvml_drop_devices": [1], "cuda_drop_devices": [1]}' > _driver/answers.json
