#!/usr/bin/env bash
# A driver upgrade to 580.172.08 went half-way: the package removed 580.159.04 from DKMS and the build of
# 580.172.08 for the running kernel failed (the kernel headers package was missing), leaving only its
# build/make.log. 580.159.04 is still loaded, so this boot works; the next one will have no driver.
set -euo pipefail
release=$(cat proc/sys/kernel/osrelease)
mkdir -p var/lib/dkms/nvidia/580.172.08/build var/lib/dkms/nvidia/580.172.08/source
echo "PACKAGE_NAME=\"nvidia\"" > var/lib/dkms/nvidia/580.172.08/source/dkms.conf
cat > var/lib/dkms/nvidia/580.172.08/build/make.log <<LOG
DKMS make.log for nvidia-580.172.08 for kernel $release (x86_64)
Tue Nov 25 03:14:07 UTC 2025
make[1]: Entering directory '/usr/src/linux-headers-$release'
make[1]: *** No rule to make target 'modules'.  Stop.
make[1]: Leaving directory '/usr/src/linux-headers-$release'
make: *** [Makefile:82: modules] Error 2
LOG
