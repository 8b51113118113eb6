#!/usr/bin/env bash
# device/agent_smoke.sh (run from the repository root with the binary as build-device/gpudx, $OUT set): the
# agent on a real GPU node: first diagnosis, /v1/status, /metrics, a restart that records nothing again.
set -u
G=$PWD/build-device/gpudx
st=$(mktemp -d); port=19876; url=http://127.0.0.1:$port
start() { $G agent --listen 127.0.0.1:$port --state-dir "$st" --interval 3600 2>>"$OUT/agent.err" & pid=$!; for i in $(seq 100); do curl -sf "$url/v1/status" >/dev/null && break; sleep 0.1; done; }
count() { python3 -c "import sqlite3; db=sqlite3.connect('$st/events.db'); print(db.execute(\"select count(*) from events where kind in ('appeared','changed','drained')\").fetchone()[0], db.execute(\"select count(*) from open_findings\").fetchone()[0] if db.execute(\"select count(*) from sqlite_master where name='open_findings'\").fetchone()[0] else 'no-table')"; }
start
sleep 3
curl -s "$url/v1/status" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("verdict", j.get("verdict"), "exit", j.get("exit_code"), "findings", len(j.get("findings", [])), "trigger", j["agent"]["last_diagnosis"]["trigger"])' > "$OUT/smoke.txt" 2>&1
curl -s "$url/metrics" > "$OUT/metrics.txt"
for i in 1 2 3 4 5; do curl -s -o /dev/null -w "%{time_total}\n" "$url/metrics"; done >> "$OUT/smoke.txt"
echo "events, open rows: $(count)" >> "$OUT/smoke.txt"
grep -E 'VmHWM|VmRSS' /proc/$pid/status >> "$OUT/smoke.txt"
kill -TERM $pid; wait $pid; echo "exit on TERM $?" >> "$OUT/smoke.txt"
before=$(count)
start; sleep 3
echo "after restart: $(count) (before: $before)" >> "$OUT/smoke.txt"
kill -TERM $pid; wait $pid; echo "exit on TERM $?" >> "$OUT/smoke.txt"
grep -c '^gpudx_finding{' "$OUT/metrics.txt" >> "$OUT/smoke.txt"
cat "$OUT/smoke.txt"; tail -5 "$OUT/agent.err"
