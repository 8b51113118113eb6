#!/usr/bin/env bash
# Session 23's device run: a diagnosis, the agent smoke test on the node's /dev/kmsg and NVML, bench/agent_api.sh
# against main at 49fe247 (BEFORE, the last stop's tip), and bench/startup_and_explain.sh for both binaries.
set -u
{ nvidia-smi -L; nproc; uptime; } > "$OUT/node.txt" 2>&1
build-device/gpudx diagnose > "$OUT/diagnose.txt" 2>&1; echo "exit $?" >> "$OUT/diagnose.txt"
mkdir -p "$OUT/smoke"; OUT=$OUT/smoke timeout 60 bash build-device/agent_smoke.sh > /dev/null 2>&1; echo "smoke exit $?" >> "$OUT/smoke/smoke.txt"
BEFORE=build-device/gpudx-before RUNS=5 timeout 260 bash bench/agent_api.sh build-device/gpudx > "$OUT/agent_api.txt" 2>&1; echo "exit $?" >> "$OUT/agent_api.txt"
timeout 110 bash bench/startup_and_explain.sh build-device 9 1000000 > "$OUT/explain_after.txt" 2>&1; echo "exit $?" >> "$OUT/explain_after.txt"
GPUDX=build-device/gpudx-before timeout 110 bash bench/startup_and_explain.sh build-device 9 1000000 > "$OUT/explain_before.txt" 2>&1; echo "exit $?" >> "$OUT/explain_before.txt"
cat "$OUT/node.txt"; tail -3 "$OUT/diagnose.txt"; cat "$OUT/smoke/smoke.txt"; cat "$OUT/agent_api.txt"; tail -12 "$OUT/explain_after.txt"; tail -8 "$OUT/explain_before.txt"
