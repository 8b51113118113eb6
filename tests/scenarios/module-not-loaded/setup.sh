#!/usr/bin/env bash
# The nvidia module never loaded: no /proc/modules line, no /sys/module or /proc/driver/nvidia, GPUs unbound.
set -euo pipefail
: > proc/modules
rm -rf sys/module/nvidia sys/module/nvidia_uvm proc/driver/nvidia
rm -f sys/devices/pci0000:00/0000:00:06.0/driver sys/devices/pci0000:00/0000:00:07.0/driver
sed -i '/^DRIVER=/d' sys/devices/pci0000:00/0000:00:06.0/uevent sys/devices/pci0000:00/0000:00:07.0/uevent
rm -f dev/nvidia*.devnode
