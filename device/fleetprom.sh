#!/usr/bin/env bash
# Node health in the fleet report and the Prometheus exposition, on the real 1-GPU machine with its driver.
# Run from the repo root with build-device/gpudx (device/run-all.sh builds it). Results in $OUT/ (summary.txt
# first); nothing here needs promtool on the device: the .prom files come back and are checked here with
# `promtool check metrics` (tests/integration/prometheus/rules.sh does the same for the captures).
#  1. `gpudx diagnose --matrix examples/matrix.toml --format prom` with the driver: expect gpudx_node_info with the
#     driver (580.x), cuda="13.0" (NVML's CUDA driver version), one gpudx_gpu_info with the GPU's UUID, PCI address
#     and VBIOS, gpudx_xid_events_total only if this boot logged an Xid.
#  2. `gpudx diagnose --format json` (the node's own diagnosis, with the driver layers) and `gpudx snapshot`.
#  3. `gpudx fleet report` over the snapshot alone (health computed from it) and over snapshot + diagnosis
#     (health from the diagnosis): the same verdict for a healthy node, the source named (snapshot, diagnosis).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GPUDX=${GPUDX:-build-device/gpudx}
[ -x "$GPUDX" ] || { echo "no $GPUDX: build it first (device/run-all.sh)"; exit 2; }
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version,vbios_version --format=csv 2>&1 | tee -a "$S"

"$GPUDX" diagnose --matrix examples/matrix.toml --format prom -o "$OUT/diagnose.prom"; say "diagnose --format prom exit $?"
grep -E '^gpudx_(node_info|gpu_info|xid_events_total|exit_code)' "$OUT/diagnose.prom" | tee -a "$S"
"$GPUDX" diagnose --format json -o "$OUT/diagnose.json"; say "diagnose --format json exit $?"
"$GPUDX" snapshot -o "$OUT/snapshot.json"; say "snapshot exit $?"

mkdir -p "$OUT/fleet-snapshot" "$OUT/fleet-both"
cp "$OUT/snapshot.json" "$OUT/fleet-snapshot/"
cp "$OUT/snapshot.json" "$OUT/diagnose.json" "$OUT/fleet-both/"
for case in fleet-snapshot fleet-both; do
  "$GPUDX" fleet report -q --matrix examples/matrix.toml --format json -o "$OUT/$case.report.json" "$OUT/$case"
  say "fleet report $case exit $?"
  "$GPUDX" fleet report -q --matrix examples/matrix.toml "$OUT/$case" >"$OUT/$case.report.txt" 2>&1
  grep -E '^(Health|Class|  Findings|    (error|warning) |      - )' "$OUT/$case.report.txt" | tee -a "$S"
done
