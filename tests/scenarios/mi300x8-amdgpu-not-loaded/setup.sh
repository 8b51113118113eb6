#!/usr/bin/env bash
# After a kernel update the ROCm DKMS module was not rebuilt and /etc/modprobe.d blacklists the in-tree amdgpu
# (left from an old install): amdgpu is not loaded. The eight MI300Xs are on PCIe bound to no driver; there
# are no DRM cards of theirs, no KFD topology, no /dev/kfd and no render nodes.
set -euo pipefail
: > proc/modules
rm -rf sys/module/amdgpu sys/bus/pci/drivers/amdgpu sys/class/kfd sys/devices/virtual/kfd
for d in $(find sys/devices -name driver -type l); do
    case $(readlink "$d") in *drivers/amdgpu) rm "$d"; sed -i '/^DRIVER=amdgpu$/d' "$(dirname "$d")/uevent" ;; esac
done
for e in sys/class/drm/card[1-8] sys/class/drm/renderD*; do rm -f "$e"; done
find sys/devices -path '*/drm/card[1-8]' -prune -exec rm -rf {} + -o -path '*/drm/renderD*' -prune -exec rm -rf {} +
rm -f dev/kfd.devnode dev/dri/renderD*.devnode
grep -v -e amdgpu -e 'kfd kfd' _commands/dmesg.txt > _commands/dmesg.txt.new || true
mv _commands/dmesg.txt.new _commands/dmesg.txt
