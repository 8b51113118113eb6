#!/usr/bin/env bash
# `gpudx diagnose --pid` on a real GPU node (docs/process-view.md); results under $OUT, summary.txt first:
#   - a process that loaded the host's libcuda.so.1 and ran cuInit: its mapped libcuda must be the kernel
#     module's version (no process.libcuda_version_mismatch, no process.library_not_hosts), and
#     process.gpus_open (with -v / in JSON) must name the GPU it holds by UUID and PCI address;
#   - `gather --pid` of that process, replayed with --root after it has exited: the same mapped libcuda;
#   - the CPU time --pid adds (bench/bench_diagnose_pid.sh needs the test build; here: diagnose -v timings).
# Needs build-device/gpudx (device/run-all.sh builds it) and a C compiler for tests/e2e/process_target.c.
set -u
OUT=${OUT:-/tmp/gpudx-process-view-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=$(pwd)/build-device/gpudx
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
WORK=$(mktemp -d /tmp/gpudx-pid.XXXXXX)
cc -O2 -o "$WORK/target" tests/e2e/process_target.c -ldl || { say "cannot compile process_target"; exit 1; }
nvidia-smi --query-gpu=index,uuid,pci.bus_id,driver_version --format=csv | tee -a "$S"

mkfifo "$WORK/in" "$WORK/out"
"$WORK/target" libcuda.so.1 --cuinit < "$WORK/in" > "$WORK/out" 2>"$OUT/target.err" &
exec {hold}> "$WORK/in"
read -r word pid < "$WORK/out"
[[ $word == ready ]] || { say "target did not start: $word $(cat "$OUT/target.err")"; exit 1; }
say "target pid $pid; its GPU files: $(ls -l /proc/$pid/fd 2>/dev/null | grep -o '/dev/nvidia[^ ]*' | sort -u | tr '\n' ' ')"
"$BIN" diagnose -v --pid "$pid" >"$OUT/diagnose-pid.txt" 2>&1; say "diagnose --pid exit $?"
"$BIN" diagnose --pid "$pid" --format json >"$OUT/diagnose-pid.json" 2>/dev/null; say "diagnose --pid --format json exit $?"
grep -E '^(Verdict|  pid|ERROR|WARN|info) |process:|gpu:|processes ' "$OUT/diagnose-pid.txt" | tee -a "$S"
"$BIN" gather --dir --pid "$pid" "$WORK/capture" >"$OUT/gather.txt" 2>&1; say "gather --pid exit $?"
exec {hold}>&-
wait
"$BIN" diagnose -v --root "$WORK/capture" --pid "$pid" >"$OUT/replay-pid.txt" 2>&1; say "replay --root --pid exit $?"
grep -E '^  pid|process\.' "$OUT/replay-pid.txt" | tee -a "$S"
python3 - "$OUT/diagnose-pid.json" "$pid" <<'PY' | tee -a "$S"
import json, sys
doc, pid = json.load(open(sys.argv[1])), int(sys.argv[2])
view = [p for p in doc["processes"] if p["pid"] == pid][0]
print("mapped:", [(m["soname"], m["version"], m["path"]) for m in view["mapped"]])
print("open devices:", view["open_devices"])
ids = [f["id"] for f in doc["findings"] if f.get("process", {}).get("pid") == pid]
print("findings about the process:", ids)
bad = [i for i in ids if i in ("process.libcuda_version_mismatch", "process.library_not_hosts")]
print("PASS" if not bad else f"FAIL: {bad} on a process using the host's own driver")
PY
rm -rf "$WORK"
