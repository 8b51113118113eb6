#!/usr/bin/env bash
# device/agent_storm_memory.sh (from the repository root, the binary as build-device/gpudx, $OUT set): the agent
# judging a storm of 1,000,000 Xid lines on 8 GPUs (as bench/agent_api.sh feeds it), its resident memory after and
# its peak, with where the memory is (smaps_rollup: transparent huge pages?), run as it is and with transparent
# huge pages disabled for it alone (prctl PR_SET_THP_DISABLE, inherited through exec; no system setting changed).
set -u
src=$PWD
gpudx=$src/build-device/gpudx
top=$(mktemp -d)
work=$top/w
source "$src/tests/agent/lib.sh"
{ echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"; echo "defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag 2>&1)"; ldd --version | head -1; } > "$OUT/system.txt"
xid_storm 1000000 > "$top/storm.txt"
no_thp() { exec python3 -c 'import ctypes, os, sys; assert ctypes.CDLL(None).prctl(41, 1, 0, 0, 0) == 0; os.execv(sys.argv[1], sys.argv[1:])' "$@"; }
storm() {  # TAG [wrapper]
  local tag=$1; shift
  setup_node; stamping_scontrol
  "$@" "$gpudx" agent --root "$root" --kernel-log "$log" --listen "127.0.0.1:$port" --state-dir "$state" \
    --drain --node vm --scontrol "$fake" --no-driver --interval 3600 2>>"$OUT/agent.err" &
  agent_pid=$!
  wait_for "the agent answers" agent_answers
  sleep 1
  echo "$tag idle: $(grep -E 'VmRSS' /proc/$agent_pid/status | tr -s ' \t' ' ')" >> "$OUT/storm.txt"
  judge_lines "$top/storm.txt"
  echo "$tag after: $(grep -E 'VmRSS|VmHWM' /proc/$agent_pid/status | tr -s ' \t\n' ' ') diagnoses $(kernel_log_diagnoses)" >> "$OUT/storm.txt"
  grep -E 'Rss|Anon|AnonHuge|Private' /proc/$agent_pid/smaps_rollup | tr -s ' ' | sed "s/^/$tag  /" >> "$OUT/storm.txt"
  grep THP_enabled /proc/$agent_pid/status | sed "s/^/$tag  /" >> "$OUT/storm.txt"
  stop_agent
}
for r in ${ROUNDS_LIST:-1 2}; do storm "plain$r"; storm "no-thp$r" no_thp; done
cat "$OUT/system.txt" "$OUT/storm.txt"
rm -rf "$top"
