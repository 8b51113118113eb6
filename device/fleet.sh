#!/usr/bin/env bash
# Checks node records, the matrix and the fleet report on the real 2xH200 node. Run from the repo root as
# root with build-device/gpudx (run-all.sh builds it). Results in $OUT/ (fleet/ when run alone).
#  1. `gpudx baseline save` with the driver loaded: expect 2 GPUs, GPU-992cb470-... at 0000:00:06.0 and
#     GPU-40cd403d-... at 0000:00:07.0, VBIOS 96.00.a5.00.1a (procfs), link 32 GT/s x16, driver 580.159.04,
#     CUDA 13.0 (nvidia-smi says 13.0), libcuda.so.1 from /usr/local/nvidia/lib64.
#  2. `gpudx baseline diff` right after: exit 0, no findings (same node).
#  3. `gpudx matrix check --matrix examples/matrix.toml`: class h200x2; exit 0 when the hostname fits
#     (the class lists "vm"), else matrix.no_class with the real hostname shown.
#  4. `gpudx fleet report` over that snapshot plus a copy with the hostname changed: 2 nodes, timing.
set -uo pipefail
OUT=${OUT:-/tmp/out}; R="$OUT"; mkdir -p "$R"
GPUDX=${GPUDX:-build-device/gpudx}
[ -x "$GPUDX" ] || { echo "no $GPUDX: build it first (device/run-all.sh fleet)"; exit 2; }
hostname >"$R/hostname.txt"
nvidia-smi --query-gpu=uuid,pci.bus_id,vbios_version,pcie.link.gen.max,pcie.link.width.current --format=csv \
  >"$R/nvidia-smi.csv" 2>&1
"$GPUDX" snapshot -o "$R/snapshot.json" 2>"$R/snapshot.err"; echo "snapshot rc=$?"
"$GPUDX" baseline save "$R/node.json" --from "$R/snapshot.json" 2>&1; echo "save rc=$?"
"$GPUDX" baseline save "$R/node-live.json" 2>&1; echo "save (live) rc=$?"
"$GPUDX" baseline diff "$R/node.json" >"$R/diff.txt" 2>&1; echo "diff (live vs record) rc=$?"
cat "$R/diff.txt"
"$GPUDX" matrix check --matrix examples/matrix.toml --from "$R/snapshot.json" >"$R/matrix.txt" 2>&1
echo "matrix check rc=$?"; cat "$R/matrix.txt"
mkdir -p "$R/snaps"
cp "$R/snapshot.json" "$R/snaps/a.json"
sed 's/"hostname": "[^"]*"/"hostname": "gpu-a002"/' "$R/snapshot.json" >"$R/snaps/b.json"
/usr/bin/time -v "$GPUDX" fleet report -q --matrix examples/matrix.toml --format json -o "$R/fleet.json" "$R/snaps" \
  2>"$R/fleet.time"; echo "fleet rc=$?"
grep -E "Elapsed|Maximum resident" "$R/fleet.time"
python3 - "$R/node.json" "$R/fleet.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("record:", r["driver_version"], r["kernel_release"], r["cuda_version"], r["hostname"])
for g in r["gpus"]:
    print("  gpu", g["uuid"], g["pci"], g["model"], g["vbios"], g["link_current"], g["numa_node"])
for l in r["libraries"]:
    print("  lib", l["soname"], l["path"], l["version"])
f = json.load(open(sys.argv[2]))
print("fleet:", f["nodes"], "nodes;", [(c["name"], c["nodes"], c["conforming"]) for c in f["classes"]])
PY
