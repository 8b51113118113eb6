#!/usr/bin/env bash
# run_case.sh GPUDX STANDIN_DIR FAULT EXPECTED_EXIT PATTERN...   (ACCEPT_EXTRA_ARGS: more accept options)
# Runs `gpudx accept` over the stand-in libcuda with GPUDX_STANDIN_FAULT=FAULT, checks the exit code,
# that the JSON record loads back, and that the text report matches every PATTERN (grep -E).
set -u
gpudx=$1 dir=$2 fault=$3 want=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
libdir=$dir
[ "$fault" = no_library ] && libdir=$work/empty && mkdir -p "$libdir"
export GPUDX_STANDIN_FAULT=$fault
# A hung copy is caught in about 8 s; other cases keep the real deadlines (a loaded CI machine is slow).
case $fault in hang_*) export GPUDX_ACCEPT_DEADLINE_SCALE=0.5 ;; *) unset GPUDX_ACCEPT_DEADLINE_SCALE ;; esac
unset CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES SLURM_JOB_GPUS SLURM_STEP_GPUS
# shellcheck disable=SC2086  # ACCEPT_EXTRA_ARGS is a list of words
"$gpudx" accept --driver-lib-dir "$libdir" ${ACCEPT_EXTRA_ARGS:-} --format json -o "$work/accept.json" 2>"$work/stderr"
rc=$?
"$gpudx" accept --from "$work/accept.json" --verbose >"$work/accept.txt" 2>>"$work/stderr"
cat "$work/accept.txt"
status=0
if [ "$rc" != "$want" ]; then echo "FAIL: exit $rc, expected $want"; cat "$work/stderr"; status=1; fi
for p in "$@"; do
    grep -Eq -- "$p" "$work/accept.txt" || { echo "FAIL: report lacks /$p/"; status=1; }
done
exit $status
