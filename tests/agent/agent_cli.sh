#!/usr/bin/env bash
# `gpudx agent` as its contract says tests drive it: on a capture of a real 1×H200 node with its kernel log
# followed as a file, a fake scontrol recording its arguments. An Xid 79 line appended drains the node at
# once, the event is in /v1/events, a second Xid for the same GPU drains nothing twice, the log cleared
# resumes the node (gpudx drained it), `gpudx status`/`events` answer over the unix socket (mode 0660) and the
# URL, a since= out of range is refused, the events outlive a restart, a port in use exits 64, SIGTERM exits 0.
set -euo pipefail
gpudx=$1 src=$2 work=$3
source "$src/tests/agent/lib.sh"
setup_node
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; true' EXIT

# 1. Healthy at start: nothing drained, the status as diagnose prints it.
start_agent
"$gpudx" status --url "$url" >"$work/status.txt" || fail "status on a healthy node exited $?"
"$gpudx" diagnose --root "$root" --kernel-log "$log" --no-driver >"$work/diagnose.txt" || true
diff <(grep -v 'took\|ms)' "$work/status.txt") <(grep -v 'took\|ms)' "$work/diagnose.txt") >/dev/null ||
  fail "status differs from diagnose: $(diff "$work/status.txt" "$work/diagnose.txt" | head -10)"
[[ $(drain_calls) == 0 ]] || fail "drained a healthy node"
echo "healthy: $(head -1 "$work/status.txt")"

# 2. An Xid 79 appended: drained at once, with gpudx's reason naming the GPU.
before=$(kernel_log_diagnoses)
xid79 >> "$log"
wait_for "the drain" 'grep -qs DRAIN "$slurm/state"'
reason=$(cat "$slurm/reason")
[[ $reason == "gpudx: "*"$gpu_pci"* ]] || fail "drain reason: $reason"
grep -q "^update nodename=vm state=drain reason=gpudx: " "$slurm/calls" || fail "scontrol calls: $(cat "$slurm/calls")"
echo "drained: $reason"

# 3. The events: the finding that appeared, with the GPU, and the drain.
wait_for "the drain event" 'test "$(count_events drained)" == 1'
kinds=$(json_field /v1/events "' '.join(e['kind'] for e in j['events'])")
[[ $kinds == *appeared*drained* ]] || fail "events: $kinds"
appeared_pci=$(json_field /v1/events "[e['gpu']['pci'] for e in j['events'] if e['kind'] == 'appeared' and e['severity'] == 'error'][0]")
[[ $appeared_pci == "$gpu_pci" ]] || fail "the appeared event names $appeared_pci"
"$gpudx" events --url "$url" --since 1h > "$work/events.txt"
grep -q "drained" "$work/events.txt" || fail "gpudx events: $(cat "$work/events.txt")"
"$gpudx" status --url "$url" --format slurm >"$work/slurm.txt" && fail "status exited 0 on a node with an Xid 79"
[[ $(cat "$work/slurm.txt") == "$reason" ]] || fail "status --format slurm: $(cat "$work/slurm.txt")"

# 4. The same Xid again: judged (a kernel-log diagnosis more), but the node is not drained twice.
done_before=$(kernel_log_diagnoses)
xid79 >> "$log"
wait_for "the second Xid's diagnosis" 'test "$(kernel_log_diagnoses)" -gt "$done_before"'
[[ $(drain_calls) == 1 ]] || fail "drained twice for one event: $(cat "$slurm/calls")"

# 5. Over the unix socket (STATE_DIR/agent.sock by default), JSON as diagnose --format json plus the agent's part.
"$gpudx" status --state-dir "$state" --format json >"$work/status.json" && fail "status --format json exited 0"
python3 - "$work/status.json" <<'EOF' || fail "status JSON: $(head -c 400 "$work/status.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["verdict"] != "healthy", j["verdict"]
assert any(f["severity"] == "error" for f in j["findings"])
assert j["agent"]["kernel_log"]["lines_matched"] >= 2, j["agent"]["kernel_log"]
assert j["agent"]["store"]["writable"] is True
EOF

