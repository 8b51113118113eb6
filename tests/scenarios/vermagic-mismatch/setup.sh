#!/usr/bin/env bash
# The kernel was upgraded to 6.18.44 but the nvidia module under updates/dkms is the one built for the old
# kernel (DKMS did not rebuild it): the kernel refuses it, so nvidia is not loaded and the GPUs are unbound.
set -euo pipefail
# make_ko PATH VERSION VERMAGIC: a minimal relocatable ELF with a .modinfo section, which libkmod reads
# like a real module file; modules.dep names it as depmod would (libkmod's binary index is not needed).
make_ko() {
    local out=$1 version=$2 vermagic=$3 tmp
    tmp=$(mktemp -d)
    mkdir -p "$(dirname "$out")"
    printf 'license=Dual MIT/GPL\0version=%s\0srcversion=7A3C0E1F5B9D2C4E6F8A0B1\0name=nvidia\0vermagic=%s\0' \
        "$version" "$vermagic" > "$tmp/modinfo"
    as -o "$tmp/empty.o" /dev/null
    objcopy --add-section .modinfo="$tmp/modinfo" --set-section-flags .modinfo=alloc,readonly "$tmp/empty.o" "$out"
    rm -rf "$tmp"
}
release=$(cat proc/sys/kernel/osrelease)
make_ko "lib/modules/$release/updates/dkms/nvidia.ko" 580.159.04 "6.18.40-fc-v650-gpu SMP preempt mod_unload modversions "
echo "updates/dkms/nvidia.ko:" > "lib/modules/$release/modules.dep"
: > proc/modules
rm -rf sys/module/nvidia sys/module/nvidia_uvm proc/driver/nvidia
rm -f sys/devices/pci0000:00/0000:00:06.0/driver sys/devices/pci0000:00/0000:00:07.0/driver
sed -i '/^DRIVER=/d' sys/devices/pci0000:00/0000:00:06.0/uevent sys/devices/pci0000:00/0000:00:07.0/uevent
rm -f dev/nvidia*.devnode
