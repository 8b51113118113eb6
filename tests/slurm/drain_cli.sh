#!/usr/bin/env bash
# `gpudx diagnose --format slurm --drain` against a fake scontrol (tests/slurm/fake_scontrol.sh): drains on an
# error with a reason naming check, UUID and PCI address; resumes its own drain once healthy; never resumes
# someone else's; scontrol failures exit 69 with a message. Runs everywhere (no Slurm needed); the same flow
# against a real slurmctld/slurmd is tests/integration/slurm/run.sh.
set -euo pipefail
gpudx=$1 src=$2 work=$3
source "$src/tests/integration/lib.sh"
rm -rf "$work" && mkdir -p "$work/state"
export FAKE_SCONTROL_STATE=$work/state
fake=$src/tests/slurm/fake_scontrol.sh
echo vm > "$work/state/node"
broken=$work/fell-off-bus
build_scenario "$src/tests/fixtures/h200x2" "$src/tests/scenarios/fell-off-bus" "$broken"
healthy=$src/tests/fixtures/h200x2

run() {  # run EXPECTED_RC ARGS...: gpudx diagnose, stdout in $out, stderr in $err
  local want=$1; shift
  set +e
  "$gpudx" diagnose --format slurm --drain --no-driver "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  set -e
  out=$(cat "$work/out") err=$(cat "$work/err")
  [[ $rc == "$want" ]] || fail "exit $rc, expected $want for: $*; stdout: $out; stderr: $err"
}

# 1. An error finding drains, with the reason printed and given to scontrol.
run 1 --root "$broken" --scontrol "$fake" --node vm
[[ $out == "gpudx: pcie.fell_off_bus GPU-40cd403d"*"0000:00:07.0"* ]] || fail "reason: $out"
(( ${#out} <= 80 )) || fail "reason longer than 80: ${#out}"
[[ $(cat "$work/state/state") == IDLE+DRAIN ]] || fail "not drained: $(cat "$work/state/state")"
[[ $(cat "$work/state/reason") == "$out" ]] || fail "drained with another reason: $(cat "$work/state/reason")"
[[ $err == *"drained Slurm node vm"* ]] || fail "no drain message: $err"
echo "drained: $out"

# 2. Still broken: no second update. GPUDX_SCONTROL and SLURMD_NODENAME stand in for the options.
calls_before=$(grep -c update "$work/state/calls")
GPUDX_SCONTROL=$fake SLURMD_NODENAME=vm run 1 --root "$broken"
[[ $(grep -c update "$work/state/calls") == "$calls_before" ]] || fail "updated an unchanged drain again"

# 3. Healthy again: resumed, because the drain is gpudx's own.
run 0 --root "$healthy" --scontrol "$fake" --node vm
[[ -z $out ]] || fail "healthy node printed a reason: $out"
[[ $(cat "$work/state/state") == IDLE ]] || fail "not resumed: $(cat "$work/state/state")"
[[ $err == *"resumed Slurm node vm"* ]] || fail "no resume message: $err"

# 4. Someone else's drain is left alone, healthy or broken.
echo IDLE+DRAIN > "$work/state/state"; printf 'admin maintenance' > "$work/state/reason"
run 0 --root "$healthy" --scontrol "$fake" --node vm
run 1 --root "$broken" --scontrol "$fake" --node vm
[[ $(cat "$work/state/reason") == "admin maintenance" ]] || fail "foreign reason replaced: $(cat "$work/state/reason")"
[[ $(cat "$work/state/state") == IDLE+DRAIN ]] || fail "foreign drain resumed"
[[ $err == *"already carries another reason"*"admin maintenance"* ]] || fail "no message about the foreign drain: $err"

# 5. scontrol failures: exit 69 and a message that says what failed.
run 69 --root "$broken" --scontrol "$fake" --node nosuch
[[ $err == *"Node nosuch not found"* ]] || fail "unknown node message: $err"
run 69 --root "$broken" --scontrol /nonexistent/scontrol --node vm
[[ $err == *"cannot run"*"/nonexistent/scontrol"* ]] || fail "missing scontrol message: $err"
[[ $err != *"internal error"* && $err != *"terminate called"* ]] || fail "not a clean error: $err"
run 64 --from /dev/null --scontrol "$fake" --node vm
[[ $err == *"--drain"*"--from"* ]] || fail "--drain with --from: $err"

# 6. A report that cannot be written (a full disk) is exit 74, and the node is still drained: the verdict acts
# whether or not its report arrived.
echo IDLE > "$work/state/state"; : > "$work/state/reason"
set +e
"$gpudx" diagnose --format slurm --drain --no-driver --root "$broken" --scontrol "$fake" --node vm \
  >/dev/full 2>"$work/err"
rc=$?
set -e
[[ $rc == 74 ]] || fail "report to a full disk: exit $rc: $(cat "$work/err")"
grep -q "cannot write to standard output" "$work/err" || fail "no message for the failed report: $(cat "$work/err")"
[[ $(cat "$work/state/state") == IDLE+DRAIN ]] || fail "not drained when the report could not be written"
echo "PASS"
