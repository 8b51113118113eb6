#!/usr/bin/env bash
# The driver package was upgraded to 580.172.08 (new module file for the running kernel) but the node was not
# rebooted: 580.159.04 is still loaded.
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
make_ko "lib/modules/$release/updates/dkms/nvidia.ko" 580.172.08 "$release SMP preempt mod_unload modversions "
echo "updates/dkms/nvidia.ko:" > "lib/modules/$release/modules.dep"
