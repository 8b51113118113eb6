#!/usr/bin/env bash
# The built binaries under Debian 11's glibc 2.31 (the sysroot's own libc6, unpacked by
# scripts/fetch-sysroot.sh, nothing installed): its loader runs them with its libraries first, so a symbol
# this machine's newer glibc has and 2.31 lacks fails the run. diagnose, ids, snapshot and xid on the h200x2
# capture, and the shim preloaded into a process whose lookups it cannot correct (fail open).
# Usage: old_glibc.sh SYSROOT GPUDX SHIM SHIM_PROBE FAKELIB FIXTURE WORKDIR
set -uo pipefail
sysroot=$1 gpudx=$2 shim=$3 probe=$4 fakelib=$5 fixture=$6 work=$7
libs=$sysroot/lib/x86_64-linux-gnu
loader=$libs/ld-linux-x86-64.so.2
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
old() { "$loader" --library-path "$libs" "$@"; }

version=$("$loader" --library-path "$libs" "$libs/libc.so.6" | head -1)
echo "glibc: $version"
[[ $version == *"version 2.31"* ]] || fail "the sysroot's libc is not 2.31: $version"
# The loader reports which libc it bound: the old one, not this machine's.
LD_DEBUG=libs old "$gpudx" --version 2> "$work/ld-debug.txt" > "$work/version.txt" || fail "gpudx --version: exit $?"
grep -q "calling init: $libs/libc.so.6" "$work/ld-debug.txt" ||
  fail "gpudx did not run on the sysroot's libc: $(grep 'calling init' "$work/ld-debug.txt")"
[[ $(cat "$work/version.txt") == "gpudx "* ]] || fail "--version printed '$(cat "$work/version.txt")'"

rc=0
old "$gpudx" diagnose --root "$fixture" --no-driver --expect-gpus 2 > "$work/diagnose.txt" 2>&1 || rc=$?
[[ $rc == 0 ]] || fail "diagnose --root h200x2: exit $rc: $(tail -5 "$work/diagnose.txt")"
grep -q "Verdict: healthy" "$work/diagnose.txt" || fail "diagnose: $(tail -5 "$work/diagnose.txt")"
old "$gpudx" ids --root "$fixture" --no-driver > "$work/ids.txt" 2>&1 || fail "ids: exit $?: $(tail -5 "$work/ids.txt")"
grep -q "0000:00:07.0" "$work/ids.txt" || fail "ids lists no GPU: $(cat "$work/ids.txt")"
old "$gpudx" snapshot --root "$fixture" --no-driver -o "$work/snapshot.json" > "$work/snapshot.log" 2>&1 ||
  fail "snapshot: exit $?: $(tail -5 "$work/snapshot.log")"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/snapshot.json" || fail "snapshot is not JSON"
old "$gpudx" xid 79 > "$work/xid.txt" 2>&1 || fail "xid 79: exit $?"
grep -qi "fallen off the bus" "$work/xid.txt" || fail "xid 79: $(cat "$work/xid.txt")"
# An exception thrown and caught (the unwinder finds its tables through glibc_compat's _dl_find_object).
rc=0
old "$gpudx" diagnose --root "$work/no-such-root" > "$work/usage.txt" 2>&1 || rc=$?
[[ $rc == 64 ]] || fail "a usage error: exit $rc, want 64: $(cat "$work/usage.txt")"

# The shim in a process of this glibc: neither procfs nor NVML knows the GPUs, so the driver's answers
# stand (fail open). The stand-in libcuda is found on the old loader's path, ahead of the system's.
rc=0
GPUDX_SHIM_PROC_ROOT=/nonexistent GPUDX_SHIM_NVML=0 GPUDX_SHIM_STATE_DIR="$work" LD_PRELOAD="$shim" \
  "$loader" --library-path "$fakelib:$libs" "$probe" paths --expect stale > "$work/shim.txt" 2>&1 || rc=$?
[[ $rc == 0 ]] || fail "shim fail-open under glibc 2.31: exit $rc: $(tail -5 "$work/shim.txt")"
# ... and with procfs it corrects them there too.
rc=0
GPUDX_SHIM_PROC_ROOT="$fixture" GPUDX_SHIM_STATE_DIR="$work" LD_PRELOAD="$shim" \
  "$loader" --library-path "$fakelib:$libs" "$probe" paths --expect corrected > "$work/shim-corrected.txt" 2>&1 || rc=$?
[[ $rc == 0 ]] || fail "shim correcting under glibc 2.31: exit $rc: $(tail -5 "$work/shim-corrected.txt")"

echo "old_glibc: $failures failure(s)"
exit $((failures > 0))
