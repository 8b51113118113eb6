#!/usr/bin/env bash
# An Xid storm end to end: times `gpudx diagnose --kernel-log` over a generated log of 1,000,000 Xid 95 / Xid 79
# lines in 29 bursts over 8 GPUs (NVIDIA/NVSentinel#1120 saw 800,000 lines of 29 events) against
# `LC_ALL=C grep -c Xid` of the same file, in the same run, and prints the ratio and how many Xid findings the
# storm became (one per GPU and code, plus the escalations).
#
#   bench/xid_storm_vs_grep.sh [BUILD_DIR] [LINES]      (BUILD_DIR default: build, LINES: 1000000)
set -euo pipefail

build=${1:-build}
lines=${2:-1000000}
gpudx=$build/gpudx
gen=$build/bench/gpudx_gen_kernel_log
runs=${GPUDX_BENCH_RUNS:-3}
for tool in "$gpudx" "$gen"; do
  [[ -x $tool ]] || { echo "missing $tool: build it with 'ninja -C $build gpudx gpudx_gen_kernel_log'" >&2; exit 1; }
done

work=$(mktemp -d /tmp/gpudx-xid-storm.XXXXXX)
trap 'rm -rf "$work"' EXIT
log=$work/storm.log
mkdir "$work/root"
"$gen" --xid-storm "$log" "$lines"
cat "$log" > /dev/null  # page cache

best_ms() {
  local best=0 t0 t1 ms i
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    "$@" > "$work/out" 2>&1 || true   # diagnose exits 1 on error findings
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    if (( best == 0 || ms < best )); then best=$ms; fi
  done
  echo "$best"
}

t_gpudx=$(best_ms "$gpudx" diagnose --root "$work/root" --kernel-log "$log" --no-driver --format json)
t_grep=$(best_ms env LC_ALL=C grep -c Xid "$log")
"$gpudx" diagnose --root "$work/root" --kernel-log "$log" --no-driver --format json > "$work/diag.json" 2>/dev/null || true
findings=$(python3 -c '
import json, sys
fs = json.load(open(sys.argv[1]))["findings"]
xid = [f for f in fs if f["id"] == "kernel_log.xid"]
rep = [f for f in fs if f["id"] == "kernel_log.xid_repeated"]
print(f"{len(xid)} kernel_log.xid, {len(rep)} kernel_log.xid_repeated")' "$work/diag.json")

printf '\n%s lines (%s MiB), best of %s runs\n' "$(wc -l < "$log")" "$(( $(stat -c %s "$log") / 1048576 ))" "$runs"
printf '%-44s %8s\n' "gpudx diagnose --kernel-log (whole run), ms" "$t_gpudx"
printf '%-44s %8s\n' "LC_ALL=C grep -c Xid, ms" "$t_grep"
awk -v g="$t_grep" -v x="$t_gpudx" 'BEGIN { if (g > 0) printf "gpudx / grep -c: %.2fx\n", x / g; }'
printf 'findings: %s\n' "$findings"
