#!/usr/bin/env bash
# Wall time and peak memory of `gpudx fleet report` over a generated fleet (default 10,000 snapshots).
# Targets (docs/baseline-matrix-fleet.md): <= 2 s and <= 1 GiB on a 2-core machine.
#
#   bench/bench_fleet.sh [BUILD_DIR] [COUNT] [SEED]
#
# BUILD_DIR must hold gpudx and tests/fleet/gpudx_gen_fleet (ninja -C BUILD_DIR gpudx gpudx_gen_fleet).
# The fleet is generated once per (COUNT, SEED) under BUILD_DIR/bench-fleet and reused.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
count=${2:-10000}
seed=${3:-42}
gpudx=$build/gpudx
gen=$build/tests/fleet/gpudx_gen_fleet
matrix=$here/examples/matrix.toml
work=$build/bench-fleet/n$count-s$seed

for f in "$gpudx" "$gen"; do
  [[ -x $f ]] || { echo "bench_fleet: $f not built (ninja -C $build gpudx gpudx_gen_fleet)" >&2; exit 64; }
done
[[ -x /usr/bin/time ]] || { echo "bench_fleet: /usr/bin/time (GNU time) is needed for peak RSS" >&2; exit 64; }

if [[ ! -f $work/manifest.json ]]; then
  rm -rf "$work"
  "$gen" --seed "$seed" --count "$count" --bad 4 --out "$work" >/dev/null
fi
bytes=$(du -sb "$work/nodes" | cut -f1)

# Warm the page cache once so the runs measure parsing, not the disk.
cat "$work"/nodes/*.json >/dev/null 2>&1 || find "$work/nodes" -name '*.json' -exec cat {} + >/dev/null

run() {  # label, format, jobs
  local label=$1 format=$2 jobs=$3 log
  log=$(mktemp)
  /usr/bin/time -v "$gpudx" fleet report -q --matrix "$matrix" --format "$format" -j "$jobs" -o /dev/null \
    "$work/nodes" 2>"$log" || true  # exit 1/2 is the report's verdict, not a failure
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  # m:ss.cc -> seconds
  local secs
  secs=$(awk -v t="$wall" 'BEGIN { n = split(t, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.2f", s }')
  local mib
  mib=$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')
  local verdict=ok
  awk -v s="$secs" -v m="$mib" 'BEGIN { exit !(s <= 2.0 && m <= 1024) }' || verdict=OVER
  printf '%-22s %6s %4s %10s %12s  %s\n' "$label" "$format" "$jobs" "$secs" "$mib" "$verdict"
  rm -f "$log"
}

printf 'gpudx fleet report: %d snapshots (+4 bad), %.1f MiB of JSON, %d CPUs\n' "$count" \
  "$(awk -v b="$bytes" 'BEGIN { print b / 1048576 }')" "$(nproc)"
printf '%-22s %6s %4s %10s %12s  %s\n' "run" "format" "jobs" "wall (s)" "peak RSS MiB" "target (2 s, 1 GiB)"
run "text, 2 threads" text 2
run "json, 2 threads" json 2
run "csv, 2 threads" csv 2
run "text, 1 thread" text 1
