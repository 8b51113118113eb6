#!/usr/bin/env bash
# The agent's /metrics (the names of `diagnose --format prom` and the agent's own) accepted by promtool.
# Label integration: skipped without promtool, required under make test-integration.
set -euo pipefail
gpudx=$1 src=$2 work=$3
source "$src/tests/agent/lib.sh"
require_cmd promtool
setup_node
trap '[[ -n ${agent_pid:-} ]] && kill -KILL "$agent_pid" 2>/dev/null; true' EXIT
start_agent
xid79 >> "$log"
wait_for "the drain" 'grep -qs DRAIN "$slurm/state"'
python3 -c "import sys,urllib.request; sys.stdout.write(urllib.request.urlopen('$url/metrics').read().decode())" > "$work/metrics.txt"
grep -q '^gpudx_finding{' "$work/metrics.txt" || fail "no gpudx_finding series"
grep -q '^gpudx_agent_events_total{kind="drained"} 1' "$work/metrics.txt" || fail "no drained event counted"
promtool check metrics < "$work/metrics.txt" || fail "promtool rejects /metrics: $(promtool check metrics < "$work/metrics.txt" 2>&1 | head)"
stop_agent
echo PASS
