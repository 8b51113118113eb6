#!/usr/bin/env bash
# Runs the named device scripts with the binaries built on the development machine and carried over
# (build/gpudx, build/libgpudx_shim.so: the portable build runs on the GPU machine as it is), each with its own
# output folder under $OUT and a time limit (LIMIT seconds, default 200).
# Usage: bash device/carried-run.sh xid-recovery process-view agent
set -u
mkdir -p build-device
cp build/gpudx build/libgpudx_shim.so build-device/ 2>/dev/null
build-device/gpudx --version
for name in "$@"; do
  mkdir -p "$OUT/$name"
  echo "== $name"
  start=$(date +%s)
  OUT=$OUT/$name timeout "${LIMIT:-200}" bash "device/$name.sh" > "$OUT/$name/console.log" 2>&1
  echo "$name rc=$? in $(( $(date +%s) - start )) s"
  tail -15 "$OUT/$name/console.log"
done