# 5b. The socket is for the agent's user and group (docs/agent.md, "Who may ask"): another user is told so and
# may ask over TCP (as root only, where `nobody` can be switched to).
[[ $(stat -c %a "$state/agent.sock") == 660 ]] || fail "socket mode $(stat -c %a "$state/agent.sock"), not 660"
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null && getent passwd nobody >/dev/null; then
  as_nobody() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- "$@"; }
  set +e
  as_nobody "$gpudx" events --state-dir "$state" >/dev/null 2>"$work/nobody.err"; rc=$?
  set -e
  [[ $rc == 69 ]] && grep -q "permission denied" "$work/nobody.err" ||
    fail "events as nobody over the socket: exit $rc: $(cat "$work/nobody.err")"
  as_nobody "$gpudx" events --url "$url" >/dev/null 2>"$work/nobody.err" ||
    fail "events as nobody over TCP: $(cat "$work/nobody.err")"
fi

# 5c. A since= no event time can be (out of a double's integer range, not a number) is a 400, not every event;
# the CLI's --since a usage error.
python3 - "$url" <<'EOF' || fail "since= out of range was not refused"
import sys, urllib.error, urllib.request
for since in ["1e300", "inf", "nan", "-1e300", "1e300d"]:
    try:
        urllib.request.urlopen(sys.argv[1] + "/v1/events?since=" + since, timeout=10)
        raise SystemExit(f"since={since}: answered 200")
    except urllib.error.HTTPError as e:
        assert e.code == 400, (since, e.code)
EOF
set +e
"$gpudx" events --url "$url" --since 1e300 >/dev/null 2>"$work/since.err"; rc=$?
set -e
[[ $rc == 64 ]] || fail "events --since 1e300 exited $rc: $(cat "$work/since.err")"

# 6. The log rotated to one without the Xid: the finding clears and gpudx resumes its own drain.
cp "$root/_commands/dmesg.txt" "$log.new" && mv "$log.new" "$log"
wait_for "the resume" 'test "$(cat "$slurm/state")" == IDLE'
grep -q '^update nodename=vm state=resume' "$slurm/calls" || fail "no resume call: $(cat "$slurm/calls")"
wait_for "the cleared event" 'test "$(count_events cleared)" -ge 1'

# 7. A second agent on the same port: a clear error, exit 64.
set +e
"$gpudx" agent --root "$root" --kernel-log "$log" --listen "127.0.0.1:$port" --state-dir "$work/other" --no-driver \
  >"$work/second.out" 2>&1
rc=$?
set -e
[[ $rc == 64 ]] || fail "a port in use exited $rc: $(cat "$work/second.out")"
grep -q "Address already in use" "$work/second.out" || fail "port in use message: $(cat "$work/second.out")"

# 8. SIGTERM: exit 0, the socket removed; the events are still there for the next agent.
stop_agent
[[ ! -e $state/agent.sock ]] || fail "the socket outlived the agent"
set +e
"$gpudx" events --state-dir "$state" >/dev/null 2>"$work/noagent.err"; rc=$?
"$gpudx" status --state-dir "$state" --root "$root" --kernel-log "$log" --no-driver >"$work/fallback.txt" 2>"$work/fallback.err"; frc=$?
set -e
[[ $rc == 69 ]] && grep -q "no gpudx agent answers" "$work/noagent.err" || fail "events without an agent: exit $rc: $(cat "$work/noagent.err")"
[[ $frc == 0 ]] && grep -q "one-shot diagnosis" "$work/fallback.err" || fail "status fallback: exit $frc: $(cat "$work/fallback.err")"
start_agent
n=$(count_events drained)
[[ $n == 1 ]] || fail "after a restart the store holds $n drain events"
stop_agent
echo PASS
