#!/usr/bin/env bash
# `gpudx agent` fails closed (docs/agent.md, "Failing closed"): a warning that becomes an error drains; a log
# that can no longer be read neither clears a finding nor resumes the node; a line written just before a
# rotation, or into the renamed-away file, is judged; a restart records no finding twice; a kill -9 between
# scontrol's drain and its record leaves the drain recorded by the next start.
set -euo pipefail
gpudx=$1 src=$2 work=$3
source "$src/tests/agent/lib.sh"
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; [[ -s ${slurm:-/nonexistent}/hanging_pid ]] && kill -KILL "$(cat "$slurm/hanging_pid")" 2>/dev/null; true' EXIT

xid_line() {  # CODE TEXT: an Xid line about the capture's GPU, in its kmsg format
  xid_seq=$((xid_seq + 1))
  echo "3,$xid_seq,6000000000,-;NVRM: Xid (PCI:0000:00:06): $1, pid=4242, name=python3, $2"
}
events_of() { json_field /v1/events "sum(e['kind'] == '$1' and e['finding'] == '$2' for e in j['events'])"; }
exit_code() { json_field /v1/status "j['exit_code']"; }

# 1. A warning Xid, then an error Xid on the same GPU: a changed event and a drain.
setup_node
start_agent
xid_line 13 "Graphics Exception: ESR 0x404600=0x80000002" >> "$log"
wait_for "the warning" 'test "$(events_of appeared kernel_log.xid)" = 1'
grep -qs DRAIN "$slurm/state" && fail "drained for a warning"
xid79 >> "$log"
wait_for "the changed event" 'test "$(events_of changed kernel_log.xid)" = 1'
wait_for "the drain" 'grep -qs DRAIN "$slurm/state"'
[[ $(json_field /v1/events "sum(e['kind'] == 'drained' for e in j['events'])") == 1 ]] || fail "no drained event"

# 2. The log becomes unreadable (a directory under its name: it opens, its reads fail): the Xid stays, carried,
# the verdict stays 1, nothing clears and the node is not resumed.
before=$(kernel_log_diagnoses)
rm "$log" && mkdir "$log"
wait_for "a diagnosis of the unreadable log" 'test "$(kernel_log_diagnoses)" -gt "$before"'
[[ $(exit_code) == 1 ]] || fail "the verdict turned $(exit_code) when the log could not be read"
[[ $(json_field /v1/events "sum(e['kind'] == 'cleared' for e in j['events'])") == 0 ]] || fail "a finding cleared on a read failure"
grep -q "state=resume" "$slurm/calls" && fail "resumed on a read failure"
grep -qs DRAIN "$slurm/state" || fail "no longer drained"
[[ $(json_field /v1/status "any('carried' in ev['value'] for f in j['findings'] for ev in f['evidence'])") == True ]] \
  || fail "the carried finding does not say it is carried"

# 3. A restart records nothing twice: the same findings, no new appeared, changed or drained event.
# The log comes back whole in one rename: copied and appended in place, an agent that read it between the copy
# and the append would rightly see the Xid gone (a cleared finding, then a new one after the restart).
cp "$root/_commands/dmesg.txt" "$log.new" && xid79 >> "$log.new"
rmdir "$log" && mv "$log.new" "$log"
stop_agent
appeared=$(python3 -c "import sqlite3; print(sqlite3.connect('$state/events.db').execute(\"select count(*) from events where kind in ('appeared','changed','drained')\").fetchone()[0])")
start_agent
wait_for "the first diagnosis after the restart" "test \"\$(json_field /v1/status \"j['agent']['last_diagnosis']['trigger']\")\" = start"
again=$(python3 -c "import sqlite3; print(sqlite3.connect('$state/events.db').execute(\"select count(*) from events where kind in ('appeared','changed','drained')\").fetchone()[0])")
[[ $again == "$appeared" ]] || fail "the restart recorded $((again - appeared)) events again"
stop_agent
# 3b. The same from a store an earlier gpudx wrote: the open findings as one array under agent_state's
# "open_findings", no open_findings rows. Read from there; the array goes once the table is written.
python3 - "$state/events.db" <<'EOF2'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
entries = [row[0] for row in db.execute("SELECT entry FROM open_findings ORDER BY key")]
assert entries, "no open findings rows to turn into the earlier format"
db.execute("DELETE FROM open_findings")
db.execute("INSERT OR REPLACE INTO agent_state(key, value) VALUES('open_findings', ?)", ("[" + ",".join(entries) + "]",))
db.commit()
EOF2
start_agent
# The first diagnosis of a run writes the table (nothing was published before it), in the commit of any event it
# records: once the rows are there, so is every event it made.
wait_for "the table written" 'python3 -c "import sqlite3, sys; db = sqlite3.connect(\"$state/events.db\"); sys.exit(db.execute(\"select count(*) from open_findings\").fetchone()[0] == 0)"'
again=$(python3 -c "import sqlite3; print(sqlite3.connect('$state/events.db').execute(\"select count(*) from events where kind in ('appeared','changed','drained')\").fetchone()[0])")
[[ $again == "$appeared" ]] || fail "the restart from an earlier store recorded $((again - appeared)) events again"
legacy=$(python3 -c "import sqlite3; print(sqlite3.connect('$state/events.db').execute(\"select count(*) from agent_state where key = 'open_findings'\").fetchone()[0])")
[[ $legacy == 0 ]] || fail "the earlier store's array is still there once the table was written"
stop_agent

# 4. Lines lost in rotation: one written just before the rename, one into the renamed-away file.
for where in before_rename into_renamed; do
  setup_node
  start_agent
  before=$(kernel_log_diagnoses)
  if [[ $where == before_rename ]]; then
    xid79 >> "$log"; mv "$log" "$log.1"; : > "$log"
  else
    mv "$log" "$log.1"; xid79 >> "$log.1"; : > "$log"
  fi
  wait_for "the drain for the Xid written $where" 'grep -qs DRAIN "$slurm/state"'
  [[ $(exit_code) == 1 ]] || fail "$where: verdict $(exit_code)"
  stop_agent
done
# The rotated-away line is still judged after a restart: no file the new run reads holds it.
start_agent
[[ $(exit_code) == 1 ]] || fail "after a restart, the rotated-away Xid is forgotten (verdict $(exit_code))"
[[ $(json_field /v1/events "sum(e['kind'] == 'cleared' for e in j['events'])") == 0 ]] || fail "cleared after a restart"
stop_agent

# 5. kill -9 after scontrol drained the node and before the agent recorded it: the next start records it.
setup_node
start_agent
touch "$slurm/hang_after_update"
xid79 >> "$log"
wait_for "scontrol's drain" 'test -s "$slurm/hanging_pid"'
kill -KILL "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
kill -KILL "$(cat "$slurm/hanging_pid")" 2>/dev/null || true
rm -f "$slurm/hang_after_update" "$slurm/hanging_pid"
grep -qs DRAIN "$slurm/state" || fail "the fake scontrol did not drain"
start_agent
wait_for "the drained event recorded after the restart" \
  "test \"\$(json_field /v1/events \"sum(e['kind'] == 'drained' for e in j['events'])\")\" = 1"
[[ $(json_field /v1/events "sum(e['kind'] == 'appeared' and e['finding'] == 'kernel_log.xid' for e in j['events'])") == 1 ]] \
  || fail "the Xid was recorded twice"
stop_agent
echo PASS
