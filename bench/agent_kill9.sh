#!/usr/bin/env bash
# `gpudx agent` killed with SIGKILL at random moments (docs/agent.md, "Failing closed"): TRIALS times, an Xid 79
# is appended to the followed log (the finding appears, the node is drained) or a new boot begins in it (the
# finding clears, the node is resumed), and the agent is killed 0-400 ms later, in the middle of whatever it
# was doing, then started again on the same state directory. At the end the event store is read back:
#   - duplicated: an event that repeats the one before it for the same finding (appeared twice without a
#     cleared between) or for the node (drained twice without a resumed between);
#   - lost: the node's final Slurm state or the final verdict that the last recorded event does not explain
#     (drained by gpudx with no drained event last, or the finding open with no appeared event last);
#   - PRAGMA integrity_check after every kill.
# The goal is 0 and 0. On the capture tests/fixtures/h200x1-gathered with a fake scontrol.
# usage: bench/agent_kill9.sh [GPUDX] [TRIALS]
set -euo pipefail
gpudx=$(realpath "${1:-build/gpudx}") trials=${2:-20}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gpudx-bench-kill9.XXXXXX)
source "$src/tests/agent/lib.sh"
setup_node
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT

boot_seq=0
new_boot() {  # a new boot in the log: the kernel's first line, its monotonic clock back at 0
  boot_seq=$((boot_seq + 1))
  echo "6,$((100000 + boot_seq)),0,-;Linux version 6.8.0-gpudx-bench-$boot_seq (gcc 12) #1 SMP"
}
db() { python3 -c "import sqlite3,sys; print(sqlite3.connect('$state/events.db').execute(sys.argv[1]).fetchone()[0])" "$1"; }

bad_integrity=0
for ((t = 1; t <= trials; t++)); do
  start_agent
  if (( t % 2 )); then xid79 >> "$log"; else new_boot >> "$log"; fi
  sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  kill -KILL "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
  [[ $(db "PRAGMA integrity_check") == ok ]] || bad_integrity=$((bad_integrity + 1))
done
# The last start: it must settle the node as the log says, and record what the killed runs did not.
start_agent
expected=$(( trials % 2 ))  # 1: the log ends with an Xid 79 (drained), 0: with a new boot (resumed)
if (( expected )); then wait_for "drained" 'grep -qs DRAIN "$slurm/state"'
else wait_for "resumed" '! grep -qs DRAIN "$slurm/state"'; fi
sleep 1
stop_agent

read -r dup_findings dup_node last_finding last_node < <(python3 - "$state/events.db" <<'EOF'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("select kind, finding from events order by id").fetchall()
dup_findings = dup_node = 0
finding_last, node_last = {}, None
for kind, finding in rows:
    if kind in ("appeared", "cleared") and finding == "kernel_log.xid":
        if finding_last.get(finding) == kind: dup_findings += 1
        finding_last[finding] = kind
    if kind in ("drained", "resumed"):
        if node_last == kind: dup_node += 1
        node_last = kind
print(dup_findings, dup_node, finding_last.get("kernel_log.xid", "none"), node_last or "none")
EOF
)
lost=0
if (( expected )); then
  [[ $last_finding == appeared ]] || lost=$((lost + 1))
  [[ $last_node == drained ]] || lost=$((lost + 1))
else
  [[ $last_finding == cleared ]] || lost=$((lost + 1))
  [[ $last_node == resumed ]] || lost=$((lost + 1))
fi
printf '%-40s %s\n' "trials (kill -9 each)" "$trials" \
  "events stored" "$(db 'select count(*) from events')" \
  "drains / resumes issued to scontrol" "$(grep -c 'state=drain' "$slurm/calls" || true) / $(grep -c 'state=resume' "$slurm/calls" || true)" \
  "duplicated events (finding, node)" "$dup_findings, $dup_node" \
  "lost (final state not explained)" "$lost" \
  "integrity_check failures" "$bad_integrity"
(( dup_findings + dup_node + lost + bad_integrity == 0 ))
