#!/usr/bin/env bash
# `gpudx agent`'s figures (docs/agent.md), in one run, printed as a table:
#   - an Xid 79 line appended to the followed log -> `scontrol update ... state=drain` issued: p50/p99 over
#     EVENTS injected events (the fake scontrol stamps each call; the bench stamps each append);
#   - idle: CPU of the agent (and of its collection children) over IDLE seconds, resident memory;
#   - /v1/status from a warm agent (HTTP, the client in the loop), and `gpudx status` (a process per call),
#     against a one-shot `gpudx diagnose` of the same capture (and `nvidia-smi -q` where it exists);
#   - 10,000 events stored (100 GPUs' Xid findings appearing and clearing) and queried QUERIES times (default
#     25): the agent's RSS before, after the 5th answer and after the last (flat from the 5th on: no growth
#     per answer);
#   - with STANDINS=DIR (the stand-in driver libraries, build/tests/standins/lib): the NVML event watcher
#     (`gpudx nvml-events --wait 1`, as the agent runs it) over the same idle seconds, its CPU.
# On the capture tests/fixtures/h200x1-gathered with the contract's command line (--no-driver).
# usage: [STANDINS=DIR] [QUERIES=N] bench/bench_agent.sh [GPUDX] [EVENTS] [IDLE_SECONDS]
set -euo pipefail
gpudx=$(realpath "${1:-build/gpudx}") events=${2:-100} idle=${3:-60}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gpudx-bench-agent.XXXXXX)
source "$src/tests/agent/lib.sh"
setup_node
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; rm -rf "$work"' EXIT
stamping_scontrol
agent_interval=60 start_agent

pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int(NR*p/100+0.999); if (i<1) i=1; printf "%.1f", a[i]}'; }

# ---- Xid 79 -> drain
: > "$work/latencies"
for ((i = 0; i < events; i++)); do
  t0=$(date +%s%N)
  xid79 >> "$log"
  wait_for "drain $i" 'grep -qs DRAIN "$slurm/state"'
  t1=$(grep 'state=drain' "$work/stamps" | tail -1 | cut -d' ' -f1)
  echo $(( (t1 - t0) / 1000 )) >> "$work/latencies"   # microseconds
  cp "$root/_commands/dmesg.txt" "$log.new" && mv "$log.new" "$log"   # healthy again: resumed
  wait_for "resume $i" 'test "$(cat "$slurm/state")" == IDLE'
done
p50=$(awk '{print $1/1000}' "$work/latencies" | pct 50)
p99=$(awk '{print $1/1000}' "$work/latencies" | pct 99)

# ---- idle
clk=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15+$16+$17}' "/proc/$agent_pid/stat"; }
t_start=$(ticks); s_start=$(date +%s%N)
watcher_cpu=""
if [[ -n ${STANDINS:-} && -x /usr/bin/time ]]; then
  # User and system seconds of the watcher, as wait4 reports them when it ends after IDLE seconds.
  /usr/bin/time -f "%U %S" -o "$work/watcher.time" "$gpudx" nvml-events --root "$root" --driver-lib-dir "$STANDINS" \
    --wait 1 --duration "$idle" >/dev/null 2>&1 || true
  watcher_cpu=$(tail -1 "$work/watcher.time" | awk -v s="$idle" '{printf "%.3f", 100*($1+$2)/s}')
else
  sleep "$idle"
fi
t_end=$(ticks); s_end=$(date +%s%N)
cpu=$(awk -v t=$((t_end - t_start)) -v c="$clk" -v ns=$((s_end - s_start)) 'BEGIN{printf "%.3f", 100*t/c/(ns/1e9)}')
rss_idle=$(awk '/VmRSS/ {print $2}' "/proc/$agent_pid/status")

# ---- status latency
py_status() { python3 - "$url" "$1" <<'EOF'
import http.client, statistics, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1]); n = int(sys.argv[2]); t = []
for _ in range(n):
    s = time.perf_counter(); c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", "/v1/status"); c.getresponse().read(); c.close(); t.append((time.perf_counter() - s) * 1000)
t.sort(); print(f"{t[len(t)//2]:.2f} {t[int(len(t)*0.99)-1]:.2f}")
EOF
}
read -r http_p50 http_p99 < <(py_status 200)
median_ms() {
  local t=() runs=$1; shift
  for ((i = 0; i < runs; i++)); do
    local s=$(date +%s%N); "$@" > /dev/null 2>&1 || true; local e=$(date +%s%N)
    t+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'
}
status_ms=$(median_ms 50 "$gpudx" status --state-dir "$state" --format json)
diagnose_ms=$(median_ms 20 "$gpudx" diagnose --root "$root" --kernel-log "$log" --no-driver --format json)
smi_ms=""
command -v nvidia-smi >/dev/null && smi_ms=$(median_ms 10 nvidia-smi -q)

