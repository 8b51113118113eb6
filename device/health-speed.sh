#!/usr/bin/env bash
# The GPU-health checks and the speed figures on a live GPU node, in one batched run (issues #31 and #34).
# Carry build-device/ (stripped gpudx, optionally gpudx-before: an older build to compare with, the shim and
# bench/gpudx_gen_kernel_log). Results go under $OUT/r and come back as $OUT/results.tar.gz; summary.txt beside it.
#   1. device/gpu_health.cpp: every health query's answer and time, per GPU; old and new per-GPU call sequences;
#      device/nvml_overlap.cpp: a GPU's health queries from three threads against one after another, NVML's RSS;
#   2. nvidia-smi's own view (the reference for each check), gpudx diagnose -v / JSON, snapshot, ids (text, JSON);
#   3. the sysfs beside the GPUs: AER counters of each GPU and the ports above it, /sys/class/infiniband, the fabric
#      manager's and IMEX's units;
#   4. bench/speed_goals.sh (diagnose_vs_driver, startup_and_explain, agent_api: one table of issue #34's goals),
#      with an older build the before/after figures, then bench/xid_storm_vs_grep.sh;
#   5. the agent on the live node with its NVML watcher for 40 s: verdict, events, the resident memory of the agent
#      and of the watcher;
#   6. gpudx gather of this node.
# Changes nothing on the node: no drain, no reset, no clocks or power; state in a temporary folder.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpudx-health-speed}
R=$OUT/r; mkdir -p "$R"
G=$PWD/build-device/gpudx; B=$PWD/build-device/gpudx-before
# Without an older build the before/after columns are left out (the benches take BEFORE as optional).
[[ -x $B ]] || B=
S=$R/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
step() { say; say "== $*"; }
say "host $(uname -r), $(nproc) CPUs; $(head -1 /proc/driver/nvidia/version 2>/dev/null | sed 's/  */ /g')"
say "$($G --version)"
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version --format=csv | tee -a "$S"

step "1. gpu_health.cpp"
g++ -O2 -std=c++20 -Isrc device/gpu_health.cpp -ldl -o /tmp/gpu_health 2>"$R/gpu_health.build.txt" &&
  timeout 120 /tmp/gpu_health 15 >"$R/gpu_health.txt" 2>&1
say "rc=$?"; tail -25 "$R/gpu_health.txt" | tee -a "$S"

step "1b. nvml_overlap.cpp: the health groups of a GPU in threads; NVML's resident memory"
g++ -O2 -std=c++20 -Isrc device/nvml_overlap.cpp -ldl -pthread -o /tmp/nvml_overlap 2>"$R/nvml_overlap.build.txt" &&
  timeout 120 /tmp/nvml_overlap 15 2>&1 | tee "$R/nvml_overlap.txt" | tee -a "$S"

step "2. nvidia-smi and gpudx outputs"
nvidia-smi -q >"$R/nvidia-smi-q.txt" 2>&1
nvidia-smi nvlink -s >"$R/nvidia-smi-nvlink-s.txt" 2>&1
nvidia-smi nvlink -e >"$R/nvidia-smi-nvlink-e.txt" 2>&1
nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER,ECC,ROW_REMAPPER,PAGE_RETIREMENT >"$R/nvidia-smi-health.txt" 2>&1
sed -n '/Clocks Event Reasons/,/Sparse/p;/Temperature$/,/Memory Max/p;/Power Readings/,/Max Power/p' \
  "$R/nvidia-smi-health.txt" | head -60 | tee -a "$S"
$G diagnose -v >"$R/diagnose-v.txt" 2>&1; say "diagnose -v rc=$?"; grep -iE "verdict|health|nvlink|warn|error" "$R/diagnose-v.txt" | head -30 | tee -a "$S"
$G diagnose --format json >"$R/diagnose.json" 2>"$R/diagnose.err"; say "diagnose json rc=$?"
$G snapshot -o "$R/snapshot.json" 2>"$R/snapshot.err"; say "snapshot rc=$?"
GPUDX_PROBE_TRACE=1 $G snapshot --no-cuda -o "$R/snapshot-trace.json" 2>"$R/probe-trace.txt"
$G ids >"$R/ids.txt" 2>&1; say "ids rc=$?"; cat "$R/ids.txt" | tee -a "$S"
$G ids --format json >"$R/ids.json" 2>&1
python3 - "$R/snapshot.json" "$R/diagnose.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
s = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]))
print("collectors:", ", ".join(f"{c['name']}={c['state']} {c.get('duration_ms', 0):.1f} ms" for c in s["collectors"]))
for key in ("health", "gpu_health"):
    for where in (s, s.get("nvml", {})):
        if key in where:
            print(key, json.dumps(where[key])[:3000])
print("findings:", [(f["id"], f["severity"]) for f in d.get("findings", []) if f["severity"] != "info"])
print("info:", sorted({f["id"] for f in d.get("findings", []) if f["severity"] == "info"}))
PY

