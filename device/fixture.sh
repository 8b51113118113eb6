#!/usr/bin/env bash
# A capture of the GPU machine with its recorded NVML and CUDA answers, for tests/fixtures, and the
# replay of that capture through the stand-in libraries next to the live run, in the same command.
set -u
OUT=${OUT:-/tmp/gpudx-fixture-out}
mkdir -p "$OUT"
GPUDX=${GPUDX:-$PWD/build-device/gpudx}
$GPUDX gather "$OUT/h200x2-gathered.tar.gz" 2>&1 | tee "$OUT/gather.log"
$GPUDX ids > "$OUT/ids-live.txt" 2>&1; echo "ids live exit $?"
$GPUDX snapshot --all-devices -o "$OUT/snapshot-live.json"; echo "snapshot live exit $?"
cat "$OUT/ids-live.txt"
