#!/usr/bin/env bash
# Slurm integration against real daemons: a one-node cluster on 127.0.0.1 (munged, slurmctld, slurmd from the
# Debian packages) whose HealthCheckProgram is examples/slurm/healthcheck.sh over a captured node tree.
#   1. the tree gets a fault (scenario fell-off-bus): slurmd's own health check drains the node, and the
#      reason names the check, the GPU's UUID and PCI address;
#   2. the tree is healed (the h200x2 capture): the next health check resumes the node to idle;
#   3. a node drained by "someone else" (reason "admin maintenance") stays drained, healthy or not;
#   4. a job runs with Prolog=examples/slurm/prolog.sh: its allocation record carries the job id and the GPU
#      Slurm gave it (gres on stand-in device files), by UUID and PCI address.
#   5. `diagnose --slurm-job` finds a running job's process on this node (scontrol listpids) and judges it.
# Starts exactly three daemons, records their PIDs, and stops exactly those PIDs on exit.
# Usage: run.sh GPUDX SOURCE_DIR WORK_DIR [PROCESS_TARGET]. Exit 77 (skip) without the packages or root, unless
# GPUDX_REQUIRE_INTEGRATION=1.
set -euo pipefail
gpudx=$(realpath "$1") src=$(realpath "$2") work=$3 target=${4:+$(realpath "$4")}
source "$src/tests/integration/lib.sh"
export PATH="$PATH:/usr/sbin:/sbin"
require_cmd slurmctld slurmd munged munge scontrol sinfo srun python3
[[ $(id -u) == 0 ]] || skip_or_fail "the Slurm integration test must run as root (slurmd runs jobs as their users)"

rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")
# Daemon state lives in a short /tmp path: the munge socket path must fit in a sockaddr_un (108 bytes).
T=$(mktemp -d /tmp/gpudx-slurm.XXXXXX)
pids=()
cleanup() {
  local rc=$?
  local i p
  # Newest first (slurmd, slurmctld, munged): each still has the ones below it while it shuts down.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    p=${pids[i]}
    kill "$p" 2>/dev/null || continue
    for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
      echo "note: PID $p did not stop within 20 s of SIGTERM: SIGKILL" >&2
      kill -9 "$p" 2>/dev/null || true
    fi
    wait "$p" 2>/dev/null || true
  done
  cp -r "$T/log" "$work/" 2>/dev/null || true
  cp "$T"/*.log "$T/slurm.conf" "$work/" 2>/dev/null || true
  if [[ $rc != 0 && $rc != 77 ]]; then
    echo "--- logs kept in $work/log; last lines of slurmd and slurmctld:" >&2
    tail -n 25 "$T/log/slurmd.log" "$T/log/slurmctld.log" "$T/healthcheck.log" >&2 2>/dev/null || true
  fi
  rm -rf "$T"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir -p "$T/munge" "$T/munge-run" "$T/state" "$T/spool" "$T/log" "$T/dev"
chmod 700 "$T/munge"
chmod 755 "$T/munge-run"
H=$(hostname -s)
broken=$T/trees/fell-off-bus
healthy=$T/trees/h200x2
build_scenario "$src/tests/fixtures/h200x2" "$src/tests/scenarios/fell-off-bus" "$broken"
cp -a "$src/tests/fixtures/h200x2" "$healthy"
echo "$healthy" > "$T/current-root"

# --- munge
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
sock=$T/munge-run/munge.socket
munged -F --force --key-file="$T/munge/munge.key" --socket="$sock" --pid-file="$T/munge-run/munged.pid" \
  --seed-file="$T/munge/seed" --log-file="$T/log/munged.log" >"$T/log/munged.out" 2>&1 &
pids+=($!)
wait_for 20 test -S "$sock" || fail "munged did not create $sock"
munge -n -S "$sock" | unmunge -S "$sock" >/dev/null || fail "munge round trip failed"

# --- Slurm configuration: one node, this host, on 127.0.0.1.
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [[ $slurmd_port == "$ctld_port" ]]; do slurmd_port=$(free_port); done
# Two stand-in GPU device files for gres (Slurm wants character devices; /dev/null's numbers, nothing real).
gres=0
if mknod "$T/dev/nvidia0" c 1 3 2>/dev/null && mknod "$T/dev/nvidia1" c 1 3 2>/dev/null; then
  gres=1
  echo "Name=gpu File=$T/dev/nvidia[0-1]" > "$T/gres.conf"
else
  echo "note: mknod not permitted here: the job runs without gres (the record then lists every GPU)" >&2
fi
scontrol_bin=$(command -v scontrol)
cat > "$T/healthcheck-wrapper.sh" <<WRAP
#!/bin/sh
# slurmd's HealthCheckProgram for this test: the example script over the tree named in current-root.
echo "health check \$(date +%T) node=\$SLURMD_NODENAME root=\$(cat $T/current-root)" >> $T/healthcheck.log
export SLURM_CONF=$T/slurm.conf GPUDX=$gpudx PATH=$(dirname "$scontrol_bin"):/usr/bin:/bin
export GPUDX_ARGS="--no-driver --root \$(cat $T/current-root)"
$src/examples/slurm/healthcheck.sh >> $T/healthcheck.log 2>&1
rc=\$?
echo "health check exit \$rc" >> $T/healthcheck.log
exit \$rc
WRAP
cat > "$T/prolog-wrapper.sh" <<WRAP
#!/bin/sh
# The example Prolog, with gpudx, the record file and the captured node of this test.
GPUDX=$gpudx GPUDX_RECORD_FILE=$T/allocations.jsonl GPUDX_RECORD_ARGS="--no-driver --root $healthy" \
  exec $src/examples/slurm/prolog.sh
WRAP
cat > "$T/epilog-wrapper.sh" <<WRAP
#!/bin/sh
echo "epilog job=\$SLURM_JOB_ID" >> $T/epilog.log
SLURM_CONF=$T/slurm.conf GPUDX=$gpudx GPUDX_ARGS="--no-driver --root $healthy" PATH=$(dirname "$scontrol_bin"):/usr/bin:/bin \
  exec $src/examples/slurm/epilog.sh
WRAP
chmod +x "$T"/*-wrapper.sh
cat > "$T/slurm.conf" <<CONF
ClusterName=gpudxtest
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdTimeout=60
HealthCheckProgram=$T/healthcheck-wrapper.sh
HealthCheckInterval=2
HealthCheckNodeState=ANY
Prolog=$T/prolog-wrapper.sh
Epilog=$T/epilog-wrapper.sh
$( ((gres)) && echo "GresTypes=gpu" )
NodeName=$H NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=100 $( ((gres)) && echo "Gres=gpu:2" ) State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$T/slurm.conf

# --- daemons, in the foreground (-D) so that $! is the daemon itself.
slurmctld -D -i -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
pids+=($!)
wait_for 30 scontrol ping || fail "slurmctld did not answer scontrol ping"
slurmd -D -N "$H" -f "$SLURM_CONF" >"$T/log/slurmd.out" 2>&1 &
pids+=($!)

node_field() { scontrol show node "$H" | sed -n "s/^ *$1=//p" | head -n1; }
node_state() { scontrol show node "$H" | grep -o 'State=[^ ]*' | head -n1 | cut -d= -f2; }
is_idle() { [[ $(node_state) == IDLE ]]; }
health_runs() { local n; n=$(grep -c '^health check [0-9]' "$T/healthcheck.log" 2>/dev/null) || true; echo "${n:-0}"; }
health_runs_reach() { (( $(health_runs) >= $1 )); }

wait_for 60 is_idle || fail "node $H never became idle: $(node_state)"
echo "node $H idle; slurmd runs the health check every 2 s"

# 1. A fault: slurmd's next health check drains the node.
echo "$broken" > "$T/current-root"
drained_by_gpudx() { [[ $(node_state) == *DRAIN* && $(node_field Reason) == gpudx:* ]]; }
wait_for 60 drained_by_gpudx || fail "not drained after the fault: state $(node_state), reason '$(node_field Reason)'"
reason=$(node_field Reason)
reason=${reason% \[*}
echo "drained by slurmd's health check: State=$(node_state) Reason=$reason"
[[ $reason == "gpudx: pcie.fell_off_bus GPU-40cd403d"*" 0000:00:07.0"* ]] || fail "unexpected reason: $reason"
(( ${#reason} <= 80 )) || fail "reason is ${#reason} characters"
sinfo_reason=$(sinfo -h -R -o '%E' -n "$H")
[[ $sinfo_reason == "$reason" ]] || fail "sinfo -R shows '$sinfo_reason'"

# 2. Healed: the next health check resumes the node.
echo "$healthy" > "$T/current-root"
wait_for 60 is_idle || fail "not resumed after healing: state $(node_state), reason '$(node_field Reason)'"
[[ -z $(node_field Reason) ]] || fail "reason left after resume: $(node_field Reason)"
echo "resumed by slurmd's health check: State=$(node_state)"

# 3. Someone else's drain: left alone for several health checks, healthy and broken.
scontrol update nodename="$H" state=drain reason="admin maintenance"
for root in "$healthy" "$broken"; do
  echo "$root" > "$T/current-root"
  runs=$(health_runs)
  wait_for 60 health_runs_reach $((runs + 3)) || fail "health check stopped running"
  [[ $(node_state) == *DRAIN* ]] || fail "the admin's drain was undone (root $root): $(node_state)"
  r=$(node_field Reason)
  [[ $r == "admin maintenance"* ]] || fail "the admin's reason was replaced (root $root): $r"
done
grep -q "already carries another reason" "$T/healthcheck.log" || fail "gpudx did not say why it left the node alone"
echo "admin drain kept through $(health_runs) health checks: Reason=$(node_field Reason)"
echo "$healthy" > "$T/current-root"
scontrol update nodename="$H" state=resume
wait_for 30 is_idle || fail "node did not return after the admin's resume: $(node_state)"

# 4. A job, with the example Prolog recording its allocation.
gres_opt=()
((gres)) && gres_opt=(--gres=gpu:1)
job_id=$(timeout 120 srun -N1 -n1 "${gres_opt[@]}" --job-name=gpudx-record printenv SLURM_JOB_ID) ||
  fail "srun failed"
echo "job $job_id ran"
[[ -s $T/allocations.jsonl ]] || fail "the prolog wrote no record"
tail -n1 "$T/allocations.jsonl" | tee "$work/record.json"
python3 - "$T/allocations.jsonl" "$job_id" "$H" "$gres" <<'PY'
import json, sys
path, job, host, gres = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
rec = json.loads(open(path).read().splitlines()[-1])
assert rec["kind"] == "gpudx-allocation-record", rec
assert rec["job_id"] == job, f"job id {rec['job_id']} != {job}"
assert rec["node"] == host, rec["node"]
assert rec["context"] == "prolog_slurmd", rec["context"]
if gres:
    assert rec["allocation"]["variable"] == "SLURM_JOB_GPUS" and rec["allocation"]["value"] == "0", rec["allocation"]
    assert rec["gpus"] == [{"local_ordinal": 0, "uuid": "GPU-992cb470-9027-88f4-48a9-a9a329d6978d",
                            "pci": "0000:00:06.0", "minor": 0, "mig_uuid": None, "entry": "0"}], rec["gpus"]
else:
    assert [g["pci"] for g in rec["gpus"]] == ["0000:00:06.0", "0000:00:07.0"], rec["gpus"]
PY
wait_for 30 grep -q "epilog job=$job_id" "$T/epilog.log" || fail "the epilog did not run"
wait_for 30 is_idle || fail "node not idle after the job and epilog: $(node_state) $(node_field Reason)"

# 5. diagnose --slurm-job: a running job's process on this node, found through `scontrol listpids` (slurmd
# answers it; proctrack/linuxproc above), judged as it sees the GPU stack. Its stdin is srun's, held open by
# this script: closing it ends the job, no sleep.
if [[ -n $target ]]; then
  coproc JOB { exec timeout 120 srun -N1 -n1 --job-name=gpudx-pid "$target"; }
  read -r word tpid <&"${JOB[0]}" || fail "the job's process did not start"
  [[ $word == ready ]] || fail "the job's process said: $word $tpid"
  pid_job=$(squeue -h -n gpudx-pid -o %i | head -n1)
  [[ -n $pid_job ]] || fail "squeue does not list the job"
  set +e
  "$gpudx" diagnose --no-driver --slurm-job "$pid_job" --format json > "$work/slurm-job.json"
  rc=$?
  set -e
  exec {JOB[1]}>&-
  wait "$JOB_PID" 2>/dev/null || true
  # The verdict is this machine's own (a machine without a GPU has pcie.no_gpu, exit 1); what this step checks is
  # that the job's process was found and judged: not 3 (nothing of what was asked judged), not a usage error.
  [[ $rc == 0 || $rc == 1 || $rc == 2 ]] || fail "diagnose --slurm-job $pid_job: exit $rc"
  python3 - "$work/slurm-job.json" "$pid_job" "$tpid" <<'PY'
import json, sys
doc, job, pid = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
views = {p["pid"]: p for p in doc["processes"]}
assert pid in views, f"process {pid} of job {job} not judged: {sorted(views)}"
assert views[pid]["state"] == "read" and views[pid]["slurm_job_id"] == job, views[pid]
PY
  echo "diagnose --slurm-job $pid_job judged its process $tpid"
fi
echo "PASS"
