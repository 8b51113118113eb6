#!/usr/bin/env bash
# `gpudx agent` under faults: a corrupt event store is moved aside and a new one started, said so; a disk
# that refuses writes (a file-size limit: the kernel fails the store's writes) leaves the agent serving and
# reporting it, the events kept in memory; a followed file that vanishes is said and followed again.
set -euo pipefail
gpudx=$1 src=$2 work=$3
source "$src/tests/agent/lib.sh"
setup_node
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; true' EXIT

# 1. A corrupt database: moved aside, a new one, said on stderr, in /v1/status and as the first event.
head -c 16384 /dev/urandom > "$state/events.db"
start_agent
grep -q "moved aside" "$work/agent.err" || fail "no word of the corrupt database on stderr"
aside=$(json_field /v1/status "j['agent']['store']['moved_aside']")
[[ -n $aside && -f $aside ]] || fail "moved_aside: '$aside'"
[[ $(json_field /v1/events "j['events'][0]['kind']") == agent ]] || fail "first event is not the agent's note"
[[ $(json_field /v1/events "'moved aside' in j['events'][0]['message']") == True ]] || fail "the note does not say so"

# 2. The followed file vanishes and comes back: said, and followed again.
rm "$log"
wait_for "the vanished file's note" 'grep -q "No such file" "$work/agent.err"'
xid79 > "$log"
wait_for "the drain after the file came back" 'grep -qs DRAIN "$slurm/state"'
stop_agent

# 3. A full disk: the agent keeps serving, says the store cannot be written, and still lists the events.
setup_node
: > "$work/agent.err"
# 64 KiB per file: the database and its WAL outgrow it after a few commits (bash's ulimit -f is in KiB).
(ulimit -f 64; exec "$gpudx" agent --root "$root" --kernel-log "$log" --listen "127.0.0.1:$port" \
   --state-dir "$state" --drain --node vm --scontrol "$fake" --no-driver --interval 3600 2>>"$work/agent.err") &
agent_pid=$!
wait_for "the agent answers" 'agent_answers'
cycles=0
while [[ $(json_field /v1/status "j['agent']['store']['writable']") == True ]]; do
  (( ++cycles <= 60 )) || fail "the store never filled up"
  done_before=$(kernel_log_diagnoses)
  if (( cycles % 2 )); then xid79 >> "$log"; else cp "$root/_commands/dmesg.txt" "$log.new"; mv "$log.new" "$log"; fi
  wait_for "diagnosis $cycles" 'test "$(kernel_log_diagnoses)" -gt "$done_before"'
done
problem=$(json_field /v1/status "j['agent']['store']['problem']")
[[ $problem == *"cannot write the event store"* ]] || fail "store problem: $problem"
[[ $(metric gpudx_agent_store_writable) == 0 ]] || fail "gpudx_agent_store_writable is not 0"
# Still serving, and the events the disk refused are listed from memory.
done_before=$(kernel_log_diagnoses)
xid79 >> "$log"
wait_for "a diagnosis with the disk full" 'test "$(kernel_log_diagnoses)" -gt "$done_before"'
pending=$(json_field /v1/events "sum(e['id'] == 0 for e in j['events'])")
(( pending >= 1 )) || fail "no pending events listed"
"$gpudx" status --url "$url" --format slurm >/dev/null || [[ $? == 1 ]] || fail "status with the disk full"
grep -q "cannot write the event store" "$work/agent.err" || fail "no word of the full disk on stderr"
stop_agent
echo "PASS (store refused writes after $cycles changes)"
