#!/usr/bin/env bash
# NVML's events on the live 1-GPU node (results under $OUT, summary.txt first):
#   1. `gpudx nvml-events --types all` for 20 s while `gpudx accept` runs kernels and copies in the middle:
#      which event types the H200 supports, and the P-state/clock events a workload causes (real events through
#      the whole path: registration, nvmlEventSetWait_v2, the lines);
#   2. `gpudx nvml-events` (the health mask the agent uses) for 3 s: what it registers, and nothing but "alive"
#      lines on a healthy GPU;
#   3. `gpudx agent` for about 40 s (interval 30 s): the watcher registered (its note), no nvml event and no finding on
#      a healthy GPU, the agent's CPU time with the watcher's one wake-up a second, and the child's line rate.
# Changes nothing on the node (reads NVML; accept only runs its kernels; no drain).
set -u
OUT=${OUT:-/tmp/gpudx-nvml-events-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=$(pwd)/build-device/gpudx
[[ -x $BIN ]] || BIN=$(pwd)/build/gpudx
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version,pstate --format=csv | tee -a "$S"

# 1. Every type, with a workload in the middle.
"$BIN" nvml-events --types all --duration 20 >"$OUT/all.jsonl" 2>"$OUT/all.err" &
W=$!
sleep 3
# The workload only has to run (its verdict is not the point here): cut at 12 s.
timeout 12 "$BIN" accept --format json -o "$OUT/accept.json" >"$OUT/accept.txt" 2>&1
say "accept (cut at 12 s) rc=$?"
wait $W; say "nvml-events --types all rc=$?"
python3 - "$OUT/all.jsonl" <<'PY' | tee -a "$S"
import json, sys, collections
lines = [json.loads(l) for l in open(sys.argv[1])]
kinds = collections.Counter(l["line"] for l in lines)
print("lines by kind:", dict(kinds))
for l in lines:
    if l["line"] == "ready":
        for d in l["devices"]:
            print(f"  {d['uuid']} {d['pci']}: supported {d['supported']}; registered {d['registered']}")
ev = collections.Counter((l["type"], l["data"]) for l in lines if l["line"] == "event")
print("events (type, data):", dict(ev))
firsts = [l for l in lines if l["line"] == "event"][:3]
for l in firsts: print("  e.g.", json.dumps(l))
PY

# 2. The health mask.
"$BIN" nvml-events --duration 3 >"$OUT/health.jsonl" 2>&1; say "nvml-events (health) rc=$?"
python3 - "$OUT/health.jsonl" <<'PY' | tee -a "$S"
import json, sys, collections
lines = [json.loads(l) for l in open(sys.argv[1])]
print("health: lines by kind:", dict(collections.Counter(l["line"] for l in lines)))
for l in lines:
    if l["line"] == "ready":
        for d in l["devices"]: print(f"  registered {d['registered']}")
PY

# 3. The agent with its watcher.
WORK=$(mktemp -d /tmp/gpudx-nvml-agent.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
"$BIN" agent --state-dir "$WORK/state" --listen "127.0.0.1:$PORT" --interval 30 2>"$OUT/agent.err" &
A=$!
get() { python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$PORT$1', timeout=30).read().decode())"; }
for ((i = 0; i < 300; i++)); do get /v1/status >"$OUT/status-start.json" 2>/dev/null && break; sleep 0.2; done
sleep 2
clk=$(getconf CLK_TCK)
t0=$(awk '{print $14+$15+$16+$17}' /proc/$A/stat); w0=$(date +%s%N)
sleep 20
t1=$(awk '{print $14+$15+$16+$17}' /proc/$A/stat); w1=$(date +%s%N)
get /v1/status >"$OUT/status-end.json"; get /v1/events >"$OUT/events.json"; get /metrics >"$OUT/metrics.txt"
python3 - "$OUT/status-end.json" "$OUT/events.json" <<'PY' | tee -a "$S"
import json, sys
s = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))["events"]
print("verdict:", s["verdict"], "; non-info findings:", [(f["id"], f["severity"]) for f in s["findings"] if f["severity"] != "info"])
print("agent nvml_events:", s["agent"]["nvml_events"], "; last diagnosis:", s["agent"]["last_diagnosis"])
print("notes:", [n["message"] for n in s["agent"]["notes"]])
print("events by kind:", {k: sum(1 for x in e if x["kind"] == k) for k in sorted({x["kind"] for x in e})})
PY
say "agent CPU over 20 s (itself and reaped children: collections every 30 s): $(( t1 - t0 )) ticks of $clk/s = $(python3 -c "print(f'{($t1-$t0)/$clk/(($w1-$w0)/1e9)*100:.3f} % of one core')")"
C=$(pgrep -P $A -f nvml-events | head -1)
[[ -n $C ]] && say "watcher child pid $C: CPU $(awk '{print $14+$15}' /proc/$C/stat) ticks since it started ($(ps -o etimes= -p $C) s), RSS $(awk '/VmRSS/{print $2" kB"}' /proc/$C/status)"
say "agent RSS $(awk '/VmRSS/{print $2" kB"}' /proc/$A/status)"
kill -TERM $A; wait $A; say "agent SIGTERM rc=$?"
rm -rf "$WORK"
