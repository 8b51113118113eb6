#!/usr/bin/env bash
# The shim's state file in a directory every user can write (docs/reliability.md): files planted under the
# names it uses are neither written through nor adopted, and `gpudx verify` believes only the process's own.
# usage: state_file_test.sh GPUDX PROBE SHIM FAKELIB FIXTURE WORKDIR
set -u
gpudx=$1 probe=$2 shim=$3 fakelib=$4 fixture=$5 work=$6
dir=$work/state-file
rm -rf "$dir" && mkdir -p "$dir" && chmod 1777 "$dir"  # like /tmp and /dev/shm
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
echo "untouched" > "$work/victim"
other_uid=""
[[ $(id -u) == 0 ]] && other_uid=65534  # nobody: planting as another user needs root

# Planted before the probe starts, under the names its PID gives: the final name as a link to a file of
# ours, and the temporary name older shims used as a file anyone may write (another user's, when root).
coproc PROBE {
  ln -s "$work/victim" "$dir/gpudx-shim.$BASHPID"
  : > "$dir/.gpudx-shim.$BASHPID.tmp"
  chmod 0666 "$dir/.gpudx-shim.$BASHPID.tmp"
  [[ -n $other_uid ]] && chown "$other_uid" "$dir/.gpudx-shim.$BASHPID.tmp"
  exec env LD_LIBRARY_PATH="$fakelib" GPUDX_SHIM_STATE_DIR="$dir" GPUDX_SHIM_PROC_ROOT="$fixture" \
    LD_PRELOAD="$shim" "$probe" serve
}
coproc_pid=$PROBE_PID
probe_pid=""
wait_ready() {
  local line
  while IFS= read -r -t 10 line <&"${PROBE[0]}"; do
    [[ $line == pid\ * ]] && probe_pid=${line#pid }
    [[ $line == ready ]] && return 0
  done
  fail "probe did not answer"; return 1
}
wait_ready
echo query >&"${PROBE[1]}"; wait_ready
[[ $probe_pid == "$coproc_pid" ]] || fail "the probe runs as PID $probe_pid, the names were planted for $coproc_pid"
state=$dir/gpudx-shim.$probe_pid
planted_tmp=$dir/.gpudx-shim.$probe_pid.tmp

[[ $(cat "$work/victim") == untouched ]] || fail "the shim wrote through a planted link: $(cat "$work/victim")"
[[ -f $state && ! -L $state ]] || fail "the state file is not a regular file of its own: $(ls -l "$state")"
[[ $(stat -c %u "$state") == "$(id -u)" ]] || fail "the state file is owned by uid $(stat -c %u "$state")"
[[ $(stat -c %a "$state") == 644 ]] || fail "the state file has mode $(stat -c %a "$state")"
[[ -f $planted_tmp && ! -s $planted_tmp ]] || fail "the planted temporary file was written or removed"
ls -la "$dir"

verify_json() { json=$("$gpudx" verify "$probe_pid" --format json --node-root "$fixture"); rc=$?; }
verify_json
[[ $rc == 0 ]] || fail "verify of the shim's own file: exit $rc: $json"

# Forgeries of that file: each is refused, verify cannot evaluate (3) and says why.
cp "$state" "$work/genuine"
refused() {
  local label=$1 want=$2
  verify_json
  [[ $rc == 3 ]] || fail "$label: verify exit $rc, want 3"
  echo "$json" | grep -q -- "is not trusted: $want" || fail "$label: no 'not trusted: $want' in: $json"
}
chmod 0666 "$state"
refused "writable by others" "writable by users other than its owner"
chmod 0644 "$state"
rm -f "$state" && ln -s "$work/genuine" "$state"
refused "a link to a genuine copy" "a symbolic link"
if [[ -n $other_uid ]]; then
  rm -f "$state" && cp "$work/genuine" "$state" && chown "$other_uid" "$state"
  refused "another user's" "owned by uid $other_uid"
fi
rm -f "$state" && cp "$work/genuine" "$state"
verify_json
[[ $rc == 0 ]] || fail "the genuine copy back in place: exit $rc"

echo quit >&"${PROBE[1]}"
wait "$coproc_pid" 2>/dev/null
echo "state_file_test: $failures failure(s)"
exit $((failures > 0))
