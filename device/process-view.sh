#!/usr/bin/env bash
# `gpudx diagnose --pid` on a real GPU node (docs/process-view.md); results under $OUT, summary.txt first:
#   - a process that loaded the host's libcuda.so.1 and ran cuInit: its mapped libcuda must be the kernel
#     module's version (no process.libcuda_version_mismatch, no process.library_not_hosts), and
#     process.gpus_open (with -v / in JSON) must name the GPU it holds by UUID and PCI address;
#   - `gather --pid` of that process, replayed with --root after it has exited: the same mapped libcuda;
#   - copies of the host's libcuda and libnvidia-ml taken with `cp -L` into an application folder (names that
#     carry no version), loaded through LD_LIBRARY_PATH and cuInit'ed: what gpudx says of them, what reading
#     their version from their bytes costs, and the same in a mount namespace of its own;
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
host_nvml=$(readlink -f "$(ldconfig -p | awk '$1 == "libnvidia-ml.so.1" && /x86-64/ {print $NF; exit}')")
mkdir -p "$WORK/app"; cp -L "$host_cuda" "$WORK/app/libcuda.so.1"; cp -L "$host_nvml" "$WORK/app/libnvidia-ml.so.1"
mkfifo "$WORK/in2" "$WORK/out2"
LD_LIBRARY_PATH=$WORK/app "$WORK/target" libnvidia-ml.so.1 libcuda.so.1 --cuinit < "$WORK/in2" > "$WORK/out2" 2>"$OUT/target2.err" &
exec {hold2}> "$WORK/in2"
read -r word pid2 < "$WORK/out2"
if [[ $word == ready ]]; then
  "$BIN" diagnose -v --no-driver --pid "$pid2" >"$OUT/diagnose-copy.txt" 2>&1; say "diagnose --pid (copy) exit $?"
  grep -E '^(ERROR|WARN|info) |process:|^  pid|^  (libraries|processes) ' "$OUT/diagnose-copy.txt" | tee -a "$S"
  grep -E 'libcuda|libnvidia-ml' /proc/$pid2/maps | awk '{print $NF}' | sort -u | tee -a "$S"
  # What reading the 96 MB copy's bytes costs: CPU time of diagnose --no-driver with and without --pid of it.
  python3 - "$BIN" "$pid2" <<'PY' | tee -a "$S"
import os, statistics, subprocess, sys
gpudx, pid = sys.argv[1], sys.argv[2]
cpu = {"ref": [], "copy": []}
for _ in range(15):
    for name, extra in (("ref", []), ("copy", ["--pid", pid])):
        p = subprocess.Popen([gpudx, "diagnose", "--no-driver"] + extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        cpu[name].append((ru.ru_utime + ru.ru_stime) * 1000)
r, c = statistics.median(cpu["ref"]), statistics.median(cpu["copy"])
print(f"CPU ms, median of 15: diagnose --no-driver {r:.2f}; with --pid of the cp -L copy's process {c:.2f} (ratio {c / r:.2f}, +{c - r:.2f} ms)")
PY
  "$BIN" gather --dir --no-driver --pid "$pid2" "$WORK/capture2" >/dev/null 2>&1; say "gather --pid (copy) exit $?"
  say "captured copy: $(stat -c '%s bytes' "$WORK/capture2$WORK/app/libcuda.so.1" 2>&1)"
  "$BIN" diagnose --no-driver --root "$WORK/capture2" --pid "$pid2" 2>&1 | grep -E '^  pid' | tee -a "$S"
else
  say "copy target did not start: $word $(cat "$OUT/target2.err")"
fi
exec {hold2}>&-
wait

say "== the same copy inside a mount namespace of its own (unshare -m, a tmpfs over the app folder)"
mkdir -p "$WORK/nsapp"
mkfifo "$WORK/in3" "$WORK/out3"
unshare -m --propagation private sh -c 'mount -t tmpfs gpudx-ns "$1" && cp -L "$2" "$1/libcuda.so.1" && LD_LIBRARY_PATH="$1" exec "$3" libcuda.so.1 --cuinit' \
  sh "$WORK/nsapp" "$host_cuda" "$WORK/target" < "$WORK/in3" > "$WORK/out3" 2>"$OUT/target3.err" &
exec {hold3}> "$WORK/in3"
read -r word pid3 < "$WORK/out3"
if [[ $word == ready ]]; then
  say "outside the namespace: $(ls "$WORK/nsapp" | wc -l) files in $WORK/nsapp"
  "$BIN" diagnose -v --no-driver --pid "$pid3" --format json >"$OUT/diagnose-ns.json" 2>/dev/null; say "diagnose --pid (namespace) exit $?"
  python3 - "$OUT/diagnose-ns.json" "$pid3" <<'PY' | tee -a "$S"
import json, sys
doc, pid = json.load(open(sys.argv[1])), int(sys.argv[2])
v = [p for p in doc["processes"] if p["pid"] == pid][0]
print("own mount namespace:", v["own_mount_namespace"], "; mapped:", [(m["path"], m["version"], m["version_from"]) for m in v["mapped"]])
print("open:", v["open_devices"], "; findings:", [(f["id"], f["message"][:160]) for f in doc["findings"] if f.get("process", {}).get("pid") == pid])
PY
else
  say "namespace target did not start: $word $(cat "$OUT/target3.err")"
fi
exec {hold3}>&-
wait

say "== version strings in the real libraries"
python3 device/lib_version_probe.py "$host_cuda" "$host_nvml" 2>&1 | tee -a "$S"

say "== bench/bench_diagnose_pid.sh"
if [[ -e build-device/tests/standins/lib/libcuda.so.1 ]]; then
  mkdir -p build-device/tests/e2e
  cp "$WORK/target" build-device/tests/e2e/gpudx_process_target
  bash bench/bench_diagnose_pid.sh build-device "${RUNS:-40}" 2>&1 | tee -a "$S"
else
  say "build-device/tests/standins/lib not carried: no benchmark"
fi
rm -rf "$WORK"
