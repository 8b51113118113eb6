#!/usr/bin/env bash
# HBM faults on both H200s, as NVML reports them. GPU-992cb470-9027-88f4-48a9-a9a329d6978d (0000:00:06.0)
# took 3 uncorrectable ECC errors since the driver loaded and its row remapper ran out of spare rows
# (Xid 95, then Xid 64). GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) has 2 uncorrectable errors
# in its lifetime record (none since this load) and a row remap pending from repeated correctable errors
# (Xid 63): it applies at the next GPU reset.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "nvml_device_override": {
  "0": {"ecc_uncorrected_volatile": 3, "ecc_uncorrected_aggregate": 5,
        "remapped_rows_uncorrectable": 8, "remapped_rows_failure": true},
  "1": {"ecc_uncorrected_aggregate": 2, "remapped_rows_correctable": 1, "remapped_rows_pending": true}
 }
}
JSON
cat >> _commands/dmesg.txt <<'LOG'
[ 3811.402117] NVRM: Xid (PCI:0000:00:07): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate.
[ 5127.880412] NVRM: Xid (PCI:0000:00:06): 95, pid=48211, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No
[ 5127.880533] NVRM: Xid (PCI:0000:00:06): 64, pid='<unknown>', name=<unknown>, Row Remapper Error: no spare row left in the bank
LOG
