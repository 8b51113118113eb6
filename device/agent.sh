#!/usr/bin/env bash
# `gpudx agent` on the live 1-GPU node for about 3 minutes (results under $OUT, summary.txt first):
#   - the agent on / with the real driver (NVML and CUDA in its collection child every 30 s) and /dev/kmsg
#     followed; its /v1/status, /metrics and /v1/events at start and at the end, its stderr;
#   - one harmless line written to /dev/kmsg (when writable: root) to show the follow sees kernel records
#     as they come (lines_read goes up; the line matches nothing, so no finding and no event);
#   - idle CPU (agent and its children) and resident memory over the run;
#   - /v1/status (HTTP) and `gpudx status` latency from the warm agent, next to `nvidia-smi -q` and a one-shot
#     `gpudx diagnose` in the same run;
#   - SIGTERM: exit code and how long the stop took;
#   - bench/bench_agent.sh (the capture with a followed file: Xid 79 -> drain latency over 100 events).
# Needs build-device/gpudx (device/run-all.sh builds it). Changes nothing on the node: no drain (no --drain),
# the state in a temporary folder.
set -u
OUT=${OUT:-/tmp/gpudx-agent-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN=$ROOT/build-device/gpudx
[[ -x $BIN ]] || BIN=$ROOT/build/gpudx
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
WORK=$(mktemp -d /tmp/gpudx-agent.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
URL=http://127.0.0.1:$PORT
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version --format=csv | tee -a "$S"
say "agent: $BIN, port $PORT, state $WORK/state, user $(id -un)"

get() { python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen('$URL$1', timeout=30).read().decode())"; }
field() { python3 -c "import json,sys; j=json.load(open('$1')); print(eval(sys.argv[1]))" "$2"; }

"$BIN" agent --state-dir "$WORK/state" --listen "127.0.0.1:$PORT" --interval 30 2>"$OUT/agent.err" &
PID=$!
t_start=$(date +%s%N)
for ((i = 0; i < 600; i++)); do
  get /v1/status >"$OUT/status-start.json" 2>/dev/null && break
  kill -0 $PID 2>/dev/null || { say "the agent exited: $(tail -5 "$OUT/agent.err")"; exit 1; }
  sleep 0.2
done
say "first diagnosis served after $(( ($(date +%s%N) - t_start) / 1000000 )) ms"
say "verdict at start: $(field "$OUT/status-start.json" "j['verdict']"), findings: $(field "$OUT/status-start.json" "[(f['id'], f['severity']) for f in j['findings'] if f['severity'] != 'info']")"
say "driver collectors: $(field "$OUT/status-start.json" "[(c['name'], c['state'], round(c.get('duration_ms', 0))) for c in j['snapshot']['collectors'] if c['name'] in ('nvml', 'cuda')]" 2>/dev/null || echo '?')"
get /metrics >"$OUT/metrics-start.txt"
clk=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15+$16+$17}' "/proc/$PID/stat"; }
t0=$(ticks); w0=$(date +%s%N)

# A harmless kernel record, to show the follow (root only).
read0=$(field "$OUT/status-start.json" "j['agent']['kernel_log']['lines_read']")
if [[ -w /dev/kmsg ]]; then
  echo "gpudx agent device test: kmsg follow check (not an error)" > /dev/kmsg
  sleep 1
  get /v1/status >"$OUT/status-kmsg.json"
  say "kmsg follow: lines_read $read0 -> $(field "$OUT/status-kmsg.json" "j['agent']['kernel_log']['lines_read']"), matched $(field "$OUT/status-kmsg.json" "j['agent']['kernel_log']['lines_matched']")"
else
  say "kmsg follow: /dev/kmsg not writable here; no record injected"
fi

# Latencies from the warm agent, side by side.
python3 - "$URL" >"$OUT/latency.txt" <<'EOF'
import http.client, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); t = []
for _ in range(200):
    s = time.perf_counter(); c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", "/v1/status"); c.getresponse().read(); c.close(); t.append((time.perf_counter() - s) * 1000)
t.sort(); print(f"/v1/status HTTP: p50 {t[100]:.2f} ms, p99 {t[197]:.2f} ms")
EOF
cat "$OUT/latency.txt" | tee -a "$S"
median_ms() {
  local t=() runs=$1; shift
  for ((i = 0; i < runs; i++)); do
    local s=$(date +%s%N); "$@" >/dev/null 2>&1; local e=$(date +%s%N); t+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'
}
say "gpudx status --format json (process per call): median $(median_ms 30 "$BIN" status --state-dir "$WORK/state" --format json) ms"
say "nvidia-smi -q: median $(median_ms 5 nvidia-smi -q) ms"
say "gpudx diagnose --no-cuda (one shot): median $(median_ms 5 "$BIN" diagnose --no-cuda) ms"
say "gpudx diagnose (one shot, CUDA too): median $(median_ms 3 "$BIN" diagnose) ms"

# The rest of ~3 minutes idle, then the figures.
elapsed=$(( ($(date +%s%N) - t_start) / 1000000000 ))
sleep $(( elapsed < 170 ? 170 - elapsed : 1 ))
t1=$(ticks); w1=$(date +%s%N)
say "CPU (agent + children, includes the 30 s collections and the latency runs' answers): $(awk -v t=$((t1 - t0)) -v c="$clk" -v ns=$((w1 - w0)) 'BEGIN{printf "%.3f", 100*t/c/(ns/1e9)}') % of one core over $(( (w1 - w0) / 1000000000 )) s"
say "resident memory: $(awk '/VmRSS/ {print $2/1024 " MB"}' "/proc/$PID/status"), peak $(awk '/VmHWM/ {print $2/1024 " MB"}' "/proc/$PID/status"), threads $(awk '/Threads/ {print $2}' "/proc/$PID/status")"
get /v1/status >"$OUT/status-end.json"
get /metrics >"$OUT/metrics-end.txt"
get "/v1/events?limit=100000" >"$OUT/events.json"
say "diagnoses: $(grep '^gpudx_agent_diagnoses_total' "$OUT/metrics-end.txt" | tr '\n' ' ')"
say "events: $(field "$OUT/events.json" "[(e['kind'], e['finding'], e['message'][:80]) for e in j['events']]")"
say "kmsg records lost: $(field "$OUT/status-end.json" "j['agent']['kernel_log']['kmsg_records_lost']")"
if command -v promtool >/dev/null; then promtool check metrics <"$OUT/metrics-end.txt" >"$OUT/promtool.txt" 2>&1; say "promtool check metrics: exit $?"; fi

s=$(date +%s%N); kill -TERM $PID; wait $PID; rc=$?
say "SIGTERM: exit $rc after $(( ($(date +%s%N) - s) / 1000000 )) ms"

# The capture-based figures (followed file, fake scontrol), on this machine's CPU.
bash bench/bench_agent.sh "$BIN" 100 30 >"$OUT/bench_agent.txt" 2>&1; say "bench/bench_agent.sh exit $?"
cat "$OUT/bench_agent.txt" | tee -a "$S"
rm -rf "$WORK"
