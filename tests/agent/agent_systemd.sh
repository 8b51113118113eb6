#!/usr/bin/env bash
# systemd's side of `gpudx agent` (Type=notify, WatchdogSec) without systemd: a datagram socket stands in for
# $NOTIFY_SOCKET and reads what the agent sends: READY=1 once it serves, WATCHDOG=1 again and again at half of
# $WATCHDOG_USEC, STOPPING=1 on SIGTERM, then exit 0.
set -euo pipefail
gpudx=$1 src=$2 work=$3
source "$src/tests/agent/lib.sh"
setup_node
python3 - "$gpudx" "$root" "$log" "$port" "$state" "$work" <<'PY' || fail "notify protocol"
import os, signal, socket, subprocess, sys, time
gpudx, root, log, port, state, work = sys.argv[1:]
path = os.path.join(work, "notify.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(60)  # a safety net: every wait below is for a message
env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000")
agent = subprocess.Popen([gpudx, "agent", "--root", root, "--kernel-log", log, "--listen", "127.0.0.1:" + port,
                          "--state-dir", state, "--no-driver", "--interval", "3600"], env=env,
                         stderr=open(os.path.join(work, "agent.err"), "a"))
def next_message():
    return s.recv(4096).decode()
first = next_message()
assert first.startswith("READY=1"), first
assert "STATUS=serving" in first, first
pings = 0
while pings < 3:
    m = next_message()
    assert m == "WATCHDOG=1", m
    pings += 1
agent.send_signal(signal.SIGTERM)
while True:
    m = next_message()
    if m == "STOPPING=1":
        break
    assert m == "WATCHDOG=1", m
rc = agent.wait(timeout=60)
assert rc == 0, rc
print(f"READY=1, {pings} WATCHDOG=1, STOPPING=1, exit {rc}")
PY
echo PASS
