#!/usr/bin/env bash
# `gpudx agent` with NVML's events, on a capture of a real 1×H200 node served by the stand-in libnvidia-ml
# (tests/standins): an Xid 79 that NVML delivers and the followed kernel log does not show is recorded (kind
# nvml), judged at once (kernel_log.xid_from_nvml, an error: the node is drained) and served; the same Xid then
# written to the kernel log is judged from the log alone (no second finding for one fault); a watcher whose
# nvmlEventSetWait_v2 hangs is killed and said, while the agent goes on serving.
set -euo pipefail
gpudx=$1 src=$2 work=$3 standins=$4
source "$src/tests/agent/lib.sh"
setup_node
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; true' EXIT

# The capture's recorded answers, plus the events the stand-in delivers.
scenario() { # EVENTS_JSON FAULTS_JSON
  cat > "$work/scenario.json" <<JSON
{"base": "$root/_driver/answers.json", "nvml_events": $1, "faults": $2}
JSON
  export GPUDX_STANDIN_SCENARIO=$work/scenario.json
}
start_nvml_agent() {
  "$gpudx" agent --root "$root" --kernel-log "$log" --listen "127.0.0.1:$port" --state-dir "$state" \
    --drain --node vm --scontrol "$fake" --driver-lib-dir "$standins" --deadline 1 --interval 3600 \
    2>>"$work/agent.err" &
  agent_pid=$!
  wait_for "the agent answers" agent_answers
}
has_finding() { [[ $(json_field /v1/status "sum(f['id'] == '$1' for f in j['findings'])") != 0 ]]; }
agent_notes() { json_field /v1/status "' | '.join(n['message'] for n in j['agent']['notes'])"; }

# 1. An Xid 79 from NVML, 1.5 s after the watcher registered: an nvml event, the finding, the drain.
scenario '[{"after_ms": 1500, "device": 0, "type": 8, "data": 79}]' '[]'
start_nvml_agent
wait_for "the watcher registers the GPU" '[[ $(agent_notes) == *"NVML events: watching GPU-"*"$gpu_pci"*xid* ]]'
wait_for "the NVML event" 'test "$(count_events nvml)" == 1'
event=$(json_field /v1/events "[e['message'] + ' @ ' + e['gpu']['pci'] for e in j['events'] if e['kind'] == 'nvml'][0]")
[[ $event == "NVML event: Xid 79 on GPU-"*" @ $gpu_pci" ]] || fail "the nvml event: $event"
wait_for "the finding" 'has_finding kernel_log.xid_from_nvml'
wait_for "the drain" 'grep -qs DRAIN "$slurm/state"'
[[ $(cat "$slurm/reason") == "gpudx: kernel_log.xid_from_nvml "*"$gpu_pci"* ]] || fail "drain reason: $(cat "$slurm/reason")"
[[ $(metric 'gpudx_agent_diagnoses_total{trigger="nvml_event"}') -ge 1 ]] || fail "no diagnosis for the NVML event"
[[ $(json_field /v1/status "j['agent']['nvml_events']['received']") == 1 ]] || fail "received count"
echo "NVML Xid 79: $event; drained: $(cat "$slurm/reason")"

# 2. The same Xid in the kernel log: judged from the log; the NVML-only finding clears (one fault, one finding).
xid79 >> "$log"
wait_for "the kernel-log finding" 'has_finding kernel_log.xid'
has_finding kernel_log.xid_from_nvml && fail "the Xid is judged twice: from the log and from NVML"
[[ $(drain_calls) == 1 ]] || fail "drained twice for one fault: $(cat "$slurm/calls")"
stop_agent
echo "the log's own line: kernel_log.xid alone, one drain"

# 3. A wait that never returns: the watcher is killed after its quiet limit (deadline 1 s + 2 s) and said;
#    the agent answers throughout.
setup_node
scenario '[]' '[{"call": "nvmlEventSetWait", "hang": true}]'
start_nvml_agent
wait_for "the hung watcher is said" '[[ $(agent_notes) == *"hung in nvmlEventSetWait_v2"*"killed"* ]]'
"$gpudx" status --url "$url" --format json >"$work/status.json" || true
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['verdict'], j" "$work/status.json" ||
  fail "status after the hang: $(head -c 300 "$work/status.json")"
stop_agent
echo "hung wait: $(agent_notes 2>/dev/null || grep -o 'NVML events: the watcher hung[^;]*' "$work/agent.err" | head -1)"
echo PASS
