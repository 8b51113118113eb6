# shellcheck shell=bash
# Helpers of the agent tests (sourced): a capture of a real 1×H200 node with its kernel log followed as a
# file, a fake scontrol, the agent started in the background, and waiting on conditions (never on time: the
# deadline is a safety net only).
source "$src/tests/integration/lib.sh"

fail() { echo "FAIL: $*" >&2; [[ -f ${work:-}/agent.err ]] && { echo "--- agent stderr:" >&2; tail -30 "$work/agent.err" >&2; }; exit 1; }

# The GPU of tests/fixtures/h200x1-gathered, and an Xid 79 line about it in the capture's own (kmsg) format.
gpu_pci=0000:00:06.0
xid_seq=900
xid79() {
  xid_seq=$((xid_seq + 1))
  echo "3,$xid_seq,6000000000,-;NVRM: Xid (PCI:0000:00:06): 79, pid=4242, name=python3, GPU has fallen off the bus."
}

# setup_node: $root (a writable copy of the capture), $log (its kernel log, to follow), $state (the agent's),
# $slurm (the fake scontrol's state: node "vm", IDLE), $port.
setup_node() {
  rm -rf "$work" && mkdir -p "$work/state" "$work/slurm"
  root=$work/root log=$work/kern.log state=$work/state slurm=$work/slurm
  cp -a "$src/tests/fixtures/h200x1-gathered" "$root" && chmod -R u+w "$root"
  cp "$root/_commands/dmesg.txt" "$log"
  echo vm > "$slurm/node"
  export FAKE_SCONTROL_STATE=$slurm
  fake=$src/tests/slurm/fake_scontrol.sh
  port=$(free_port)
  url=http://127.0.0.1:$port
}

# stamping_scontrol: $fake becomes a fake scontrol that also appends "NANOSECONDS ARGS" to $work/stamps for each
# update, so a benchmark can time an event to the drain it caused.
stamping_scontrol() {
  cat > "$work/scontrol" <<EOF
#!/usr/bin/env bash
[[ \$1 == update ]] && echo "\$(date +%s%N) \$*" >> "$work/stamps"
exec bash "$src/tests/slurm/fake_scontrol.sh" "\$@"
EOF
  chmod +x "$work/scontrol"
  fake=$work/scontrol
}

# start_agent [EXTRA ARGS...]: the contract's command line, in the background; $agent_pid. The full
# diagnosis comes every $agent_interval seconds (default: an hour, so only the kernel log triggers one).
start_agent() {
  "$gpudx" agent --root "$root" --kernel-log "$log" --listen "127.0.0.1:$port" --state-dir "$state" \
    --drain --node vm --scontrol "$fake" --no-driver --interval "${agent_interval:-3600}" "$@" 2>>"$work/agent.err" &
  agent_pid=$!
  wait_for "the agent answers" agent_answers
}

agent_answers() { "$gpudx" status --url "$url" --no-fallback --format slurm >/dev/null 2>&1 || [[ $? != 69 ]]; }

# wait_for WHAT CONDITION: until the shell CONDITION (evaluated anew each time) holds; fails after 60 s (a
# safety net, not a measure).
wait_for() {
  local what=$1 condition=$2
  local deadline=$((SECONDS + 60))
  until eval "$condition"; do
    kill -0 "${agent_pid:-0}" 2>/dev/null || fail "the agent exited while waiting for: $what"
    (( SECONDS < deadline )) || fail "gave up waiting for: $what"
    sleep 0.05
  done
}

# metric NAME_WITH_LABELS: its value in /metrics, or empty.
metric() { python3 - "$url/metrics" "$1" <<'EOF'
import sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
for line in body.splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(line.split()[-1]); break
EOF
}

# count_events KIND: how many events of that kind /v1/events lists.
count_events() { json_field /v1/events "sum(e['kind'] == '$1' for e in j['events'])"; }

kernel_log_diagnoses() { metric 'gpudx_agent_diagnoses_total{trigger="kernel_log"}'; }

# xid_storm N: N lines of an Xid storm shaped as real nodes have them, many lines about a few GPUs (8 GPUs, 8 codes),
# each naming its own process id and name; for the benchmarks (bench/agent_api.sh, device/agent_storm_memory.sh).
xid_storm() {
  python3 - "$1" <<'EOF'
import sys
codes = [13, 31, 43, 79, 48, 94, 119, 63]
for i in range(int(sys.argv[1])):
    g, c = i % 8, codes[(i // 8) % 8]
    print(f"3,{6000+i},{7100000000+i*1000},-;NVRM: Xid (PCI:0000:{0x18+g*0x10:02x}:00): {c}, pid={1000+i%97}, name=python{i%13}, Ch 00000008")
EOF
}

# judge_lines FILE: appends FILE to the followed log and returns once the agent is done with it: the follower has
# read every line, a kernel-log diagnosis came after, and none for a second.
judge_lines() {
  local lines read0 before settled=-1 now
  lines=$(wc -l < "$1")
  read0=$(metric gpudx_agent_kernel_log_lines_total)
  before=$(kernel_log_diagnoses)
  cat "$1" >> "$log"
  wait_for "the lines read" 'test "$(metric gpudx_agent_kernel_log_lines_total)" -ge $((read0 + lines))'
  wait_for "a diagnosis of them" 'test "$(kernel_log_diagnoses)" -gt "$before"'
  while now=$(kernel_log_diagnoses); [[ $now != "$settled" ]]; do settled=$now; sleep 1; done
}
drain_calls() { grep -c '^update' "$slurm/calls" 2>/dev/null || true; }

# stop_agent: SIGTERM, and the agent must exit 0 (waited for with the safety-net deadline).
stop_agent() {
  kill -TERM "$agent_pid"
  local deadline=$((SECONDS + 30))
  while kill -0 "$agent_pid" 2>/dev/null; do
    (( SECONDS < deadline )) || fail "the agent did not stop on SIGTERM"
    sleep 0.02
  done
  local rc=0
  wait "$agent_pid" || rc=$?
  [[ $rc == 0 ]] || fail "the agent exited $rc on SIGTERM"
  agent_pid=
}

# json_field URL_PATH PYTHON_EXPR: evaluates EXPR over the agent's JSON answer `j`.
json_field() { python3 - "$url$1" "$2" <<'EOF'
import json, sys, urllib.request
j = json.load(urllib.request.urlopen(sys.argv[1], timeout=10))
print(eval(sys.argv[2]))
EOF
}
