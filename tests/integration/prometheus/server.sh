#!/usr/bin/env bash
# The fleet in a real Prometheus server (issue: "agents scraped, rules evaluated, alerts fired").
#
# Four `gpudx agent`s, each on a capture of a different node, each with its own port, state folder and
# followed kernel log, all held to examples/matrix.toml and to the healthy node's record:
#   healthy   tests/fixtures/h200x2-gathered as gathered
#   xid       the same node; an Xid 79 line is appended to its kernel log while Prometheus watches
#   offdriver the same node after a clean driver upgrade to a version its class did not test
#   missing   the same node with its second GPU (0000:00:07.0) gone from PCIe, procfs and /dev
# A real `prometheus` (Debian's package) scrapes them with deploy/prometheus/prometheus.yml, changed only in
# its targets and its intervals, and evaluates deploy/prometheus/gpudx-rules.yml with its group intervals
# and `for:` durations read as seconds instead of minutes (time runs 60 times faster; every expression is as
# shipped). Through Prometheus' HTTP API the test asks what an operator would: nodes per class, nodes
# conforming, the node off its tested set, the missing UUID, the Xid alert within one evaluation of the line,
# the agent-down alert while an agent does not answer and its clearing when it answers again, and the series
# each node costs.
#
# Every process it starts is recorded by PID and stopped by that PID on exit.
# Usage: server.sh GPUDX SOURCE_DIR WORK_DIR. Exit 77 (skip) without the packages unless
# GPUDX_REQUIRE_INTEGRATION=1. Prints the figures (series per node, seconds from the line to the alert).
set -euo pipefail
gpudx=$(realpath "$1") src=$(realpath "$2") work=$3
source "$src/tests/integration/lib.sh"
require_cmd prometheus promtool python3 curl
prometheus_bin=$(PATH="$PATH:/usr/sbin:/sbin" command -v prometheus)

rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")
pids=()
cleanup() {
  local rc=$? pid
  for pid in "${pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $rc != 0 ]]; then
    for log in "$work"/*.log; do [[ -f $log ]] && { echo "--- $log"; tail -n 20 "$log"; } >&2; done
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- The nodes ------------------------------------------------------------------------------------------
fixture=$src/tests/fixtures/h200x2-gathered
missing_uuid=GPU-4c880f92-0c23-d49e-b569-e6d4768be474
mkdir -p "$work/trees"
cp -a "$fixture" "$work/trees/offdriver" && chmod -R u+w "$work/trees/offdriver"
python3 "$src/tests/integration/prometheus/driver-upgraded.py" "$work/trees/offdriver" 580.159.04 580.95.05
build_scenario "$fixture" "$src/tests/scenarios/gpu-missing" "$work/trees/missing"
"$gpudx" baseline save "$work/node.json" --root "$fixture" --no-driver > /dev/null

declare -A root port
root[healthy]=$fixture root[xid]=$fixture
root[offdriver]=$work/trees/offdriver root[missing]=$work/trees/missing
nodes=(healthy xid offdriver missing)

start_agent() {  # start_agent NODE: in the background, its PID recorded in agent_pid[NODE]
  local node=$1
  "$gpudx" agent --root "${root[$node]}" --kernel-log "$work/$node.kern.log" --no-driver --no-socket \
    --listen "127.0.0.1:${port[$node]}" --state-dir "$work/state-$node" --interval 60 \
    --matrix "$src/examples/matrix.toml" --baseline "$work/node.json" >> "$work/agent-$node.log" 2>&1 &
  agent_pid[$node]=$!
  pids+=("$!")
}
declare -A agent_pid
targets=""
for node in "${nodes[@]}"; do
  port[$node]=$(free_port)
  : > "$work/$node.kern.log"
  start_agent "$node"
  targets+="${targets:+, }\"127.0.0.1:${port[$node]}\""
done
for node in "${nodes[@]}"; do
  wait_for 30 curl -sf "http://127.0.0.1:${port[$node]}/metrics" ||
    fail "agent $node did not serve /metrics on port ${port[$node]}"
done
echo "[{\"targets\": [$targets]}]" > "$work/gpudx-targets.json"

# --- Prometheus, configured as shipped but for targets and intervals -------------------------------------
python3 - "$src/deploy/prometheus" "$work" <<'EOF'
import re, sys
deploy, work = sys.argv[1], sys.argv[2]

def replace(text, old, new, count):
    found = text.count(old)
    if found != count:
        sys.exit(f"deploy/prometheus changed: expected {count} of {old!r}, found {found}; adapt server.sh")
    return text.replace(old, new)

config = open(f"{deploy}/prometheus.yml").read()
config = replace(config, "scrape_interval: 60s", "scrape_interval: 1s", 1)
config = replace(config, "evaluation_interval: 60s", "evaluation_interval: 1s", 1)
config = replace(config, "scrape_interval: 30s", "scrape_interval: 1s", 1)
config = replace(config, "scrape_timeout: 10s", "scrape_timeout: 900ms", 1)
config = replace(config, "/etc/prometheus/gpudx-targets/*.json", f"{work}/gpudx-targets.json", 1)
config = replace(config, "refresh_interval: 5m", "refresh_interval: 1s", 1)
config = replace(config, "/etc/prometheus/node-targets/*.json", f"{work}/node-targets.json", 1)
open(f"{work}/prometheus.yml", "w").write(config)
open(f"{work}/node-targets.json", "w").write("[]\n")

# Minutes read as seconds: the group intervals and the alerts' `for:`. The expressions stay as shipped.
rules = open(f"{deploy}/gpudx-rules.yml").read()
rules, groups = re.subn(r"^(\s+interval:) 1m$", r"\1 1s", rules, flags=re.M)
rules, fors = re.subn(r"^(\s+for:) (\d+)m$", r"\1 \2s", rules, flags=re.M)
if groups == 0 or fors == 0:
    sys.exit("deploy/prometheus/gpudx-rules.yml: no group interval or `for:` in minutes found; adapt server.sh")
open(f"{work}/gpudx-rules.yml", "w").write(rules)
EOF
promtool check config "$work/prometheus.yml" > "$work/promtool.log" 2>&1 ||
  fail "promtool check config: $(cat "$work/promtool.log")"
prom_port=$(free_port)
"$prometheus_bin" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn > "$work/prometheus.log" 2>&1 &
pids+=("$!")
api=http://127.0.0.1:$prom_port/api/v1
wait_for 30 curl -sf "http://127.0.0.1:$prom_port/-/ready" || fail "prometheus did not become ready"

# query EXPR: the instant vector as sorted lines "LABELS VALUE" (labels sorted but the name, k=v joined by commas).
query() {
  curl -sf --get "$api/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
rows = []
for s in json.load(sys.stdin)["data"]["result"]:
    m = s["metric"]
    rows.append(",".join(f"{k}={m[k]}" for k in sorted(m) if k != "__name__") + " " + s["value"][1])
print("\n".join(sorted(rows)))'
}
# expect_eventually SECONDS WHAT EXPR WANT: polls until `query EXPR` prints exactly WANT.
expect_eventually() {
  local seconds=$1 what=$2 expr=$3 want=$4 got="" deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    got=$(query "$expr" || true)
    [[ $got == "$want" ]] && { echo "ok: $what"; return 0; }
    sleep 0.5
  done
  fail "$what: after ${seconds}s \`$expr\` gives [$got], expected [$want]"
}
inst() { echo "127.0.0.1:${port[$1]}"; }

# --- What an operator asks -------------------------------------------------------------------------------
expect_eventually 60 "every agent scraped" 'count(up{job="gpudx"} == 1)' " 4"
expect_eventually 30 "nodes per class" 'gpudx_class:nodes:count' "class=h200x2 4"
# Conforming: no warning or error finding. The healthy node and the xid node (its log is still empty).
expect_eventually 30 "nodes conforming per class, before the Xid" 'gpudx_class:nodes_conforming:count' "class=h200x2 2"
# The node missing a GPU is off its class's tested set too: the class tested two cards.
expect_eventually 30 "the node off its tested driver" \
  'count by (instance, id) (ALERTS{alertname="GpudxNodeOffTestedSet", alertstate="firing"})' \
  "$(printf '%s\n%s' "id=matrix.driver_untested,instance=$(inst offdriver) 1" "id=matrix.gpu_count,instance=$(inst missing) 1")"
expect_eventually 30 "the node with the missing UUID" \
  'count by (instance, uuid) (ALERTS{alertname="GpudxExpectedGpuMissing", alertstate="firing"})' \
  "instance=$(inst missing),uuid=$missing_uuid 1"
expect_eventually 10 "versions per class" 'gpudx_class_driver:nodes:count' \
  "$(printf '%s\n%s' 'class=h200x2,driver=580.159.04 3' 'class=h200x2,driver=580.95.05 1')"
[[ -z $(query 'ALERTS{alertname="GpudxNodeErrorFinding", instance="'"$(inst xid)"'"}') ]] ||
  fail "the xid node alerts before its Xid: $(query 'ALERTS{instance="'"$(inst xid)"'"}')"

# The series each node costs: what the agent serves, counted by Prometheus (the cardinality the rules rely on).
series_of() { query "count({job=\"gpudx\", instance=\"$(inst "$1")\", __name__=~\"gpudx_.*\"})" | awk '{print $NF}'; }
findings_of() { query "count(gpudx_finding{instance=\"$(inst "$1")\"})" | awk '{print $NF}'; }
gpus_of() { query "count(gpudx_gpu_info{instance=\"$(inst "$1")\"})" | awk '{print $NF}'; }
echo "series per node (gpudx_*; GPUs, findings):"
for node in "${nodes[@]}"; do
  echo "  $node: $(series_of "$node") ($(gpus_of "$node") GPUs, $(findings_of "$node") findings)"
done

# --- The Xid alert within one rule evaluation of the line ------------------------------------------------
# 1 s scrape and evaluation intervals: from the agent serving the finding to the alert firing takes at most
# one scrape and one evaluation (2 s); the agent itself re-diagnoses on the line at once.
xid_line='[ 4242.424242] NVRM: Xid (PCI:0000:00:06): 79, pid=2131, name=python3, GPU has fallen off the bus.'
t0=$(date +%s.%N)
echo "$xid_line" >> "$work/xid.kern.log"
wait_for 30 bash -c "curl -sf http://$(inst xid)/metrics | grep -q '^gpudx_finding{.*severity=\"error\".*pci=\"0000:00:06.0\"'" ||
  fail "the xid agent does not serve an error finding for 0000:00:06.0: $(curl -sf "http://$(inst xid)/metrics" | grep '^gpudx_finding')"
t1=$(date +%s.%N)
wait_for 30 bash -c "[[ -n \$(curl -sf --get '$api/query' --data-urlencode 'query=ALERTS{alertname=\"GpudxNodeErrorFinding\", alertstate=\"firing\", instance=\"$(inst xid)\", pci=\"0000:00:06.0\"}' | grep -o '\"alertname\"') ]]" ||
  fail "GpudxNodeErrorFinding did not fire for the xid node: $(query 'ALERTS{instance="'"$(inst xid)"'"}')"
t2=$(date +%s.%N)
agent_s=$(python3 -c "print(f'{$t1 - $t0:.2f}')") alert_s=$(python3 -c "print(f'{$t2 - $t1:.2f}')")
echo "Xid 79 appended: the agent served the finding after ${agent_s}s, the alert fired ${alert_s}s after that"
python3 -c "import sys; sys.exit(0 if $t2 - $t1 <= 2 + 1.5 else 1)" ||
  fail "the alert fired ${alert_s}s after the agent served the finding: more than one scrape and one evaluation (2 s) and 1.5 s of slack"
expect_eventually 10 "nodes conforming after the Xid" 'gpudx_class:nodes_conforming:count' "class=h200x2 1"
expect_eventually 10 "the Xid counted by code" \
  'gpudx_node_code:xid_events:increase1h{instance="'"$(inst xid)"'"}' "code=79,instance=$(inst xid),job=gpudx 1"

# --- An agent that stops answering, then answers again -----------------------------------------------------
kill -STOP "${agent_pid[healthy]}"
expect_eventually 30 "agent down while it does not answer" \
  'count by (instance) (ALERTS{alertname="GpudxAgentDown", alertstate="firing"})' "instance=$(inst healthy) 1"
kill -CONT "${agent_pid[healthy]}"
expect_eventually 30 "agent down cleared when it answers again" \
  'count by (instance) (ALERTS{alertname="GpudxAgentDown"})' ""

# --- Cardinality: one more GPU, one more finding ---------------------------------------------------------
# Per GPU: the series that name a GPU (a pci label) and are not findings, on the healthy node, per GPU it has.
# Per finding: what the Xid added on the xid node (its finding and its counter), against the healthy node.
gpu_series=$(query "count({job=\"gpudx\", instance=\"$(inst healthy)\", __name__=~\"gpudx_.*\", __name__!=\"gpudx_finding\", pci!=\"\"})" | awk '{print $NF}')
per_gpu=$(( gpu_series / $(gpus_of healthy) ))
per_finding=$(( $(series_of xid) - $(series_of healthy) ))
echo "each GPU adds $per_gpu series; the Xid (a finding and its counter) added $per_finding"
(( per_gpu >= 1 && per_gpu <= 8 )) || fail "each GPU adds $per_gpu series, expected 1 to 8 (docs/agent.md)"
(( per_finding >= 1 && per_finding <= 8 )) || fail "one Xid adds $per_finding series, expected 1 to 8 (docs/agent.md)"
echo "PASS"
