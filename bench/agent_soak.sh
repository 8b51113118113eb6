#!/usr/bin/env bash
# `gpudx agent` under clients that try to blind it (issue 28), for DURATION seconds (default 600):
#   - CLIENTS (default 500) hostile clients, half on the TCP listener and half on the unix socket; of each half,
#     half send a request head that never ends (a byte every 500 ms) and half connect and say nothing. One that
#     the agent closes connects again a second later, for the whole run;
#   - an Xid 79 line appended to the followed kernel log every XID_EVERY seconds (default 5); the node is made
#     healthy again after each drain (the log rotated to the capture's clean one) so each Xid drains anew;
#   - /metrics scraped once a second on each listener, each answer timed (10 s at most).
# Reports, per Xid, the time from its append to the drain call the fake scontrol stamps; the scrapes' times and
# failures; the agent's descriptors, resident memory and CPU. Not a ctest test: a figure for docs/agent.md.
# On the capture tests/fixtures/h200x1-gathered with the contract's command line (tests/agent/lib.sh).
# usage: [DURATION=S] [CLIENTS=N] [XID_EVERY=S] bench/agent_soak.sh [GPUDX]
set -euo pipefail
gpudx=$(realpath "${1:-build/gpudx}")
duration=${DURATION:-600} clients=${CLIENTS:-500} xid_every=${XID_EVERY:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gpudx-agent-soak.XXXXXX)
source "$src/tests/agent/lib.sh"
setup_node
clients_pid='' scraper_pid=''
# Every process this script starts is stopped by its PID.
cleanup() {
  local pid
  for pid in "$clients_pid" "$scraper_pid" "${agent_pid:-}"; do
    if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
stamping_scontrol
agent_interval=60 start_agent
socket=$state/agent.sock

# ---- the hostile clients: one process, non-blocking sockets in a selector.
cat > "$work/clients.py" <<'EOF'
import os, selectors, signal, socket, sys, time
port, path, count, report = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
sel = selectors.DefaultSelector()
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
class Client:
    def __init__(self, n):
        self.unix, self.slow = n % 2 == 1, (n // 2) % 2 == 1
        self.sock, self.retry_at, self.next_byte = None, 0.0, 0.0
clients = [Client(n) for n in range(count)]
connects = closed_by_agent = refused = 0
def connect(c, now):
    global connects, refused
    s = socket.socket(socket.AF_UNIX if c.unix else socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.connect(path if c.unix else ("127.0.0.1", port))
    except OSError:
        refused += 1
        s.close()
        c.retry_at = now + 1
        return
    s.setblocking(False)
    connects += 1
    c.sock = s
    sel.register(s, selectors.EVENT_READ, c)
    if c.slow:
        try:
            s.send(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        except OSError:
            pass
        c.next_byte = now + 0.5
def drop(c, now):
    sel.unregister(c.sock)
    c.sock.close()
    c.sock = None
    c.retry_at = now + 1  # an attacker that comes back, a second later
while not stop:
    now = time.monotonic()
    for c in clients:
        if c.sock is None and now >= c.retry_at:
            connect(c, now)
        elif c.sock is not None and c.slow and now >= c.next_byte:
            try:
                c.sock.send(b"x")
            except OSError:
                closed_by_agent += 1
                drop(c, now)
                continue
            c.next_byte = now + 0.5
    for key, _ in sel.select(timeout=0.1):
        c = key.data
        try:
            data = c.sock.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data or data.startswith(b"HTTP/1.1 408"):
            closed_by_agent += 1
            drop(c, time.monotonic())
with open(report, "w") as f:
    f.write(f"{connects} {closed_by_agent} {refused}\n")
EOF

# ---- the scraper: /metrics once a second on each listener, each answer timed.
cat > "$work/scraper.py" <<'EOF'
import http.client, signal, socket, sys, time
port, path, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(path)
with open(out, "w", buffering=1) as f:
    while not stop:
        for where in ("tcp", "unix"):
            conn = (http.client.HTTPConnection("127.0.0.1", port, timeout=10) if where == "tcp"
                    else UnixConnection("localhost", timeout=10))
            t0 = time.monotonic()
            try:
                conn.request("GET", "/metrics")
                r = conn.getresponse()
                body = r.read()
                ok = r.status == 200 and b"gpudx_agent_diagnoses_total" in body
            except OSError:
                ok = False
            f.write(f"{time.time():.3f} {where} {int(ok)} {1000 * (time.monotonic() - t0):.2f}\n")
            conn.close()
        time.sleep(1)
EOF

python3 "$work/clients.py" "$port" "$socket" "$clients" "$work/clients.report" &
clients_pid=$!
python3 "$work/scraper.py" "$port" "$socket" "$work/scrapes" &
scraper_pid=$!

# The agent's descriptors, resident memory (kB) and CPU ticks, once a second.
sample() {
  echo "$(ls "/proc/$agent_pid/fd" | wc -l) $(awk '/^VmRSS/ {print $2}' "/proc/$agent_pid/status")" >> "$work/samples"
}
ticks() { awk '{print $14+$15}' "/proc/$agent_pid/stat"; }
drain_stamps() { cat "$work/stamps" 2>/dev/null | grep -c 'state=drain' || true; }
sleep 2  # the clients connected
t_start=$(ticks) s_start=$(date +%s.%N)
: > "$work/latencies"
end=$((SECONDS + duration))
xids=0
while ((SECONDS < end)); do
  t0=$(date +%s%N)
  xid79 >> "$log"
  # shellcheck disable=SC2034  # read by the condition wait_for evaluates
  drains=$(drain_stamps)
  wait_for "drain $xids" 'test "$(drain_stamps)" -gt "$drains"'
  t1=$(grep 'state=drain' "$work/stamps" | tail -1 | cut -d' ' -f1)
  echo $(( (t1 - t0) / 1000 )) >> "$work/latencies"   # microseconds
  xids=$((xids + 1))
  cp "$root/_commands/dmesg.txt" "$log.new" && mv "$log.new" "$log"   # healthy again: resumed
  # (The stamp comes before the fake scontrol writes the state: it may not be there yet.)
  wait_for "resume $xids" 'test "$(cat "$slurm/state" 2>/dev/null)" == IDLE'
  next=$((SECONDS + xid_every))
  while ((SECONDS < next && SECONDS < end)); do sample; sleep 1; done
done
t_end=$(ticks) s_end=$(date +%s.%N)
kill -TERM "$clients_pid" "$scraper_pid"
wait "$clients_pid" "$scraper_pid" || true
clients_pid='' scraper_pid=''
read -r connects closed refused < "$work/clients.report"
stop_agent

clk=$(getconf CLK_TCK)
elapsed=$(awk -v a="$s_start" -v b="$s_end" 'BEGIN {print b - a}')
python3 - "$work" "$duration" "$clients" "$xids" "$connects" "$closed" "$refused" "$((t_end - t_start))" "$clk" \
  "$elapsed" <<'EOF'
import sys
work, duration, clients, xids, connects, closed, refused, ticks, clk, elapsed = sys.argv[1:]
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(len(v) * p / 100 + 0.999) - 1))] if v else float("nan")
lat = [int(l) / 1000 for l in open(f"{work}/latencies")]
print(f"gpudx agent soak: {duration} s, {clients} hostile clients (half slow, half idle; half TCP, half unix socket)")
print(f"  clients: {connects} connections made, {closed} closed by the agent, {refused} refused")
print(f"  Xid 79 appended -> scontrol drain, {len(lat)} Xids: p50 {pct(lat, 50):.1f} ms, p90 {pct(lat, 90):.1f} ms, "
      f"p99 {pct(lat, 99):.1f} ms, max {max(lat):.1f} ms")
print("  per Xid (ms): " + " ".join(f"{x:.1f}" for x in lat))
for where in ("tcp", "unix"):
    rows = [l.split() for l in open(f"{work}/scrapes") if l.split()[1] == where]
    ok = [float(r[3]) for r in rows if r[2] == "1"]
    failed = len(rows) - len(ok)
    print(f"  /metrics over {where}: {len(rows)} scrapes, {failed} failed; p50 {pct(ok, 50):.2f} ms, "
          f"p99 {pct(ok, 99):.2f} ms, max {max(ok) if ok else float('nan'):.2f} ms")
samples = [l.split() for l in open(f"{work}/samples")]
fds = [int(s[0]) for s in samples]
rss = [int(s[1]) / 1024 for s in samples]
print(f"  agent descriptors: max {max(fds)}, last {fds[-1]}; resident memory: first {rss[0]:.1f} MB, "
      f"max {max(rss):.1f} MB, last {rss[-1]:.1f} MB")
cpu = 100 * int(ticks) / int(clk) / float(elapsed)
print(f"  agent CPU (its own threads, not its children): {cpu:.1f} % of one core")
EOF
