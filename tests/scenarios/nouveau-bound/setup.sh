#!/usr/bin/env bash
# nouveau was not blacklisted and claimed 0000:00:06.0 before nvidia loaded; nvidia got only 0000:00:07.0.
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:06.0
echo "../../../bus/pci/drivers/nouveau" > "$dev/driver"
sed -i 's/^DRIVER=nvidia$/DRIVER=nouveau/' "$dev/uevent"
echo "nouveau 3096576 0 - Live 0xffffffffc1a00000" >> proc/modules
rm -rf proc/driver/nvidia/gpus/0000:00:06.0