step "2b. text outputs, the node class and the baseline"
$G snapshot --format text >"$R/snapshot.txt" 2>&1; say "snapshot --format text rc=$?"
grep -iE "nvlink|health|temp|aer|infiniband" "$R/snapshot.txt" | head -12 | tee -a "$S"
grep -iE "nvlink|temp|power|aer" "$R/diagnose-v.txt" | head -8 | tee -a "$S"
# The class matches whatever model this node has, so the expectation is what is judged.
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
for expect in 0 18; do
  printf 'schema_version = 1\n[[class]]\nname = "one-gpu-vm"\nowner = "ops@example.com"\nreview_by = 2099-01-01\n[class.match]\ngpu_model = "%s"\n[class.expect]\nnvlinks_active = %d\n' "$model" "$expect" >"$R/matrix-$expect.toml"
  $G diagnose --no-cuda --matrix "$R/matrix-$expect.toml" --format json >"$R/diagnose-matrix-$expect.json" 2>&1
  say "diagnose --matrix (nvlinks_active = $expect) rc=$?: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print([(f['id'], f['severity'], f['message'][:120]) for f in d['findings'] if f['id'].startswith(('matrix', 'health', 'baseline'))])" "$R/diagnose-matrix-$expect.json")"
done
$G baseline save "$R/node.json" >/dev/null 2>&1; say "baseline save rc=$?"
$G diagnose --no-cuda --baseline "$R/node.json" >"$R/diagnose-baseline.txt" 2>&1; say "diagnose --baseline (same node) rc=$?"

step "3. sysfs beside the GPUs"
for bdf in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do
  bdf=${bdf: -12}; bdf=${bdf,,}  # 00000000:00:06.0 -> 0000:00:06.0, as sysfs names it
  dev=$(readlink -f "/sys/bus/pci/devices/$bdf")
  say "GPU $bdf: $dev"
  p=$dev
  while [[ $p == /sys/devices/pci* ]]; do
    for f in aer_dev_correctable aer_dev_nonfatal aer_dev_fatal aer_rootport_total_err_cor; do
      [[ -r $p/$f ]] && { echo "--- $p/$f"; cat "$p/$f"; }
    done
    echo "--- $p: link $(cat $p/current_link_speed 2>/dev/null) x$(cat $p/current_link_width 2>/dev/null)"
    p=$(dirname "$p")
  done >>"$R/aer.txt" 2>&1
done
grep -c -- "---" "$R/aer.txt" | sed 's/^/aer.txt entries: /' | tee -a "$S"
ls -la /sys/class/infiniband/ >"$R/infiniband.txt" 2>&1; say "infiniband: $(ls /sys/class/infiniband 2>&1 | head -3)"
systemctl show nvidia-fabricmanager nvidia-imex -p LoadState,ActiveState,SubState,Result >"$R/services.txt" 2>&1
cat "$R/services.txt" | tee -a "$S"

step "4. speed: every goal of issue #34 in one table (bench/speed_goals.sh), then the Xid storm"
RUNS=15 bash bench/speed_goals.sh build-device 2>&1 | tee "$R/speed_goals.txt" | tee -a "$S"
if [[ -n $B ]]; then
  BEFORE=$B bash bench/diagnose_vs_driver.sh "$G" 15 >"$R/diagnose_vs_driver-before.txt" 2>&1
  GPUDX=$B bash bench/startup_and_explain.sh build-device 11 1000000 >"$R/startup_and_explain-before.txt" 2>&1
fi
bash bench/xid_storm_vs_grep.sh build-device 1000000 2>&1 | tail -8 | tee "$R/xid_storm.txt" | tee -a "$S"

step "5. the agent with its NVML watcher, 40 s"
W=$(mktemp -d /tmp/gpudx-agent.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
$G agent --state-dir "$W/state" --listen 127.0.0.1:$PORT --interval 10 2>"$R/agent.err" &
A=$!
sleep 40
curl -s "http://127.0.0.1:$PORT/v1/status" >"$R/agent-status.json"
curl -s "http://127.0.0.1:$PORT/v1/events?limit=1000" >"$R/agent-events.json"
curl -s "http://127.0.0.1:$PORT/metrics" >"$R/agent-metrics.txt"
rss() { awk '/VmRSS/ {printf "%.1f MB", $2/1024}' /proc/$1/status 2>/dev/null; }
say "agent pid $A RSS $(rss $A)"
for c in $(pgrep -P $A); do say "  child $c ($(tr '\0' ' ' </proc/$c/cmdline | cut -c1-60)) RSS $(rss $c)"; done
python3 - "$R/agent-status.json" "$R/agent-events.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
s = json.load(open(sys.argv[1]))
print("verdict", s.get("verdict"), "findings", [(f["id"], f["severity"]) for f in s.get("findings", []) if f["severity"] != "info"])
print("agent:", json.dumps(s.get("agent", {}))[:800])
e = json.load(open(sys.argv[2])); ev = e if isinstance(e, list) else e.get("events", [])
print("events:", len(ev), [(x.get("source"), x.get("kind") or x.get("type"), x.get("id")) for x in ev][:10])
PY
kill -TERM $A; wait $A; say "agent SIGTERM exit $?"

step "6. gather"
$G gather "$OUT/gather.tar.gz" >"$R/gather.txt" 2>&1; say "gather rc=$?"; ls -la "$OUT/gather.tar.gz" | tee -a "$S"
cp "$S" "$OUT/summary.txt"
tar -C "$OUT" -czf "$OUT/results.tar.gz" r
