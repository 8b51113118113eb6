#!/usr/bin/env bash
# An earlier boot ended with Xid 79 (it must not count: only the current boot does), and the current
# boot has application-level Xids repeating: 13 and 31 on GPU 1, a contained ECC error (94) on GPU 0.
set -euo pipefail
{
  cat <<'LOG'
[ 9123.400001] NVRM: Xid (PCI:0000:00:06): 79, pid=3301, name=python3, GPU has fallen off the bus.
[ 9123.400020] NVRM: GPU 0000:00:06.0: GPU has fallen off the bus.
LOG
  cat _commands/dmesg.txt
  for i in 1 2 3 4 5; do
    printf '[ %4d.%06d] NVRM: Xid (PCI:0000:00:07): 13, pid=%d, name=pt_main_thread, Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address\n' $((600 + i * 37)) $((i * 1111)) $((20100 + i))
  done
  for i in 1 2 3; do
    printf '[ %4d.%06d] NVRM: Xid (PCI:0000:00:07): 31, pid=%d, name=pt_main_thread, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_0 faulted @ 0x7f2e_00000000\n' $((900 + i * 11)) $((i * 7)) $((20200 + i))
  done
  printf '[ 1500.250000] NVRM: Xid (PCI:0000:00:06): 94, pid=31337, name=torchrun, Contained: SM (0x1). RST: No, D-RST: No\n'
  printf '[ 1730.750000] NVRM: Xid (PCI:0000:00:06): 94, pid=31400, name=torchrun, Contained: SM (0x1). RST: No, D-RST: No\n'
} > _commands/dmesg.new
mv _commands/dmesg.new _commands/dmesg.txt
