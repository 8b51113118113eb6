#!/usr/bin/env bash
# The snapshot speed figures of the driver-layer issue, each reference timed in the same run: gpudx with
# NVML (no cuInit) and host-only, nvidia-smi -q, and the manual shell snapshot of REFERENCE.md
# (device/driver.sh's manual_snapshot). Also the per-call NVML trace of one run, and device/nvml_cost.cpp:
# the NVML call sequences compared, each in fresh children ($OUT/nvml_cost.txt).
set -u
OUT=${OUT:-/tmp/gpudx-speed-out}
mkdir -p "$OUT"
GPUDX=${GPUDX:-$PWD/build-device/gpudx}
S="$OUT/summary.txt"; : >"$S"
log() { echo "$*" | tee -a "$S"; }
eval "$(sed -n '/^median_ms()/,/^}/p' device/perf.sh)"
eval "$(sed -n '/^manual_snapshot()/,/^}/p' device/driver.sh)"
for i in 1 2 3; do $GPUDX snapshot --no-cuda >/dev/null 2>&1; done  # warm the page cache
if [ "${NVML_COST:-1}" = 1 ]; then
  g++ -O2 -std=c++20 -Isrc device/nvml_cost.cpp -ldl -lpthread -o /tmp/nvml_cost &&
    /tmp/nvml_cost "${COST_ROUNDS:-15}" >"$OUT/nvml_cost.txt" 2>&1
  head -9 "$OUT/nvml_cost.txt" | tee -a "$S"
fi
GPUDX_PROBE_TRACE=1 $GPUDX snapshot --no-cuda -o "$OUT/snapshot.json" 2>"$OUT/trace.txt"
a=$(median_ms 30 $GPUDX snapshot --no-cuda)
b=$(median_ms 30 $GPUDX snapshot --no-driver)
c=$(median_ms 10 nvidia-smi -q)
d=$(median_ms 10 manual_snapshot)
e=$(median_ms 30 $GPUDX --version)
f=$(median_ms 30 true)
log "gpudx snapshot --no-cuda (NVML) x30 median: $a ms"
log "gpudx snapshot --no-driver x30 median:      $b ms"
log "nvidia-smi -q x10 median:                   $c ms   ratio $(awk -v x=$c -v y=$a 'BEGIN{printf "%.2f", x/y}')x"
log "manual shell snapshot x10 median:           $d ms   ratio $(awk -v x=$d -v y=$a 'BEGIN{printf "%.2f", x/y}')x"
log "gpudx --version x30 median:               $e ms   (process start and exit; /bin/true: $f ms)"
python3 -c "
import json; j = json.load(open('$OUT/snapshot.json'))
print('collectors:', ', '.join(f\"{c['name']}={c['duration_ms']:.1f}\" for c in j['collectors']))
print('nvml devices:', [(d['index'], d['uuid'], d['pci']) for d in j['nvml']['devices']])" | tee -a "$S"
