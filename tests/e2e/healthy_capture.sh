#!/usr/bin/env bash
# A real node that is healthy must be called healthy: the capture gpudx gathered on a 1×H200 machine
# (tests/fixtures/h200x1-gathered, with its recorded NVML and CUDA answers, the CUDA image's forward-compat
# libcuda copy included) replays through the stand-ins to "healthy", exit 0, and `gpudx ids` finds every
# source consistent. A false alarm here teaches operators to ignore gpudx.
set -uo pipefail
gpudx=$1 fixture=$2 standins=$3
out=$("$gpudx" diagnose --root "$fixture" --driver-lib-dir "$standins" 2>&1); rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "diagnose exit $rc, expected 0 (healthy)"; exit 1; }
grep -q "^Verdict: healthy (exit 0)" <<<"$out" || { echo "verdict is not healthy"; exit 1; }
grep -q "^  driver      ok" <<<"$out" || { echo "the driver layers were not evaluated from the recorded answers"; exit 1; }
ids=$("$gpudx" ids --root "$fixture" --driver-lib-dir "$standins" 2>&1) || { echo "$ids"; echo "ids failed"; exit 1; }
echo "$ids"
grep -q "^consistent" <<<"$ids" || { echo "ids did not find the sources consistent"; exit 1; }
