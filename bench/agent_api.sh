#!/usr/bin/env bash
# The agent's API at size (issue 34, item 4), one table: the /v1/events answer for 100 and for 10,000 events, and
# the agent's resident memory idle, after answering, and while it holds 10,000 findings; each figure beside its
# goal and beside the same figure of an earlier gpudx (BEFORE, e.g. main built before a change), measured in the
# same run, as a ratio.
#   - the store: 10,000 events (100 findings of 100 GPUs appearing and clearing, as the agent recorded them, copied
#     in the store until there are 10,000), the same file for both binaries;
#   - an answer's time: curl's total time (connect to last byte, the body read and dropped), the median of RUNS;
#   - memory: VmRSS of the agent process (/proc/PID/status), its children (the collection, the NVML watcher) not
#     included; "after answering": after 5 answers of 10,000 events; "holding 10,000 findings": after a kernel log
#     line of an Xid 79 on each of 10,000 PCI addresses was judged, then after /v1/status and the page (/) were
#     asked for with them; the peak (VmHWM) while it judged them, while it answered /v1/status and while it answered
#     /, and the most of the three (the diagnoses and the answers included); then,
#     in an agent of its own, after a storm shaped as real nodes have them (1,000,000 Xid lines on 8 GPUs), and its
#     peak;
#   - with STANDINS=DIR (the stand-in driver libraries, build/tests/standins/lib): the agent with its NVML watcher
#     (`gpudx nvml-events`, a child), idle: the agent's RSS, the watcher's, and the two together.
# On the capture tests/fixtures/h200x1-gathered with the contract's command line.
# usage: [BEFORE=OLD_GPUDX] [STANDINS=DIR] [RUNS=N] bench/agent_api.sh [GPUDX]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
gpudx=$(realpath "${1:-build/gpudx}")
before=${BEFORE:+$(realpath "$BEFORE")}
runs=${RUNS:-9}
top=$(mktemp -d /tmp/gpudx-bench-agent-api.XXXXXX)
agent_pid=
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; rm -rf "$top"' EXIT
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 2; }

