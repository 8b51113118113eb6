#!/usr/bin/env bash
# gpudx on a GPU node against the driver's own tools, in one table with the ratios (issue #34, items 1 and 5):
#   - `gpudx diagnose --no-cuda` (NVML, no cuInit) against `nvidia-smi -L` (goal: <= 1.1x) and `nvidia-smi -q`;
#   - `gpudx diagnose` and `gpudx ids` with CUDA against a bare process that loads libcuda.so.1 and runs cuInit and
#     cuDeviceGetCount (bench/cuda_floor.c; goal: <= 1.0x, since everything else gpudx reads happens while the
#     driver starts);
#   - with BEFORE=OLD_GPUDX, the same gpudx commands of an older build (before a change, e.g. the GPU-health
#     queries), with the difference in ms;
#   - each collector's own duration from one snapshot (what runs side by side with what).
# Every command of a round runs once, for RUNS rounds, in a new random order each round: a noisy machine's load
# falls on all of them; the figures are medians. Each command starts SETTLE_MS (default 500) after the one before
# it exited, so no row's figure can depend on what the driver still does for the row before it (on an H100 no
# such effect was measured: bench/driver_settle.sh, docs/device-runs/2026-12-06-h100-session21).
# Exit codes of gpudx are verdicts, not failures, and are ignored.
#
#   [BEFORE=OLD_GPUDX] [SETTLE_MS=500] bench/diagnose_vs_driver.sh [GPUDX] [RUNS]
#
# Needs a GPU node with nvidia-smi and libcuda.so.1; elsewhere it says so and exits 77 (skipped).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gpudx=$(realpath "${1:-$here/build/gpudx}")
runs=${2:-15}
settle_s=$(awk -v ms="${SETTLE_MS:-500}" 'BEGIN { printf "%.3f", ms / 1000 }')
before=${BEFORE:+$(realpath "$BEFORE")}
source "$here/bench/gpu_node.sh"
gpu_node_setup diagnose_vs_driver

# name|command: the commands of one round.
cases=(
  "gpudx diagnose --no-cuda|$gpudx diagnose --no-cuda"
  "nvidia-smi -L|nvidia-smi -L"
  "nvidia-smi -q|nvidia-smi -q"
  "gpudx diagnose|$gpudx diagnose"
  "gpudx ids|$gpudx ids"
  "cuInit floor|$floor"
)
if [[ -n $before ]]; then
  cases+=("before: diagnose --no-cuda|$before diagnose --no-cuda" "before: diagnose|$before diagnose"
          "before: ids|$before ids")
fi
for c in "${cases[@]}"; do ${c#*|} >/dev/null 2>&1; done  # page cache, driver state

for ((r = 0; r < runs; r++)); do
  for i in $(shuf -i "0-$((${#cases[@]} - 1))"); do
    c=${cases[$i]}
    sleep "$settle_s"
    # shellcheck disable=SC2086  # the command is words on purpose
    us ${c#*|} >> "$work/t$i"
  done
done
declare -A med
for i in "${!cases[@]}"; do
  med[${cases[$i]%%|*}]=$(sort -n "$work/t$i" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
done
# The floor of what gpudx asks: the NVML probe's own trace (GPUDX_PROBE_TRACE) times every driver call from
# dlopen to the last answer; the sum of its main lines is the time the driver took to answer what
# `diagnose --no-cuda` asks (the GPUs' lanes run inside it), without gpudx's process, collectors and verdict.
for ((r = 0; r < runs; r++)); do
  GPUDX_PROBE_TRACE=1 "$gpudx" diagnose --no-cuda 2>&1 >/dev/null |
    awk '/^gpudx probe nvml \+/ { sub(/^\+/, "", $4); t += $4 } END { printf "%d\n", t * 1000 }'
done | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }' >"$work/nvml_calls"
med["its NVML calls (trace)"]=$(cat "$work/nvml_calls")
ms() { awk -v u="$1" 'BEGIN { printf "%.1f ms", u / 1000 }'; }
row() { printf '%-30s %10s   %-30s %10s   %7s   %s\n' "$@"; }
source "$here/bench/goal_rows.sh"
cmp() {  # measured, reference, goal as printed, [goal for bench/speed_goals.sh: ratio<=X]
  local a=${med[$1]} b=${med[$2]}
  row "$1" "$(ms "$a")" "$2" "$(ms "$b")" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2fx", a / b }')" "$3"
  goal_row "$1" "$(awk -v u="$a" 'BEGIN { printf "%.1f", u / 1000 }')" ms "$2" \
    "$(awk -v u="$b" 'BEGIN { printf "%.1f", u / 1000 }')" "${4:--}"
}
printf 'gpudx against the driver: %s, %d GPU(s), driver %s, %d rounds (medians, %s s between commands), %d CPUs, load %s\n' \
  "$gpudx" "$gpus" "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)" "$runs" "$settle_s" \
  "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
nvidia-smi --query-gpu=uuid,pci.bus_id,name --format=csv,noheader | sed 's/^/  GPU: /'
row "measured" "median" "reference" "median" "ratio" "goal"
cmp "gpudx diagnose --no-cuda" "nvidia-smi -L" "<= 1.1x" "ratio<=1.1"
cmp "gpudx diagnose --no-cuda" "its NVML calls (trace)" "(what gpudx adds to the driver's answers)"
cmp "nvidia-smi -q" "gpudx diagnose --no-cuda" "(how much nvidia-smi -q costs more)"
cmp "gpudx diagnose" "cuInit floor" "<= 1.0x" "ratio<=1.0"
cmp "gpudx ids" "cuInit floor" "<= 1.0x" "ratio<=1.0"
if [[ -n $before ]]; then
  for n in "diagnose --no-cuda" "diagnose" "ids"; do
    cmp "gpudx $n" "before: $n" "+$(awk -v a="${med["gpudx $n"]}" -v b="${med["before: $n"]}" \
      'BEGIN { printf "%.1f", (a - b) / 1000 }') ms"
  done
fi
echo
echo "collectors of one 'gpudx snapshot' (their own durations; the driver probes run beside the host collectors):"
"$gpudx" snapshot 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
print("  " + ", ".join("%s %.1f ms (%s)" % (c["name"], c["duration_ms"], c["state"]) for c in j["collectors"]))'
