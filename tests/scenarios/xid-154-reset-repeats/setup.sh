#!/usr/bin/env bash
# GPU 1 (0000:00:07.0) stops processing twice within 40 minutes (Xid 46, NVIDIA's bucket RESET_GPU); after the
# second the driver's Xid 154 says the GPU now needs a reset (worded as the real lines in
# tests/corpus/real/xid_62_154_gsp_watchdog_nvforum371272.txt; the 46 lines carry no detail here). Two RESET_GPU Xids within the hour escalate.
set -euo pipefail
cat >> _commands/dmesg.txt <<'LOG'
[ 1800.412201] NVRM: Xid (PCI:0000:00:07): 46, pid=51200, name=python3
[ 4210.118741] NVRM: Xid (PCI:0000:00:07): 46, pid=51377, name=python3
[ 4210.119120] NVRM: Xid (PCI:0000:00:07): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
LOG
