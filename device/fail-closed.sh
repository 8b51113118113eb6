#!/usr/bin/env bash
# Issue 28 on a real GPU node (results under $OUT, summary.txt first):
#   - one-shot `gpudx diagnose` of the live node: every layer read, so no "could not evaluate" from the new
#     rule on a node whose layers are all there; then the same with the kernel log unreadable
#     (--kernel-log /proc/self/mem: a regular file whose reads fail), which must be exit 3 unless an error
#     stands elsewhere;
#   - the live agent (device/agent.sh: the real driver, NVML events, /dev/kmsg followed from the ring's start);
#   - bench/agent_kill9.sh (20 kill -9 trials: lost and duplicated events) and bench/agent_soak.sh (500 slow
#     and idle clients while Xids arrive), on the capture with a fake scontrol.
# Changes nothing on the node: no --drain on the live agent, state in temporary folders.
set -u
OUT=${OUT:-/tmp/gpudx-fail-closed-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=$(pwd)/build-device/gpudx
[[ -x $BIN ]] || BIN=$(pwd)/build/gpudx
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version --format=csv | tee -a "$S"
"$BIN" diagnose -v >"$OUT/diagnose.txt" 2>&1; say "diagnose (live): exit $?"
grep -E '^  [a-z_]+ +(ok|WARN|FAILED|not evaluated)|^Verdict|^(ERROR|WARN) |Could not evaluate' "$OUT/diagnose.txt" | tee -a "$S"
"$BIN" diagnose --format json >"$OUT/diagnose.json" 2>/dev/null
python3 -c "import json; j=json.load(open('$OUT/diagnose.json')); print('layers unreadable:', [l['layer'] for l in j['layers'] if l.get('unreadable')])" | tee -a "$S"
"$BIN" diagnose --kernel-log /proc/self/mem >"$OUT/diagnose-unreadable-log.txt" 2>&1; say "diagnose --kernel-log /proc/self/mem: exit $?"
grep -E '^Verdict|Could not evaluate|kernel_log' "$OUT/diagnose-unreadable-log.txt" | head -5 | tee -a "$S"

OUT=$OUT/agent timeout 300 bash device/agent.sh >"$OUT/agent-console.txt" 2>&1; say "device/agent.sh exit $?"
mkdir -p "$OUT/agent"; cat "$OUT/agent/summary.txt" 2>/dev/null | tee -a "$S"

timeout 150 bash bench/agent_kill9.sh "$BIN" 20 >"$OUT/kill9.txt" 2>&1; say "bench/agent_kill9.sh 20: exit $?"
tee -a "$S" <"$OUT/kill9.txt" | tail -8
DURATION=${SOAK_SECONDS:-90} timeout 200 bash bench/agent_soak.sh "$BIN" >"$OUT/soak.txt" 2>&1; say "bench/agent_soak.sh: exit $?"
tail -25 "$OUT/soak.txt" | tee -a "$S"
