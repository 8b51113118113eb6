#!/usr/bin/env bash
# An unattended upgrade tried to move the driver from 580.159.04 to 580.172.08: DKMS still has 580.159.04
# installed for the running kernel, but the build of 580.172.08 for it failed (the compiler the kernel was
# built with is not installed). The node runs and will boot the old module; the upgrade it was meant to get
# (and its user space, once installed) is not there: the failure is news although a module is installed.
set -euo pipefail
release=$(cat proc/sys/kernel/osrelease)
old=var/lib/dkms/nvidia/580.159.04
mkdir -p "$old/$release/x86_64/module" "$old/source"
: > "$old/$release/x86_64/module/nvidia.ko.zst"
echo "PACKAGE_NAME=\"nvidia\"" > "$old/source/dkms.conf"
# DKMS marks the installed version with a link; the capture records it as a file holding the target.
printf '580.159.04/%s/x86_64' "$release" > "var/lib/dkms/nvidia/kernel-$release-x86_64"
new=var/lib/dkms/nvidia/580.172.08
mkdir -p "$new/build" "$new/source"
echo "PACKAGE_NAME=\"nvidia\"" > "$new/source/dkms.conf"
cat > "$new/build/make.log" <<LOG
DKMS make.log for nvidia-580.172.08 for kernel $release (x86_64)
Tue Nov 25 03:14:07 UTC 2025
make[1]: Entering directory '/usr/src/linux-headers-$release'
/bin/sh: 1: gcc-14: not found
make[1]: *** [scripts/Makefile.build:243: nvidia/nv.o] Error 127
make: *** [Makefile:82: modules] Error 2
LOG
