#!/usr/bin/env bash
# `gpudx diagnose --pid` on a real GPU node (docs/process-view.md); results under $OUT, summary.txt first:
#   - a process that loaded the host's libcuda.so.1 and ran cuInit: its mapped libcuda must be the kernel
#     module's version (no process.libcuda_version_mismatch, no process.library_not_hosts), and
#     process.gpus_open (with -v / in JSON) must name the GPU it holds by UUID and PCI address;
#   - `gather --pid` of that process, replayed with --root after it has exited: the same mapped libcuda;
#   - a copy of the host's libcuda taken with `cp -L` into an application folder as libcuda.so.1 (a name that
#     carries no version), loaded through LD_LIBRARY_PATH and cuInit'ed: what gpudx says of it;
#   - where the real libcuda and libnvidia-ml carry their version in their bytes (device/lib_version_probe.py);
#   - bench/bench_diagnose_pid.sh, with a process that ran cuInit beside the two of the build machine's run (it
#     needs build-device/tests/standins/lib carried; the target is compiled here).
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

say "== a cp -L copy of the host's libcuda as app/libcuda.so.1"
host_cuda=$(readlink -f "$(ldconfig -p | awk '$1 == "libcuda.so.1" && /x86-64/ {print $NF; exit}')")
mkdir -p "$WORK/app"; cp -L "$host_cuda" "$WORK/app/libcuda.so.1"
mkfifo "$WORK/in2" "$WORK/out2"
LD_LIBRARY_PATH=$WORK/app "$WORK/target" libcuda.so.1 --cuinit < "$WORK/in2" > "$WORK/out2" 2>"$OUT/target2.err" &
exec {hold2}> "$WORK/in2"
read -r word pid2 < "$WORK/out2"
if [[ $word == ready ]]; then
  "$BIN" diagnose -v --no-driver --pid "$pid2" >"$OUT/diagnose-copy.txt" 2>&1; say "diagnose --pid (copy) exit $?"
  grep -E '^(ERROR|WARN|info) |process:|^  pid' "$OUT/diagnose-copy.txt" | tee -a "$S"
  grep -E 'libcuda' /proc/$pid2/maps | awk '{print $NF}' | sort -u | tee -a "$S"
else
  say "copy target did not start: $word $(cat "$OUT/target2.err")"
fi
exec {hold2}>&-
wait

say "== version strings in the real libraries"
python3 device/lib_version_probe.py "$host_cuda" "$(readlink -f "$(ldconfig -p | awk '$1 == "libnvidia-ml.so.1" && /x86-64/ {print $NF; exit}')")" 2>&1 | tee -a "$S"

say "== bench/bench_diagnose_pid.sh"
if [[ -e build-device/tests/standins/lib/libcuda.so.1 ]]; then
  mkdir -p build-device/tests/e2e
  cp "$WORK/target" build-device/tests/e2e/gpudx_process_target
  bash bench/bench_diagnose_pid.sh build-device "${RUNS:-40}" 2>&1 | tee -a "$S"
else
  say "build-device/tests/standins/lib not carried: no benchmark"
fi
rm -rf "$WORK"
