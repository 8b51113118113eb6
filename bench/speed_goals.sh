#!/usr/bin/env bash
# Every speed and memory goal of issue #34 in one table, each figure beside its reference and goal, measured in
# one run (these machines are noisy: only ratios taken in the same run compare). Runs, in turn:
#   bench/diagnose_vs_driver.sh   diagnose and ids against nvidia-smi and a bare cuInit process (GPU nodes only;
#                                 elsewhere its rows are missing and the table says so)
#   bench/startup_and_explain.sh  start-up, explain --text x, the kernel-log collector, explain of 1,000,000 lines
#   bench/agent_api.sh            the agent's /v1/events answer and resident memory (with STANDINS, its watcher)
# Each prints its own table first (the details); the last table is the summary. Exit 0 when every goal measured
# was met, 1 when one was not, 2 on a benchmark that failed.
#   bench/speed_goals.sh [BUILD_DIR]     BUILD_DIR holds gpudx and bench/gpudx_gen_kernel_log (default build)
#   Environment: RUNS (rounds of each benchmark, default 15), LINES (explain's log, default 1000000), STANDINS.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$here/build}")
runs=${RUNS:-15}
lines=${LINES:-1000000}
rows=$(mktemp /tmp/gpudx-speed-goals.XXXXXX)
trap 'rm -f "$rows"' EXIT
export BENCH_ROWS=$rows
status=0

run_bench() {  # name, command...
  local name=$1 rc
  shift
  echo "== $name"
  "$@"
  rc=$?
  if [[ $rc == 77 ]]; then
    echo "   (skipped here)"
  elif [[ $rc != 0 ]]; then
    echo "   $name failed (exit $rc)"
    status=2
  fi
  echo
}
run_bench diagnose_vs_driver bash "$here/bench/diagnose_vs_driver.sh" "$build/gpudx" "$runs"
run_bench startup_and_explain bash "$here/bench/startup_and_explain.sh" "$build" "$runs" "$lines"
run_bench agent_api env RUNS="$runs" bash "$here/bench/agent_api.sh" "$build/gpudx"

echo "== every goal of issue #34, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
awk -F'\t' '
  BEGIN { printf "%-46s %10s   %-34s %10s %8s   %-11s %s\n", "figure", "measured", "reference", "figure", "ratio", "goal", "met" }
  {
    ref = ($5 == "-") ? "-" : $5 " " $3
    printf "%-46s %10s   %-34s %10s %8s   %-11s %s\n", $1, $2 " " $3, $4, ref, $6, $7, $8
    if ($8 == "no") missed++
    if ($8 != "-") goals++
  }
  END { printf "%d goals measured, %d not met\n", goals, missed; exit missed > 0 }' "$rows" || { ((status == 0)) && status=1; }
grep -q "nvidia-smi" "$rows" || echo "(no GPU here: the goals against nvidia-smi and cuInit were not measured)"
exit "$status"
