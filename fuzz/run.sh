#!/usr/bin/env bash
# fuzz/run.sh [TARGET...]: builds the libFuzzer targets (in build-asan, the clang build `make test-sanitize`
# runs the suite in, configured here the same way when missing) and runs each for FUZZ_SECONDS (default 30)
# from its seed corpora; fails when any target crashes, leaks, hangs or breaks a property. Prints one row per
# target: executions and crashes. docs/reliability.md explains.
#   FUZZ_SECONDS=20 fuzz/run.sh                 every target, 20 s each
#   fuzz/run.sh fuzz_kernel_log fuzz_matrix     only these
# Environment: FUZZ_BUILD (build dir, default build-asan), FUZZ_JOBS (targets run at once, default nproc),
# FUZZ_SEED (libFuzzer's -seed; unset, each run explores afresh; CI sets 1 so a red run repeats),
# FUZZ_CXX / FUZZ_CC (default clang++-16 / clang-16), BUILD_JOBS (compile jobs, default nproc), FUZZ_PREBUILT=1
# (the targets are built already: neither configure nor build, so that a build of the same directory may run
# beside it; .ci/run fuzzes while the sanitizer suite runs).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD:-$src/build-asan}
seconds=${FUZZ_SECONDS:-30}
seed_flag=()
[[ -n ${FUZZ_SEED:-} ]] && seed_flag=(-seed="$FUZZ_SEED")
jobs=${FUZZ_JOBS:-$(nproc)}
build_jobs=${BUILD_JOBS:-$(nproc)}

if [[ -n ${FUZZ_PREBUILT:-} ]]; then
    :
elif [[ ! -f $build/build.ninja ]]; then
    # The Makefile's sanitizer configure (SANITIZE_CONFIGURE), so `make test-sanitize` later builds the suite
    # over the same objects. -O1 with line tables: the build takes half the time of -O2 -g, and a crash report
    # still names file:line.
    cmake -S "$src" -B "$build" -G Ninja -DGPUDX_SANITIZE=ON -DGPUDX_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-16}" -DCMAKE_C_COMPILER="${FUZZ_CC:-clang-16}" >/dev/null
fi
[[ -n ${FUZZ_PREBUILT:-} ]] || cmake --build "$build" --target fuzz_targets -j "$build_jobs"

if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    targets=()
    for f in "$src"/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

"$src/fuzz/make_corpus.sh" "$build/fuzz-seeds"

# run_one TARGET: libFuzzer with the target's growing corpus (kept in the build dir, so later runs start
# from what earlier ones found) first, then the committed and generated seeds.
run_one() {
    local t=$1 name=${1#fuzz_} dir=$build/fuzz-runs/$1
    mkdir -p "$dir/corpus" "$dir/artifacts"
    rm -f "$dir"/artifacts/*
    local seeds=()
    [[ -d $src/fuzz/corpus/$name ]] && seeds+=("$src/fuzz/corpus/$name")
    [[ -d $build/fuzz-seeds/$name ]] && seeds+=("$build/fuzz-seeds/$name")
    local rc=0
    "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        "${seed_flag[@]}" -artifact_prefix="$dir/artifacts/" "$dir/corpus" "${seeds[@]}" >"$dir/log" 2>&1 || rc=$?
    echo "$rc" >"$dir/rc"
}

# Symbolized stack traces in the sanitizer reports.
if [[ -z ${ASAN_SYMBOLIZER_PATH:-} ]]; then
    for s in llvm-symbolizer-16 llvm-symbolizer llvm-symbolizer-14; do
        if command -v "$s" >/dev/null; then export ASAN_SYMBOLIZER_PATH=$(command -v "$s"); break; fi
    done
fi

running=0
for t in "${targets[@]}"; do
    [[ -x $build/fuzz/$t ]] || { echo "fuzz/run.sh: no target $t" >&2; exit 64; }
    run_one "$t" &
    running=$((running + 1))
    if ((running >= jobs)); then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true

status=0
printf '%-26s %14s %8s\n' target executions crashes
for t in "${targets[@]}"; do
    dir=$build/fuzz-runs/$t
    execs=$(grep -ho 'stat::number_of_executed_units: [0-9]*' "$dir/log" | tail -1 | awk '{print $2}')
    crashes=$(find "$dir/artifacts" -type f | wc -l)
    rc=$(cat "$dir/rc" 2>/dev/null || echo 1)
    if [[ $rc != 0 && $crashes == 0 ]]; then crashes=1; fi
    printf '%-26s %14s %8s\n' "$t" "${execs:-?}" "$crashes"
    if [[ $crashes != 0 ]]; then status=1; fi
done
for t in "${targets[@]}"; do
    dir=$build/fuzz-runs/$t
    [[ $(cat "$dir/rc" 2>/dev/null) == 0 ]] && continue
    echo
    echo "=== $t failed (exit $(cat "$dir/rc" 2>/dev/null)); log $dir/log"
    grep -A30 -m1 -E '^==[0-9]+==|runtime error|fuzz property violated|ERROR: libFuzzer' "$dir/log" | head -40 || tail -20 "$dir/log"
    for a in "$dir"/artifacts/*; do
        [[ -f $a ]] && echo "reproduce: $build/fuzz/$t $a"
    done
done
exit $status
