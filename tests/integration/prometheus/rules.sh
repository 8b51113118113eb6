#!/usr/bin/env bash
# deploy/prometheus: the rules and the example scrape config pass `promtool check`, the rules' unit tests
# (deploy/prometheus/tests/*.test.yml) pass `promtool test rules`, and every gpudx_ metric the rules read is one
# `gpudx diagnose --format prom` writes (a rename on either side fails here, not in a fleet's alerting).
# Usage: rules.sh GPUDX SOURCE_DIR WORK_DIR. Exit 77 (skip) without promtool unless GPUDX_REQUIRE_INTEGRATION=1.
set -euo pipefail
gpudx=$(realpath "$1") src=$(realpath "$2") work=$3
source "$src/tests/integration/lib.sh"
require_cmd promtool python3
rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")
dir=$src/deploy/prometheus

promtool check rules "$dir/gpudx-rules.yml" || fail "promtool check rules rejected gpudx-rules.yml"
promtool check config "$dir/prometheus.yml" || fail "promtool check config rejected prometheus.yml"
promtool test rules "$dir"/tests/*.test.yml || fail "promtool test rules failed"

# A node with Xids, checked against the matrix, writes every metric family gpudx has.
build_scenario "$src/tests/fixtures/h200x2" "$src/tests/scenarios/xid-repeats" "$work/xid-repeats"
"$gpudx" diagnose --root "$work/xid-repeats" --no-driver --matrix "$src/examples/matrix.toml" --format prom \
  > "$work/xid-repeats.prom" || true
promtool check metrics < "$work/xid-repeats.prom" > "$work/promtool.out" 2>&1 ||
  fail "promtool check metrics: $(cat "$work/promtool.out")"
python3 - "$dir/gpudx-rules.yml" "$work/xid-repeats.prom" <<'PY'
import re, sys
rules, exposition = open(sys.argv[1]).read(), open(sys.argv[2]).read()
written = set(re.findall(r"^# TYPE (gpudx_[a-z0-9_]+) ", exposition, re.M))
# Metric names in the expressions: gpudx_... not followed by ':' (recording rules are named gpudx_class:...).
exprs = "\n".join(l for l in rules.splitlines() if not l.lstrip().startswith(("#", "summary", "description")))
read = set(re.findall(r"\b(gpudx_[a-z0-9_]+)\b(?!:)", exprs)) - {n for n in re.findall(r"record: (\S+)", rules)}
missing = sorted(read - written)
if missing:
    sys.exit(f"FAIL: the rules read metrics gpudx does not write: {missing} (written: {sorted(written)})")
if not re.search(r'^gpudx_node_info\{driver="580\.159\.04",[^}]*\} 1$', exposition, re.M):
    sys.exit("FAIL: no gpudx_node_info with the node's driver:\n" + exposition)
if not re.search(r'^gpudx_xid_events_total\{code="\d+",pci="0000:00:0[67]\.0"\} \d+$', exposition, re.M):
    sys.exit("FAIL: no gpudx_xid_events_total series for the scenario's Xids:\n" + exposition)
print(f"the rules read {sorted(read)}: all written by gpudx diagnose --format prom")
PY
echo PASS
