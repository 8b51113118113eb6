#!/usr/bin/env bash
# Secure Boot is on and the DKMS-built nvidia module is not signed with an enrolled key: the kernel
# (locked down by Secure Boot) refuses it, so nvidia is not loaded and its procfs/sysfs entries are absent.
set -euo pipefail
sed -i '/^nvidia/d' proc/modules
rm -rf proc/driver/nvidia sys/module/nvidia sys/module/nvidia_uvm
sed -i -e 's/Kernel is locked down from Kernel configuration/Kernel is locked down from EFI Secure Boot mode/' \
       -e '/NVRM:/d' _commands/dmesg.txt
cat >> _commands/dmesg.txt <<'LOG'
[    6.402117] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7
[    6.911532] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7
LOG
