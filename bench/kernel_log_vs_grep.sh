#!/usr/bin/env bash
# Times gpudx's kernel-log scan against grep -E of the same words over a generated log (default 1 GiB)
# with a busy GPU node's density of NVRM, Xid, AER and IOMMU lines, and prints a table with the ratio.
#
#   bench/kernel_log_vs_grep.sh [BUILD_DIR] [SIZE_MB]      (BUILD_DIR default: build, SIZE_MB: 1024)
#
# gpudx runs as an operator would: `gpudx diagnose --root EMPTY --kernel-log FILE --no-driver`, so the
# time includes start-up, every other (empty) collector, the checks and the report. The log is written
# once to /tmp and reused while its size matches; the page cache is warmed before timing.
set -euo pipefail

build=${1:-build}
size_mb=${2:-1024}
gpudx=$build/gpudx
gen=$build/bench/gpudx_gen_kernel_log
log=${GPUDX_BENCH_LOG:-/tmp/gpudx-bench-kernel.log}
runs=${GPUDX_BENCH_RUNS:-3}
# The words gpudx keeps lines for: the parser's own topics and the catalogue's (signature gates, result-code and
# component words), as `gpudx explain --list --format json` lists them (kernel_log_words), regex metacharacters
# escaped for grep -E.

for tool in "$gpudx" "$gen"; do
  [[ -x $tool ]] || { echo "missing $tool: build it with 'ninja -C $build gpudx gpudx_gen_kernel_log'" >&2; exit 1; }
done

pattern=$("$gpudx" explain --list --format json | python3 -c '
import json, re, sys
words = json.load(sys.stdin)["kernel_log_words"]
print("|".join(re.sub(r"([][.*+?(){}|^$\\])", r"\\\1", w) for w in sorted(set(words))))')

bytes=$((size_mb * 1024 * 1024))
if [[ ! -s $log ]] || (( $(stat -c %s "$log") < bytes )) || (( $(stat -c %s "$log") > bytes + 4096 )); then
  echo "writing $size_mb MiB synthetic kernel log to $log ..." >&2
  "$gen" "$log" "$bytes"
fi
cat "$log" > /dev/null  # page cache

empty=$(mktemp -d /tmp/gpudx-bench-root.XXXXXX)
# Output goes to a real file: GNU grep stops at the first match when its output is /dev/null, which would
# time reading a few kilobytes instead of the whole log.
sink=$(mktemp /tmp/gpudx-bench-out.XXXXXX)
trap 'rm -rf "$empty" "$sink"' EXIT

# Best of $runs wall times, in milliseconds.
best_ms() {
  local best=0 t0 t1 ms i
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    "$@" > "$sink" 2>&1 || true   # grep exits 1 on no match, diagnose 1 on error findings
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    if (( best == 0 || ms < best )); then best=$ms; fi
  done
  echo "$best"
}

lines=$(wc -l < "$log")
grep_c=$(LC_ALL=C grep -Ec "$pattern" "$log" || true)
grep_ci=$(LC_ALL=C grep -Eic "$pattern" "$log" || true)

t_gpudx=$(best_ms "$gpudx" diagnose --root "$empty" --kernel-log "$log" --no-driver --format json)
t_grep_c=$(best_ms env LC_ALL=C grep -Ec "$pattern" "$log")
t_grep_ci=$(best_ms env LC_ALL=C grep -Eic "$pattern" "$log")
t_grep_utf8=$(best_ms env LC_ALL=C.UTF-8 grep -Eic "$pattern" "$log")

kept=$("$gpudx" snapshot --root "$empty" --kernel-log "$log" --no-driver 2>/dev/null | python3 -c '
import json, sys
k = json.load(sys.stdin)["kernel_log"]
print(len(k["lines"]) + k.get("lines_over_cap", 0) + k.get("lines_dropped", 0))' 2>/dev/null || echo "?")

mb=$(( $(stat -c %s "$log") / 1048576 ))
rate() { if (( $1 > 0 )); then echo $(( mb * 1000 / $1 )); else echo "-"; fi; }
ratio() { awk -v g="$1" -v x="$t_gpudx" 'BEGIN { if (x > 0) printf "%.2fx", g / x; else print "-" }'; }

printf '\n%s MiB, %s lines; grep -E matches %s lines, grep -Ei %s, gpudx keeps %s (best of %s runs)\n\n' \
  "$mb" "$lines" "$grep_c" "$grep_ci" "$kept" "$runs"
printf '%-52s %9s %9s %14s\n' "command" "ms" "MiB/s" "grep/gpudx"
printf '%-52s %9s %9s %14s\n' "gpudx diagnose --kernel-log (whole run)" "$t_gpudx" "$(rate "$t_gpudx")" "1.00x"
printf '%-52s %9s %9s %14s\n' "LC_ALL=C grep -Ec (case-sensitive)" "$t_grep_c" "$(rate "$t_grep_c")" "$(ratio "$t_grep_c")"
printf '%-52s %9s %9s %14s\n' "LC_ALL=C grep -Eic (same matching as gpudx)" "$t_grep_ci" "$(rate "$t_grep_ci")" "$(ratio "$t_grep_ci")"
printf '%-52s %9s %9s %14s\n' "LC_ALL=C.UTF-8 grep -Eic (an operator's shell)" "$t_grep_utf8" "$(rate "$t_grep_utf8")" "$(ratio "$t_grep_utf8")"
printf '\nA ratio above 1.00x means gpudx is faster than that grep.\n'
