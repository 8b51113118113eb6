#!/usr/bin/env bash
# GPUDX_SHIM_LOG=PATH: each kind of correction is logged once per ordinal, however many calls it corrects;
# without GPUDX_SHIM_LOG nothing is written.
# usage: log_test.sh PROBE SHIM FAKELIB FIXTURE WORKDIR
set -u
probe=$1 shim=$2 fakelib=$3 fixture=$4 work=$5
log=$work/shim-log.txt
rm -f "$log"
env LD_LIBRARY_PATH="$fakelib" GPUDX_SHIM_STATE_DIR="$work" GPUDX_SHIM_PROC_ROOT="$fixture" LD_PRELOAD="$shim" \
  GPUDX_SHIM_LOG="$log" "$probe" paths --expect corrected >/dev/null || { echo "FAIL: probe"; exit 1; }
cat "$log"
failures=0
check() { local n; n=$(grep -c -- "$1" "$log"); [[ $n == "$2" ]] || { echo "FAIL: '$1' logged $n times, want $2"; failures=$((failures+1)); }; }
# The probe corrects cuDeviceGetPCIBusId dozens of times per ordinal through 9 paths.
check 'ordinal 0 (GPU-40cd403d-66ba-4608-72b9-5be5031085dc): cuDeviceGetPCIBusId: driver says 0000:00:06.0, that UUID.s card is at 0000:00:07.0 (procfs); answering 0000:00:07.0' 1
check 'ordinal 1 (GPU-992cb470-9027-88f4-48a9-a9a329d6978d): cuDeviceGetPCIBusId: driver says 0000:00:07.0' 1
check 'cuDeviceGetAttribute' 2
check 'cuDeviceGetByPCIBusId' 2
check 'now reports UUID' 2
err=$(env LD_LIBRARY_PATH="$fakelib" GPUDX_SHIM_STATE_DIR="$work" GPUDX_SHIM_PROC_ROOT="$fixture" LD_PRELOAD="$shim" \
  "$probe" paths --expect corrected 2>&1 >/dev/null)
[[ -z $err ]] || { echo "FAIL: logging is on by default: $err"; failures=$((failures+1)); }
exit $((failures > 0))
