#!/usr/bin/env bash
# 0000:00:07.0 trained at Gen4 x8 in a Gen5 x16 slot (a badly seated card or riser).
set -euo pipefail
dev=sys/devices/pci0000:00/0000:00:07.0
echo "16.0 GT/s PCIe" > "$dev/current_link_speed"
echo "8" > "$dev/current_link_width"
