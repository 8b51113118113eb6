#!/usr/bin/env bash
# What the HTML pages cost (docs/report.md), each measured against what it is made from, in the same run:
#   - the node page: `gpudx report` minus `gpudx diagnose --format json` on the same input (goal: <= 20 ms more),
#     from the 2xH200 capture (--root, read now) and from a saved snapshot (--from), median of RUNS alternating runs;
#   - the fleet page of COUNT generated snapshots: wall time and size of `fleet report --format html` beside
#     `--format json` (goals: <= 2 s and < 5 MB for 10,000 nodes).
#
#   bench/bench_report.sh [BUILD_DIR] [RUNS] [COUNT]
#
# BUILD_DIR must hold gpudx and tests/fleet/gpudx_gen_fleet (ninja -C BUILD_DIR gpudx gpudx_gen_fleet). Wall time
# is meaningful on idle cores only; the ratio of the two commands run alternately is what a shared machine shows.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
runs=${2:-21}
count=${3:-10000}
gpudx=$build/gpudx
gen=$build/tests/fleet/gpudx_gen_fleet
for f in "$gpudx" "$gen"; do
  [[ -x $f ]] || { echo "bench_report: $f not built (ninja -C $build gpudx gpudx_gen_fleet)" >&2; exit 64; }
done

ms() {  # command... -> wall milliseconds (the exit code is the report's verdict, not a failure)
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1 || true
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000 ))
}
median() { sort -n | awk '{ a[NR] = $1 } END { m = a[int((NR + 1) / 2)]; printf "%.2f", m / 1000 }'; }

node() {  # label, input args...
  local label=$1; shift
  local d=() r=()
  for ((i = 0; i < runs; i++)); do
    d+=("$(ms "$gpudx" diagnose "$@" --format json -o /dev/null)")
    r+=("$(ms "$gpudx" report "$@" -o /dev/null)")
  done
  local dm rm_
  dm=$(printf '%s\n' "${d[@]}" | median)
  rm_=$(printf '%s\n' "${r[@]}" | median)
  printf '%-28s diagnose %8s ms   report %8s ms   report - diagnose %7.2f ms   ratio %.2f\n' "$label" "$dm" "$rm_" \
    "$(echo "$rm_ - $dm" | bc -l)" "$(echo "$rm_ / $dm" | bc -l)"
}

printf 'gpudx report, median of %d runs each, %d CPUs, load %s\n' "$runs" "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
node "2xH200 capture (--root)" --root "$here/tests/fixtures/h200x2" --no-driver
node "saved snapshot (--from)" --from "$here/tests/golden/h200x2.snapshot.json"
node "saved snapshot, 8 findings" --from "$here/tests/golden/pod-without-nvidia-runtime.snapshot.json"

work=$build/bench-fleet/n$count-s42
if [[ ! -f $work/manifest.json ]]; then
  rm -rf "$work"
  "$gen" --seed 42 --count "$count" --bad 4 --out "$work" >/dev/null
fi
find "$work/nodes" -name '*.json' -exec cat {} + >/dev/null  # warm the page cache
out=$(mktemp -d)
j=$(ms "$gpudx" fleet report -q --matrix "$here/examples/matrix.toml" --format json -o "$out/fleet.json" "$work/nodes")
h=$(ms "$gpudx" fleet report -q --matrix "$here/examples/matrix.toml" --format html -o "$out/fleet.html" "$work/nodes")
printf 'fleet of %d snapshots: json %.2f s (%d bytes), html %.2f s (%d bytes)\n' "$count" "$(echo "$j / 1000000" | bc -l)" \
  "$(stat -c %s "$out/fleet.json")" "$(echo "$h / 1000000" | bc -l)" "$(stat -c %s "$out/fleet.html")"
rm -rf "$out"
