#!/usr/bin/env bash
# Host-layer snapshot speed: median wall time of `gpudx snapshot --no-driver` over the h200x2 capture and
# over this machine, next to `nvidia-smi -q` when it exists, in one run (these machines are noisy: read the
# ratio column). usage: bench/bench_snapshot.sh [GPUDX] [RUNS]
set -u
gpudx=${1:-build/gpudx} runs=${2:-50}
here=$(cd "$(dirname "$0")/.." && pwd)
median_ms() {  # median wall milliseconds of RUNS executions of the command
  local t=()
  for ((i = 0; i < runs; i++)); do
    local s=$(date +%s%N); "$@" > /dev/null 2>&1; local e=$(date +%s%N)
    t+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'
}
ref=$(median_ms "$gpudx" snapshot --no-driver --root "$here/tests/fixtures/h200x2")
live=$(median_ms "$gpudx" snapshot --no-driver)
printf '%-48s %10s %8s\n' "what (median of $runs)" "ms" "ratio"
printf '%-48s %10s %8s\n' "gpudx snapshot --no-driver --root h200x2" "$ref" "1.00"
printf '%-48s %10s %8.2f\n' "gpudx snapshot --no-driver (this machine)" "$live" "$(awk -v a="$live" -v b="$ref" 'BEGIN{print a/b}')"
if command -v nvidia-smi > /dev/null; then
  smi=$(runs=10 median_ms nvidia-smi -q)
  printf '%-48s %10s %8.2f\n' "nvidia-smi -q" "$smi" "$(awk -v a="$smi" -v b="$ref" 'BEGIN{print a/b}')"
fi