rss_mb() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
# The most it was resident at any moment (the kernel's high-water mark): the diagnoses and answers included.
peak_rss_mb() { awk '/VmHWM/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
# The agent's peak while it answers PATH: its high-water mark set back to the present first (clear_refs, which the
# process's owner may write).
answer_peak_mb() {
  echo 5 > "/proc/$agent_pid/clear_refs"
  curl -s -o /dev/null "$url$1"
  peak_rss_mb "$agent_pid"
}
# The median of RUNS answers' total time, in ms.
answer_ms() {
  for ((i = 0; i < runs; i++)); do curl -s -o /dev/null -w '%{time_total}\n' "$url$1"; done |
    sort -n | awk '{a[NR]=$1*1000} END {printf "%.1f", a[int((NR+1)/2)]}'
}

# The store of 10,000 events, made once by the binary measured.
make_store() {
  work=$top/seed
  source "$src/tests/agent/lib.sh"
  setup_node
  stamping_scontrol
  start_agent
  local burst=$work/burst.txt b
  : > "$burst"
  for ((g = 1; g <= 100; g++)); do
    printf '3,%d,7000000000,-;NVRM: Xid (PCI:0000:%02x:00): 79, pid=1, name=x, GPU has fallen off the bus.\n' $((5000 + g)) "$g" >> "$burst"
  done
  b=$(kernel_log_diagnoses); cat "$burst" >> "$log"; wait_for burst 'test "$(kernel_log_diagnoses)" -gt "$b"'
  b=$(kernel_log_diagnoses); cp "$root/_commands/dmesg.txt" "$log.new"; mv "$log.new" "$log"
  wait_for clear 'test "$(kernel_log_diagnoses)" -gt "$b"'
  stop_agent
  python3 - "$state/events.db" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
cols = "time_ms, kind, finding, layer, severity, gpu_uuid, gpu_pci, message, evidence"
rows = db.execute(f"SELECT {cols} FROM events WHERE kind IN ('appeared', 'cleared') ORDER BY id").fetchall()
while db.execute("SELECT count(*) FROM events").fetchone()[0] < 10000:
    db.executemany(f"INSERT INTO events({cols}) VALUES(?,?,?,?,?,?,?,?,?)", rows)
db.execute("DELETE FROM events WHERE id > 10000")
db.commit()
EOF
  cp "$state/events.db" "$top/events.db"
  xid_storm 1000000 > "$top/storm.txt"
  python3 - > "$top/findings.txt" <<'EOF'
n = 0
for dom in range(2):
    for bus in range(1, 256):
        for dev in range(32):
            if n < 10000:
                print(f"3,{6000+n},7100000000,-;NVRM: Xid (PCI:{dom:04x}:{bus:02x}:{dev:02x}): 79, pid=1, name=x, GPU has fallen off the bus.")
            n += 1
EOF
}

# measure GPUDX TAG: the figures of one binary, as "TAG KEY VALUE" lines in $top/figures.
measure() {
  gpudx=$1
  local tag=$2
  work=$top/$tag
  source "$src/tests/agent/lib.sh"
  setup_node
  stamping_scontrol
  cp "$top/events.db" "$state/events.db"
  start_agent
  local out=$top/figures
  sleep 2
  echo "$tag rss_idle $(rss_mb "$agent_pid")" >> "$out"
  echo "$tag events_100 $(answer_ms '/v1/events?limit=100')" >> "$out"
  echo "$tag events_10000 $(answer_ms '/v1/events?limit=10000')" >> "$out"
  echo "$tag events_10000_count $(json_field '/v1/events?limit=10000' "len(j['events'])")" >> "$out"
  for ((i = 0; i < 5; i++)); do curl -s -o /dev/null "$url/v1/events?limit=10000"; done
  echo "$tag rss_answered $(rss_mb "$agent_pid")" >> "$out"
  local b
  b=$(kernel_log_diagnoses); cat "$top/findings.txt" >> "$log"
  wait_for "10,000 findings" 'test "$(kernel_log_diagnoses)" -gt "$b"'
  # The 10,000 lines may come to the follower in more than one read: memory is read once no diagnosis runs (none
  # came for a second), not amid the next one's work.
  local settled=-1 now
  while now=$(kernel_log_diagnoses); [[ $now != "$settled" ]]; do settled=$now; sleep 1; done
  echo "$tag rss_findings $(rss_mb "$agent_pid")" >> "$out"
  local judged status page
  judged=$(peak_rss_mb "$agent_pid")
  echo "$tag rss_judged_peak $judged" >> "$out"
  status=$(answer_peak_mb /v1/status)
  echo "$tag rss_status_peak $status" >> "$out"
  page=$(answer_peak_mb /)
  echo "$tag rss_page_peak $page" >> "$out"
  echo "$tag rss_findings_answered $(rss_mb "$agent_pid")" >> "$out"
  echo "$tag rss_peak $(printf '%s\n' "$judged" "$status" "$page" | sort -g | tail -1)" >> "$out"
  stop_agent
  # The storm, judged by an agent of its own (the high-water mark above is the 10,000 findings').
  setup_node
  stamping_scontrol
  start_agent
  judge_lines "$top/storm.txt"
  echo "$tag rss_storm $(rss_mb "$agent_pid")" >> "$out"
  echo "$tag rss_storm_peak $(peak_rss_mb "$agent_pid")" >> "$out"
  stop_agent
  if [[ -n ${STANDINS:-} ]]; then
    setup_node
    echo "{\"base\": \"$root/_driver/answers.json\", \"nvml_events\": [], \"faults\": []}" > "$work/scenario.json"
    GPUDX_STANDIN_SCENARIO=$work/scenario.json "$gpudx" agent --root "$root" --kernel-log "$log" \
      --listen "127.0.0.1:$port" --state-dir "$state" --driver-lib-dir "$STANDINS" --interval 3600 2>>"$work/agent.err" &
    agent_pid=$!
    wait_for "the agent answers" agent_answers
    local watcher=""
    wait_for "the watcher" 'watcher=$(pgrep -P "$agent_pid" -f nvml-events | head -1); [[ -n $watcher ]]'
    sleep 3
    local a w
    a=$(rss_mb "$agent_pid") w=$(rss_mb "$watcher")
    echo "$tag rss_nvml_agent $a" >> "$out"
    echo "$tag rss_nvml_watcher $w" >> "$out"
    echo "$tag rss_nvml_both $(awk -v a="$a" -v w="$w" 'BEGIN{printf "%.1f", a+w}')" >> "$out"
    stop_agent
  fi
}

make_store
measure "$gpudx" after
[[ -n $before ]] && measure "$before" before

source "$src/bench/goal_rows.sh"
fig() { awk -v t="$1" -v k="$2" '$1 == t && $2 == k {print $3}' "$top/figures"; }
printf '%-52s %10s %10s %10s %8s\n' "what" "goal" "before" "now" "now/bef."
row() { # KEY LABEL GOAL
  local now bef ratio=""
  now=$(fig after "$1") bef=$( [[ -n $before ]] && fig before "$1" || true)
  [[ -n $bef && -n $now ]] && ratio=$(awk -v a="$now" -v b="$bef" 'BEGIN{ if (b > 0) printf "%.2f", a/b }')
  printf '%-52s %10s %10s %10s %8s\n' "$2" "$3" "${bef:--}" "${now:--}" "$ratio"
  # bench/speed_goals.sh's table: each limit in ms or MB (the label's unit), beside the earlier build if any.
  if [[ $3 =~ ^[0-9]+$ && $2 =~ \((ms|MB)\)$ && -n $now ]]; then
    local reference=-
    [[ -n $bef ]] && reference="earlier build"
    goal_row "agent: ${2%% (*}" "$now" "${BASH_REMATCH[1]}" "$reference" "${bef:--}" "value<=$3"
  fi
}
row events_100 "/v1/events?limit=100, 100 events (ms)" "-"
row events_10000 "/v1/events?limit=10000 over 10,000 events (ms)" "50"
row events_10000_count "  events in that one answer" "10000"
row rss_idle "RSS idle (MB)" "20"
row rss_answered "RSS after 5 answers of 10,000 events (MB)" "20"
row rss_findings "RSS holding 10,000 findings (MB)" "20"
row rss_findings_answered "  and after /v1/status and / with them (MB)" "20"
row rss_judged_peak "  its peak while it judged and recorded them (MB)" "20"
row rss_status_peak "  its peak while it answered /v1/status (MB)" "20"
row rss_page_peak "  its peak while it answered / (MB)" "20"
row rss_peak "  its peak over the whole run (MB)" "20"
row rss_storm "RSS after 1,000,000 Xid lines on 8 GPUs (MB)" "20"
row rss_storm_peak "  its peak while it read and judged them (MB)" "20"
if [[ -n ${STANDINS:-} ]]; then
  row rss_nvml_agent "RSS with the NVML watcher: the agent (MB)" "-"
  row rss_nvml_watcher "  the watcher, gpudx nvml-events (MB)" "-"
  row rss_nvml_both "  the two together (MB)" "30"
fi
