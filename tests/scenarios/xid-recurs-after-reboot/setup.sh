#!/usr/bin/env bash
# GPU 0 (GPU-992cb470-9027-88f4-48a9-a9a329d6978d, 0000:00:06.0) fell off the bus in an earlier boot; the node
# record saved then (record.json beside this file: `gpudx baseline save` of this capture with that boot's Xid 79,
# its boot_id the earlier boot's) says so. The node was rebooted, and in the current boot the same GPU falls off
# the bus again: the reboot NVIDIA's bucket (RESTART_BM) asked for did not clear it.
set -euo pipefail
# The capture has no boot id; the current boot gets one (a live node and a gathered capture have it).
mkdir -p proc/sys/kernel/random
echo 7c1d6a52-0b1e-4d4f-9a8e-3f2b9e1d5c44 > proc/sys/kernel/random/boot_id
cat >> _commands/dmesg.txt <<'LOG'
[ 7310.552201] NVRM: Xid (PCI:0000:00:06): 79, pid=50112, name=python3, GPU has fallen off the bus.
[ 7310.552230] NVRM: GPU 0000:00:06.0: GPU has fallen off the bus.
LOG
