#!/usr/bin/env bash
# What `--pid` of one process adds to `gpudx diagnose --no-driver` on this machine: the two run interleaved, RUNS
# times each, in one command; the table gives each median, their ratio and the difference, and the goal
# (docs/process-view.md): at most 5 ms added. Exit 1 when the goal is missed.
# The process is tests/e2e/process_target with the stand-in libcuda loaded from an application folder.
# usage: bench/bench_diagnose_pid.sh [BUILD_DIR] [RUNS]
set -u
build=${1:-build} runs=${2:-40}
gpudx=$build/gpudx target=$build/tests/e2e/gpudx_process_target standins=$build/tests/standins/lib
for f in "$gpudx" "$target" "$standins/libcuda.so.1"; do
  [[ -e $f ]] || { echo "missing $f (build first: make build)"; exit 2; }
done
# Two processes: one started with this shell's environment (its loader view is the node's: the common case of a
# job on the host), one with the stand-in libcuda loaded from an application folder on its LD_LIBRARY_PATH (its
# loader view is read again).
fifos=$(mktemp -d)
cuda_in=
trap 'exec {same_in}>&- {app_in}>&-; [[ -n $cuda_in ]] && exec {cuda_in}>&-; wait; rm -rf "$fifos"' EXIT
mkfifo "$fifos/same.in" "$fifos/same.out" "$fifos/app.in" "$fifos/app.out" "$fifos/cuda.in" "$fifos/cuda.out"
"$target" < "$fifos/same.in" > "$fifos/same.out" &
exec {same_in}> "$fifos/same.in"
read -r word same < "$fifos/same.out"
[[ $word == ready ]] || { echo "the first target did not start"; exit 2; }
LD_LIBRARY_PATH=$standins "$target" libcuda.so.1 < "$fifos/app.in" > "$fifos/app.out" &
exec {app_in}> "$fifos/app.in"
read -r word app < "$fifos/app.out"
[[ $word == ready ]] || { echo "the second target did not start"; exit 2; }
# On a GPU node a third: a process that loaded the host's libcuda and ran cuInit, so it holds the GPUs open.
cuda=
"$target" libcuda.so.1 --cuinit < "$fifos/cuda.in" > "$fifos/cuda.out" 2>/dev/null &
exec {cuda_in}> "$fifos/cuda.in"
read -r word cuda < "$fifos/cuda.out"
[[ $word == ready ]] || { cuda=; echo "(no CUDA process case: the host's libcuda.so.1 did not load or cuInit failed)"; }

# Wall time on a shared build machine swings by more than the 5 ms measured, so beside the wall medians the table
# gives the CPU time (user + system, from wait4) each run cost, which contention does not inflate.
python3 - "$gpudx" "$runs" "$same" "$app" $cuda <<'PY'
import os, statistics, subprocess, sys, time
gpudx, runs, same, app = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
cases = [("gpudx diagnose --no-driver (reference)", []),
         ("  --pid: a process with this shell's environment", ["--pid", same]),
         ("  --pid: a process with libcuda from an app folder", ["--pid", app])]
if len(sys.argv) > 5:
    cases.append(("  --pid: a process that ran cuInit (GPUs open)", ["--pid", sys.argv[5]]))
wall, cpu = {c: [] for c, _ in cases}, {c: [] for c, _ in cases}
for _ in range(runs):
    for name, extra in cases:
        t0 = time.perf_counter()
        p = subprocess.Popen([gpudx, "diagnose", "--no-driver"] + extra, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        wall[name].append((time.perf_counter() - t0) * 1000)
        cpu[name].append((ru.ru_utime + ru.ru_stime) * 1000)
ref = cases[0][0]
rw, rc = statistics.median(wall[ref]), statistics.median(cpu[ref])
print(f"{'what (median of %d, interleaved)' % runs:<52} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6} {'CPU added':>9}")
missed = False
for name, _ in cases:
    w, c = statistics.median(wall[name]), statistics.median(cpu[name])
    print(f"{name:<52} {w:8.2f} {w / rw:6.2f} {c:8.2f} {c / rc:6.2f} {c - rc:9.2f}")
    missed |= c - rc > 5
print("goal (docs/process-view.md): --pid of one process adds at most 5 ms (CPU time): " + ("missed" if missed else "met"))
sys.exit(1 if missed else 0)
PY
