#!/usr/bin/env bash
# Prometheus integration: `gpudx diagnose --format prom -o DIR/gpudx.prom` on a faulty, a hostile and a healthy
# captured node; `promtool check metrics` accepts each file; a real prometheus-node-exporter with the textfile
# collector on DIR serves our gpudx_ metrics without a scrape error, the hostile label values intact.
# Starts one node_exporter, records its PID and stops exactly that PID on exit.
# Usage: run.sh GPUDX SOURCE_DIR WORK_DIR. Exit 77 (skip) without the packages unless GPUDX_REQUIRE_INTEGRATION=1.
set -euo pipefail
gpudx=$(realpath "$1") src=$(realpath "$2") work=$3
source "$src/tests/integration/lib.sh"
require_cmd promtool prometheus-node-exporter python3
exporter=$(PATH="$PATH:/usr/sbin:/sbin" command -v prometheus-node-exporter)

rm -rf "$work" && mkdir -p "$work/textfile"
work=$(realpath "$work")
exporter_pid=""
cleanup() {
  local rc=$?
  if [[ -n $exporter_pid ]]; then
    kill "$exporter_pid" 2>/dev/null || true
    wait "$exporter_pid" 2>/dev/null || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fixture=$src/tests/fixtures/h200x2
build_scenario "$fixture" "$src/tests/scenarios/fell-off-bus" "$work/trees/fell-off-bus"
build_scenario "$fixture" "$src/tests/scenarios/hostile-strings" "$work/trees/hostile-strings"
dir=$work/textfile
prom=$dir/gpudx.prom

write_prom() {  # write_prom ROOT EXPECTED_RC
  local rc=0
  "$gpudx" diagnose --format prom --no-driver --root "$1" -o "$prom" || rc=$?
  [[ $rc == "$2" ]] || fail "diagnose --root $1 exited $rc, expected $2"
  # Atomic write: no temporary file left behind, readable by an exporter running as another user.
  [[ -z $(find "$dir" -name '.gpudx.prom.tmp*') ]] || fail "temporary file left in $dir"
  [[ $(stat -c %a "$prom") == 644 ]] || fail "mode $(stat -c %a "$prom"), expected 644"
  # The file holds exactly what stdout would.
  "$gpudx" diagnose --format prom --no-driver --root "$1" > "$work/stdout.prom" || true
  diff <(grep -v '^gpudx_collector_duration_seconds' "$prom") \
       <(grep -v '^gpudx_collector_duration_seconds' "$work/stdout.prom") >/dev/null ||
    fail "-o wrote something else than stdout"
  promtool check metrics < "$prom" > "$work/promtool.out" 2>&1 ||
    fail "promtool check metrics rejected the output of --root $1: $(cat "$work/promtool.out")"
}

for case in fell-off-bus:1 hostile-strings:1 h200x2:0 h200x1-gathered:0 h200x2-gathered:0; do
  name=${case%:*} want=${case#*:}
  root=$work/trees/$name
  [[ -d $src/tests/fixtures/$name ]] && root=$src/tests/fixtures/$name
  write_prom "$root" "$want"
  cp "$prom" "$work/$name.prom"
  echo "promtool check metrics: $name ok ($(grep -c '^gpudx_' "$prom") samples)"
done
grep -q '^gpudx_finding{id="pcie.fell_off_bus",layer="pcie",severity="error",uuid="GPU-40cd403d-66ba-4608-72b9-5be5031085dc",pci="0000:00:07.0"} 1$' \
  "$work/fell-off-bus.prom" || fail "fell-off-bus finding series missing: $(grep gpudx_finding "$work/fell-off-bus.prom")"
grep -F 'uuid="GPU-40cd403d\"},evil=\"1\\} 1 ' "$work/hostile-strings.prom" >/dev/null ||
  fail "hostile UUID not escaped as expected: $(grep gpudx_finding "$work/hostile-strings.prom")"

# The real captures' info metrics: the node's versions and class (--matrix), one series per GPU by UUID.
# (h200x2-gathered: the 2xH200 node gathered by gpudx, host "vm" as the class's hostname patterns name it.)
"$gpudx" diagnose --format prom --no-driver --root "$src/tests/fixtures/h200x2-gathered" --matrix "$src/examples/matrix.toml" \
  > "$work/h200x2-matrix.prom" || true
promtool check metrics < "$work/h200x2-matrix.prom" > "$work/promtool.out" 2>&1 ||
  fail "promtool check metrics rejected the output with --matrix: $(cat "$work/promtool.out")"
grep -q '^gpudx_node_info{driver="580.159.04",module="",kernel="6.18.44-fc-v657-gpu",cuda="",class="h200x2"} 1$' \
  "$work/h200x2-matrix.prom" || fail "gpudx_node_info of h200x2: $(grep gpudx_node_info "$work/h200x2-matrix.prom")"
for uuid in GPU-0f327a11-e21c-5b02-f289-a9f1e9266506 GPU-4c880f92-0c23-d49e-b569-e6d4768be474; do
  grep -q "^gpudx_gpu_info{uuid=\"$uuid\",pci=\"0000:00:0[67].0\",slot=\"[^\"]*\",model=\"NVIDIA H200\",vbios=\"96.00.a5.00.1a\"} 1\$" \
    "$work/h200x2-matrix.prom" || fail "no gpudx_gpu_info for $uuid: $(grep gpudx_gpu_info "$work/h200x2-matrix.prom")"
done
[[ $(grep -c '^gpudx_gpu_info{' "$work/h200x1-gathered.prom") == 1 ]] ||
  fail "h200x1-gathered: $(grep -c '^gpudx_gpu_info{' "$work/h200x1-gathered.prom") gpudx_gpu_info series, expected 1"

# An unwritable target is a clear usage error, not a crash.
rc=0
err=$("$gpudx" diagnose --format prom --no-driver --root "$fixture" -o /nonexistent-dir/gpudx.prom 2>&1) || rc=$?
[[ $rc == 64 && $err == "gpudx: cannot write /nonexistent-dir/gpudx.prom: "* ]] || fail "unwritable -o: rc=$rc $err"

# node_exporter, textfile collector only, on a free port.
port=$(free_port)
"$exporter" --collector.disable-defaults --collector.textfile --collector.textfile.directory="$dir" \
  --web.listen-address="127.0.0.1:$port" > "$work/node_exporter.log" 2>&1 &
exporter_pid=$!
scrape() {
  python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
    "http://127.0.0.1:$port/metrics"
}
wait_for 30 scrape || fail "node_exporter did not answer on port $port: $(tail -5 "$work/node_exporter.log")"

check_scrape() {  # check_scrape CASE: the case's file served, with our metrics and no textfile error
  cp "$work/$1.prom" "$prom.new" && mv "$prom.new" "$prom"
  scrape > "$work/$1.scrape"
  grep -q '^node_textfile_scrape_error 0$' "$work/$1.scrape" ||
    fail "node_exporter could not read the $1 file: $(grep -i textfile "$work/$1.scrape"; tail -5 "$work/node_exporter.log")"
  grep -q '^gpudx_exit_code ' "$work/$1.scrape" || fail "no gpudx_exit_code in node_exporter's /metrics ($1)"
  # A file that parses can still be refused at gathering (a duplicate series): node_exporter then logs it and
  # drops the series, with node_textfile_scrape_error still 0.
  ! grep -q 'error gathering metrics' "$work/node_exporter.log" ||
    fail "node_exporter refused series of the $1 file: $(grep 'error gathering' "$work/node_exporter.log" | head -3)"
  [[ $(grep -c '^gpudx_' "$work/$1.scrape") == $(grep -c '^gpudx_' "$work/$1.prom") ]] ||
    fail "node_exporter serves $(grep -c '^gpudx_' "$work/$1.scrape") gpudx_ samples of the $(grep -c '^gpudx_' "$work/$1.prom") in the $1 file"
  python3 - "$work/$1.scrape" "$1" <<'PY'
import re, sys
text, case = open(sys.argv[1]).read(), sys.argv[2]
# Parse every gpudx_finding series back, unescaping label values as Prometheus does.
series = []
for line in text.splitlines():
    if not line.startswith("gpudx_finding{"):
        continue
    body = line[len("gpudx_finding{"):]
    labels, i = {}, 0
    while body[i] != "}":
        m = re.match(r'([a-zA-Z_][a-zA-Z0-9_]*)="', body[i:])
        assert m, f"bad label at {body[i:]!r}"
        i += m.end()
        val = ""
        while body[i] != '"':
            if body[i] == "\\":
                val += {"n": "\n", "\\": "\\", '"': '"'}[body[i + 1]]
                i += 2
            else:
                val += body[i]
                i += 1
        labels[m.group(1)] = val
        i += 1
        if body[i] == ",":
            i += 1
    assert body[i + 1:].strip() == "1", line
    series.append(labels)
if case == "hostile-strings":
    uuids = {s["uuid"] for s in series}
    assert 'GPU-40cd403d"},evil="1\\} 1 \ufffd' in uuids, uuids
if case == "fell-off-bus":
    assert {"id": "pcie.fell_off_bus", "layer": "pcie", "severity": "error",
            "uuid": "GPU-40cd403d-66ba-4608-72b9-5be5031085dc", "pci": "0000:00:07.0"} in series, series
if case == "h200x2":
    assert not [s for s in series if s["severity"] == "error"], series
print(f"node_exporter serves {case}: {len(series)} gpudx_finding series")
PY
}
check_scrape fell-off-bus
check_scrape hostile-strings
check_scrape h200x2
echo PASS
