#!/usr/bin/env bash
# `gpudx fleet report` with node health computed from every snapshot, against a reference binary, in one
# command: user CPU and wall time of each, and their ratios (new / reference). CPU time is the figure on a
# shared machine; wall time is only meaningful on idle cores. Target (docs/baseline-matrix-fleet.md):
# 10,000 snapshots in <= 2 s wall and <= 1 GiB on 2 cores.
#
#   bench/fleet_report.sh REFERENCE_GPUDX [BUILD_DIR] [COUNT] [RUNS]
#
# REFERENCE_GPUDX: a gpudx built from the commit to compare with (e.g. copied aside before rebuilding).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:?usage: bench/fleet_report.sh REFERENCE_GPUDX [BUILD_DIR] [COUNT] [RUNS]}
build=${2:-$here/build}
count=${3:-10000}
runs=${4:-3}
gpudx=$build/gpudx
gen=$build/tests/fleet/gpudx_gen_fleet
work=$build/bench-fleet/n$count-s42
for f in "$ref" "$gpudx" "$gen"; do [[ -x $f ]] || { echo "fleet_report: $f not built" >&2; exit 64; }; done
[[ -x /usr/bin/time ]] || { echo "fleet_report: /usr/bin/time (GNU time) is needed" >&2; exit 64; }
if [[ ! -f $work/manifest.json ]]; then
  rm -rf "$work"
  "$gen" --seed 42 --count "$count" --bad 0 --out "$work" >/dev/null
fi
find "$work/nodes" -name '*.json' -exec cat {} + >/dev/null  # warm the page cache

measure() {  # binary -> "user wall rss_mib"
  local log; log=$(mktemp)
  /usr/bin/time -f '%U %e %M' -o "$log" "$1" fleet report -q --matrix "$here/examples/matrix.toml" -j 2 \
    --format json -o /dev/null "$work/nodes" || true  # exit 1/2 is the report's verdict
  # GNU time writes "Command exited with non-zero status N" first: the figures are the last line
  tail -n 1 "$log" | awk '{ printf "%s %s %.1f\n", $1, $2, $3 / 1024 }'; rm -f "$log"
}

printf 'gpudx fleet report, %d snapshots, -j 2, %d CPUs, load %s\n' "$count" "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
printf '%-4s %12s %12s %10s %10s %10s %10s\n' run ref_user_s new_user_s user_ratio ref_wall_s new_wall_s wall_ratio
for ((i = 1; i <= runs; i++)); do  # alternate the two, so load drifts touch both alike
  read -r ru rw rm_ <<<"$(measure "$ref")"
  read -r nu nw nm <<<"$(measure "$gpudx")"
  awk -v i="$i" -v ru="$ru" -v nu="$nu" -v rw="$rw" -v nw="$nw" -v rm="$rm_" -v nm="$nm" 'BEGIN {
    printf "%-4d %12.2f %12.2f %10.2f %10.2f %10.2f %10.2f   (peak RSS MiB %s -> %s)\n", i, ru, nu, nu / ru, rw, nw, nw / rw, rm, nm }'
done
