#!/usr/bin/env bash
# Speed figures on the GPU machine, each with its reference measured in the same run:
#  1. Where NVML time goes: GPUDX_PROBE_TRACE of `gpudx snapshot --no-cuda` (5 runs) and the median of 20.
#  2. A capture of this node with its recorded driver answers (`gpudx gather`), for tests/fixtures.
#  3. Diagnosing a saved snapshot (`diagnose --from`), median of 50, next to `true` and `gpudx --version`.
#  4. The kernel-log scan over a generated 1 GiB log against grep -E (bench/kernel_log_vs_grep.sh).
#  5. `gpudx fleet report` over 10,000 generated snapshots pinned to 2 CPUs (bench/bench_fleet.sh).
# Needs build-device/gpudx (device/run-all.sh) and a test-enabled build for the generators (built here).
set -u
OUT=${OUT:-/tmp/gpudx-perf-out}
mkdir -p "$OUT"
GPUDX=${GPUDX:-$PWD/build-device/gpudx}
S="$OUT/summary.txt"
: >"$S"
log() { echo "$*" | tee -a "$S"; }

median_ms() {  # runs a command N times, prints the median wall time in ms
  local n=$1; shift
  local i t0 t1
  for ((i = 0; i < n; i++)); do
    t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000 ))
  done | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'
}

log "== host $(uname -r), $(nproc) CPUs; $(head -1 /proc/driver/nvidia/version 2>/dev/null | sed 's/  */ /g')"

# ---- 1. NVML trace
for i in 1 2 3 4 5; do
  GPUDX_PROBE_TRACE=1 $GPUDX snapshot --no-cuda -o "$OUT/snap-nocuda-$i.json" 2>"$OUT/trace-$i.txt"
done
log "snapshot --no-cuda x20 median: $(median_ms 20 $GPUDX snapshot --no-cuda) ms"
log "snapshot --no-driver x20 median: $(median_ms 20 $GPUDX snapshot --no-driver) ms"
log "nvidia-smi -q x10 median: $(median_ms 10 nvidia-smi -q) ms"
log "trace of run 5 (ms since the line before):"
cat "$OUT/trace-5.txt" | tee -a "$S"

# ---- 2. capture with driver answers
$GPUDX gather "$OUT/gather-h200x2.tar.gz" >"$OUT/gather.log" 2>&1
log "gather exit $? ($(stat -c %s "$OUT/gather-h200x2.tar.gz" 2>/dev/null) bytes)"

# ---- 3. saved snapshot
$GPUDX snapshot -o "$OUT/saved.json" 2>/dev/null
log "diagnose --from saved.json x50 median: $(median_ms 50 $GPUDX diagnose --from "$OUT/saved.json") ms;" \
    "gpudx --version: $(median_ms 50 $GPUDX --version) ms; /bin/true: $(median_ms 50 /bin/true) ms"

# ---- 4/5. generators from a test-enabled build
cmake -S . -B build-perf -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUDX_HEADERS_DIR=$PWD/.device-carry/include \
  -DGPUDX_GTEST_SOURCE=$PWD/.device-carry/googletest >"$OUT/perf-build.log" 2>&1 &&
  ninja -C build-perf -j32 gpudx gpudx_gen_kernel_log gpudx_gen_fleet >>"$OUT/perf-build.log" 2>&1
log "perf build exit $?"
GPUDX_BENCH_LOG=/tmp/gpudx-bench-kernel.log bash bench/kernel_log_vs_grep.sh build-perf 1024 2>&1 | tee -a "$S"
rm -f /tmp/gpudx-bench-kernel.log
log "fleet report, 10,000 snapshots, pinned to CPUs 0-1:"
taskset -c 0,1 bash bench/bench_fleet.sh "$PWD/build-perf" 10000 42 2>&1 | tee -a "$S"
log "done"