# ---- 10,000 events
rss_before=$(awk '/VmRSS/ {print $2}' "/proc/$agent_pid/status")
stored_before=$(json_field /v1/status "j['agent']['store']['stored']")
# 100 GPUs' addresses (0000:01:00.0 ... 0000:64:00.0): one Xid finding each, 100 events per change.
burst=$work/burst.txt
: > "$burst"
for ((g = 1; g <= 100; g++)); do
  printf '3,%d,7000000000,-;NVRM: Xid (PCI:0000:%02x:00): 79, pid=1, name=x, GPU has fallen off the bus.\n' $((5000 + g)) "$g" >> "$burst"
done
cycles=0
while (( $(json_field /v1/status "j['agent']['store']['stored']") - stored_before < 10000 )); do
  before=$(kernel_log_diagnoses)
  if (( cycles % 2 == 0 )); then cat "$burst" >> "$log"; else cp "$root/_commands/dmesg.txt" "$log.new"; mv "$log.new" "$log"; fi
  wait_for "burst $cycles" 'test "$(kernel_log_diagnoses)" -gt "$before"'
  cycles=$((cycles + 1))
  (( cycles < 400 )) || break
done
stored=$(( $(json_field /v1/status "j['agent']['store']['stored']") - stored_before ))
q_start=$(date +%s%N)
for ((i = 0; i < 5; i++)); do json_field "/v1/events?limit=100000" "len(j['events'])" > "$work/count"; done
q_ms=$(( ($(date +%s%N) - q_start) / 5000000 ))
rss_after=$(awk '/VmRSS/ {print $2}' "/proc/$agent_pid/status")
queries=${QUERIES:-25}
for ((i = 5; i < queries; i++)); do json_field "/v1/events?limit=100000" "len(j['events'])" > "$work/count"; done
rss_last=$(awk '/VmRSS/ {print $2}' "/proc/$agent_pid/status")
stop_agent

printf '%-58s %12s %10s\n' "what" "value" "ratio"
printf '%-58s %12s %10s\n' "Xid 79 appended -> scontrol drain, p50 (ms, $events events)" "$p50" ""
printf '%-58s %12s %10s\n' "Xid 79 appended -> scontrol drain, p99 (ms)" "$p99" ""
printf '%-58s %12s %10s\n' "idle CPU over ${idle} s (% of one core, children included)" "$cpu" ""
printf '%-58s %12s %10s\n' "idle resident memory (MB)" "$(awk -v k="$rss_idle" 'BEGIN{printf "%.1f", k/1024}')" ""
printf '%-58s %12s %10s\n' "gpudx diagnose --format json, one shot (ms, median)" "$diagnose_ms" "1.00"
printf '%-58s %12s %10.3f\n' "/v1/status from a warm agent, HTTP p50 (ms)" "$http_p50" "$(awk -v a="$http_p50" -v b="$diagnose_ms" 'BEGIN{print a/b}')"
printf '%-58s %12s %10.3f\n' "/v1/status from a warm agent, HTTP p99 (ms)" "$http_p99" "$(awk -v a="$http_p99" -v b="$diagnose_ms" 'BEGIN{print a/b}')"
printf '%-58s %12s %10.3f\n' "gpudx status --format json, process per call (ms, median)" "$status_ms" "$(awk -v a="$status_ms" -v b="$diagnose_ms" 'BEGIN{print a/b}')"
[[ -n $smi_ms ]] && printf '%-58s %12s %10.3f\n' "nvidia-smi -q (ms, median)" "$smi_ms" "$(awk -v a="$smi_ms" -v b="$diagnose_ms" 'BEGIN{print a/b}')"
printf '%-58s %12s %10s\n' "events stored ($cycles changes of 100 findings)" "$stored" ""
printf '%-58s %12s %10s\n' "  /v1/events?limit=100000 answered in (ms, mean of 5)" "$q_ms" ""
printf '%-58s %12s %10s\n' "  resident memory before -> after 5 answers (MB)" "$(awk -v a="$rss_before" -v b="$rss_after" 'BEGIN{printf "%.1f -> %.1f", a/1024, b/1024}')" ""
printf '%-58s %12s %10s\n' "  resident memory after $queries answers (MB)" "$(awk -v b="$rss_last" 'BEGIN{printf "%.1f", b/1024}')" \
  "$(awk -v a="$rss_after" -v b="$rss_last" 'BEGIN{printf "%.3f", b/a}')"
if [[ -n $watcher_cpu ]]; then
  printf '%-58s %12s %10s\n' "NVML watcher (stand-in) CPU over ${idle} s (% of one core)" "$watcher_cpu" ""
fi
