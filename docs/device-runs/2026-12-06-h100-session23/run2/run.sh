#!/usr/bin/env bash
# Session 23's second device run: every goal of issue #34 in one table (bench/speed_goals.sh), this stop's binary
# against main at 49fe247 (BEFORE) in the same command.
set -u
{ nvidia-smi -L; nproc; uptime; } > "$OUT/node.txt" 2>&1
build-device/gpudx diagnose > "$OUT/diagnose.txt" 2>&1; echo "exit $?" >> "$OUT/diagnose.txt"
BEFORE=build-device/gpudx-before RUNS=9 timeout 560 bash bench/speed_goals.sh build-device > "$OUT/speed_goals.txt" 2>&1; echo "exit $?" >> "$OUT/speed_goals.txt"
cat "$OUT/node.txt"; tail -2 "$OUT/diagnose.txt"; cat "$OUT/speed_goals.txt"
