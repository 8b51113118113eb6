#!/usr/bin/env bash
# Does a command's time on a GPU node depend on what ran just before it? bench/diagnose_vs_driver.sh runs its
# commands in turn, so each one starts right after another one exited; if the driver is still busy with the last
# process (tearing down its CUDA context, say), the next command pays for it, and a table's ratios then say more
# about the order of its rows than about gpudx. This runs each measured command after each kind of predecessor:
#   cuda          the bare cuInit process (bench/cuda_floor.c), started again at once
#   cuda+300ms    the same, then 300 ms of rest
#   cuda+1500ms   the same, then 1.5 s of rest
#   nvml          `nvidia-smi -L` (NVML only, no CUDA context), started again at once
# and prints each command's median per predecessor (RUNS rounds, the predecessors in turn inside each round).
#
#   bench/driver_settle.sh [GPUDX] [RUNS]
#
# Needs a GPU node with nvidia-smi and libcuda.so.1; elsewhere it says so and exits 77 (skipped).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gpudx=$(realpath "${1:-$here/build/gpudx}")
runs=${2:-9}
source "$here/bench/gpu_node.sh"
gpu_node_setup driver_settle

# name|command
measured=(
  "cuInit floor|$floor"
  "gpudx ids|$gpudx ids"
  "gpudx diagnose|$gpudx diagnose"
  "gpudx diagnose --no-cuda|$gpudx diagnose --no-cuda"
  "nvidia-smi -L|nvidia-smi -L"
)
predecessors=("cuda|$floor|0" "cuda+300ms|$floor|0.3" "cuda+1500ms|$floor|1.5" "nvml|nvidia-smi -L|0")

for c in "${measured[@]}"; do ${c#*|} >/dev/null 2>&1; done  # page cache
for ((r = 0; r < runs; r++)); do
  for p in "${!predecessors[@]}"; do
    IFS='|' read -r _ pred rest <<<"${predecessors[$p]}"
    for m in "${!measured[@]}"; do
      # shellcheck disable=SC2086  # the commands are words on purpose
      $pred >/dev/null 2>&1
      sleep "$rest"
      # shellcheck disable=SC2086
      us ${measured[$m]#*|} >>"$work/t$m.$p"
    done
  done
done

median() { sort -n "$1" | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] / 1000 }'; }
printf 'what ran just before each command: medians in ms of %d rounds, %s, driver %s, %d CPUs\n' "$runs" \
  "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)" "$(nproc)"
printf '  persistence mode: %s\n' "$(nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | paste -sd,)"
printf '%-26s' "command \\ just before"
for p in "${predecessors[@]}"; do printf '%14s' "${p%%|*}"; done
echo
for m in "${!measured[@]}"; do
  printf '%-26s' "${measured[$m]%%|*}"
  for p in "${!predecessors[@]}"; do printf '%14s' "$(median "$work/t$m.$p")"; done
  echo
done
