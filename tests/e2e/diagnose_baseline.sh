#!/usr/bin/env bash
# `gpudx diagnose --baseline FILE`: the node record's comparison joins the diagnosis. A record saved from
# the 2×H200 capture, then the same capture with 0000:00:07.0 gone from the bus: the record names the
# missing card (UUID and address) even without --expect-gpus, and the boundary is pcie.
set -euo pipefail
gpudx=$1 fixture=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
"$gpudx" baseline save "$work/node.json" --root "$fixture" --no-driver
cp -r "$fixture" "$work/tree"; chmod -R u+w "$work/tree"
rm -rf "$work/tree/sys/bus/pci/devices/0000:00:07.0" "$work/tree/sys/devices/pci0000:00/0000:00:07.0" \
  "$work/tree/proc/driver/nvidia/gpus/0000:00:07.0"
rc=0
"$gpudx" diagnose --root "$work/tree" --no-driver --baseline "$work/node.json" --format json > "$work/out.json" || rc=$?
python3 - "$work/out.json" "$rc" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); rc = int(sys.argv[2])
missing = [f for f in d["findings"] if f["id"] == "baseline.gpu_missing"]
problems = []
if rc != 1: problems.append(f"exit {rc}, expected 1")
if d.get("boundary") != "pcie": problems.append(f"boundary {d.get('boundary')}, expected pcie")
if len(missing) != 1: problems.append(f"baseline.gpu_missing findings: {len(missing)}")
elif not any(s.get("pci") == "0000:00:07.0" and s.get("uuid", "").startswith("GPU-40cd403d") for s in missing[0]["subjects"]):
    problems.append(f"subject is not GPU-40cd403d... at 0000:00:07.0: {missing[0]['subjects']}")
if problems: print("\n".join(problems)); sys.exit(1)
print("diagnose --baseline names the missing card:", missing[0]["message"])
PY
# Unchanged node: no baseline finding of warning or error severity.
"$gpudx" diagnose --root "$fixture" --no-driver --baseline "$work/node.json" --format json > "$work/same.json" || true
if grep -q '"baseline\.\(gpu\|link\|driver\|kernel\)' "$work/same.json"; then echo "unchanged node reported a baseline change"; exit 1; fi
# A record that is not JSON: usage error naming the file.
echo '{"truncated": ' > "$work/bad.json"
rc=0; "$gpudx" diagnose --root "$fixture" --no-driver --baseline "$work/bad.json" 2> "$work/bad.err" >/dev/null || rc=$?
[[ $rc -eq 64 ]] || { echo "bad record: exit $rc, expected 64"; exit 1; }
grep -q "bad.json" "$work/bad.err" || { echo "bad record: message does not name the file:"; cat "$work/bad.err"; exit 1; }
echo "ok"
