#!/usr/bin/env bash
# The second H200 (0000:00:07.0) did not enumerate at boot: no sysfs device, no driver record, no device node.
set -euo pipefail
rm -rf sys/bus/pci/devices/0000:00:07.0 sys/devices/pci0000:00/0000:00:07.0
rm -rf proc/driver/nvidia/gpus/0000:00:07.0
rm -f dev/nvidia1.devnode
