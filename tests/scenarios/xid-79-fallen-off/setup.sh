#!/usr/bin/env bash
# GPU 0 (0000:00:06.0) falls off the bus an hour into the boot: the driver logs Xid 79 and the
# "fallen off the bus" line. PCIe still enumerates it in this capture, so the kernel log is the boundary.
set -euo pipefail
cat >> _commands/dmesg.txt <<'LOG'
[ 4210.118734] NVRM: GPU at PCI:0000:00:06: GPU-992cb470-9027-88f4-48a9-a9a329d6978d
[ 4210.118741] NVRM: Xid (PCI:0000:00:06): 79, pid=48211, name=python3, GPU has fallen off the bus.
[ 4210.118755] NVRM: GPU 0000:00:06.0: GPU has fallen off the bus.
[ 4210.119002] NVRM: A GPU crash dump has been created. If possible, please run
[ 4210.119002] NVRM: nvidia-bug-report.sh as root to collect this data before
[ 4210.119002] NVRM: the NVIDIA kernel module is unloaded.
LOG
