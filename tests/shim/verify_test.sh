#!/usr/bin/env bash
# `gpudx verify PID` against shim_probe held paused (serve mode), before and after a simulated restore.
# usage: verify_test.sh CASE GPUDX PROBE SHIM FAKELIB FIXTURE WORKDIR
set -u
case_name=$1 gpudx=$2 probe=$3 shim=$4 fakelib=$5 fixture=$6 work=$7
state_dir=$work/verify-$case_name
rm -rf "$state_dir" && mkdir -p "$state_dir"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

env_args=(LD_LIBRARY_PATH="$fakelib" GPUDX_SHIM_STATE_DIR="$state_dir" GPUDX_SHIM_PROC_ROOT="$fixture")
case $case_name in
  consistent_then_corrected) env_args+=(LD_PRELOAD="$shim") ;;
  observe_inconsistent) env_args+=(LD_PRELOAD="$shim" GPUDX_SHIM_MODE=observe) ;;
  no_shim) ;;
  fail_open) env_args=(LD_LIBRARY_PATH="$fakelib" GPUDX_SHIM_STATE_DIR="$state_dir" GPUDX_SHIM_PROC_ROOT=/nonexistent
                       GPUDX_SHIM_NVML=0 LD_PRELOAD="$shim") ;;
esac

coproc PROBE { exec env "${env_args[@]}" "$probe" serve; }
coproc_pid=$PROBE_PID  # bash unsets PROBE_PID once the coprocess ends
probe_pid=""  # the probe prints its own PID first (the coproc's PID may be a subshell's)
# Reads the probe's output up to its next "ready" line.
wait_ready() {
  local line
  while IFS= read -r -t 10 line <&"${PROBE[0]}"; do
    echo "probe: $line"
    [[ $line == pid\ * ]] && probe_pid=${line#pid }
    [[ $line == ready ]] && return 0
  done
  fail "probe did not answer"; return 1
}
send() { echo "$1" >&"${PROBE[1]}"; wait_ready; }
# verify NAME WANT_EXIT: runs gpudx verify (text and JSON), checks the exit code, leaves JSON in $json.
verify() {
  local label=$1 want=$2 rc
  "$gpudx" verify "$probe_pid" --node-root "$fixture"; rc=$?
  [[ $rc == "$want" ]] || fail "$label: text exit $rc, want $want"
  json=$("$gpudx" verify "$probe_pid" --format json --node-root "$fixture"); rc=$?
  [[ $rc == "$want" ]] || fail "$label: json exit $rc, want $want"
}
jq_has() { echo "$json" | grep -q -- "$1" || fail "$2 (no $1 in JSON)"; }

wait_ready
send query
case $case_name in
  consistent_then_corrected)
    verify "before restore" 0
    jq_has '"verdict": "consistent"' "before restore: consistent"
    jq_has '"driver_bus_id": "0000:00:06.0"' "before restore: driver bus of ordinal 0"
    send restore
    send query
    verify "after restore" 0
    jq_has '"verdict": "corrected"' "after restore: corrected"
    echo "$json" | grep -A1 '"corrected_bus_id": "0000:00:07.0"' | grep -Eq '"corrected_calls": [1-9]' ||
      fail "after restore: ordinal 0 corrected to 0000:00:07.0, with corrected calls counted"
    jq_has '"driver_bus_id": "0000:00:06.0"' "after restore: driver still reports 06"
    jq_has 'was given bus id 0000:00:06.0 before the restore' "after restore: the stale copy is reported"
    jq_has 'cudaGetDeviceProperties' "after restore: runtime cache is reported"
    ;;
  observe_inconsistent)
    verify "before restore" 0
    send restore
    send query
    verify "after restore (observe)" 1
    jq_has '"verdict": "inconsistent"' "observe mode: inconsistent"
    jq_has 'observe mode' "observe mode: explained"
    ;;
  no_shim)
    verify "no shim" 3
    jq_has '"loaded": false' "no shim: reported as not loaded"
    ;;
  fail_open)
    verify "fail open" 3
    jq_has '"verdict": "unknown"' "fail open: unknown"
    jq_has 'passed through unverified' "fail open: explained"
    ;;
esac
"$gpudx" verify 999999999 >/dev/null 2>&1; rc=$?
[[ $rc == 64 ]] || fail "verify of a missing PID: exit $rc, want 64"
echo quit >&"${PROBE[1]}"
wait "$coproc_pid" 2>/dev/null
[[ $case_name == no_shim || ! -e $state_dir/gpudx-shim.$probe_pid ]] || fail "state file left behind after exit"
echo "verify_test $case_name: $failures failure(s)"
exit $((failures > 0))
