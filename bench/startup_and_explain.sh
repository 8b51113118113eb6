#!/usr/bin/env bash
# What gpudx costs before it reads anything, and `explain` beside the kernel-log layer on the same text, each figure
# with its reference beside it and the ratio (issue #34: the built-in catalogues are compiled at build time, so
# start-up does not grow with them; explain is as fast as the kernel-log layer):
#   - `gpudx --version` against a bare process (/bin/true);
#   - `gpudx explain --text x` against `gpudx --version` (goal: <= 1.5x);
#   - `gpudx diagnose` of an empty root with an empty log against `gpudx --version`;
#   - the kernel-log collector on a quiet 400-line log (a healthy H200 node's dmesg), its own duration from the
#     snapshot's collector status, against the goal of 1 ms;
#   - `gpudx explain FILE` against `gpudx diagnose --kernel-log FILE` on LINES generated lines (goal: <= 1.5x), wall
#     time and peak RSS (/usr/bin/time);
#   - explain's peak RSS on LINES lines against a tenth of them (goal: flat, within 1.2x);
#   - the same three on a storm of LINES Xid lines whose messages all differ (tests/agent/lib.sh's xid_storm).
# Medians of RUNS runs, the two commands of a row run alternately, so that a shared machine's load falls on both.
# Each row gives its goal (a ratio to its reference, or an absolute bound) and whether this run met it; with
# BENCH_ROWS=FILE the rows are also appended there for bench/speed_goals.sh (bench/goal_rows.sh).
#
#   bench/startup_and_explain.sh [BUILD_DIR] [RUNS] [LINES]
#
# BUILD_DIR must hold gpudx and bench/gpudx_gen_kernel_log (ninja -C BUILD_DIR gpudx gpudx_gen_kernel_log).
# GPUDX=PATH measures another gpudx binary (an older build, for before/after figures) with the same inputs.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/goal_rows.sh
source "$here/bench/goal_rows.sh"
build=${1:-$here/build}
runs=${2:-21}
lines=${3:-1000000}
gpudx=${GPUDX:-$build/gpudx}
gen=$build/bench/gpudx_gen_kernel_log
for f in "$gpudx" "$gen" /usr/bin/time; do
  [[ -x $f ]] || { echo "startup_and_explain: $f missing (ninja -C $build gpudx gpudx_gen_kernel_log)" >&2; exit 64; }
done

work=$(mktemp -d /tmp/gpudx-bench-startup.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/root"
: > "$work/empty.log"
head -400 "$here/tests/fixtures/h200x1-gathered/_commands/dmesg.txt" > "$work/quiet.log"
# The generated log of bench/kernel_log_vs_grep.sh (a busy node's density of NVRM, Xid, AER and IOMMU lines), cut
# to LINES lines: about 132 bytes a line.
big=${GPUDX_BENCH_EXPLAIN_LOG:-/tmp/gpudx-bench-explain-$lines.log}
if [[ ! -s $big ]] || [[ $(wc -l < "$big") -ne $lines ]]; then
  echo "writing $lines generated kernel-log lines to $big ..." >&2
  "$gen" "$work/gen.log" $((lines * 140)) >/dev/null
  head -n "$lines" "$work/gen.log" > "$big"
  rm -f "$work/gen.log"
fi
cat "$big" > /dev/null  # page cache

us() {  # command... -> wall microseconds (exit codes are verdicts, not failures); bash's own clock, no fork of date
  local t0 t1
  t0=${EPOCHREALTIME/./}
  "$@" >/dev/null 2>&1 || true
  t1=${EPOCHREALTIME/./}
  echo $(( t1 - t0 ))
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ms() { awk -v u="$1" 'BEGIN { printf "%.2f ms", u / 1000 }'; }
row() {  # label, figure, reference label, reference figure, ratio, goal, met
  printf '%-40s %14s   %-30s %14s   %6s   %-8s %s\n' "$1" "$2" "$3" "$4" "$5" "${6:--}" "${7:--}"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }'; }
# Whether a over b is at most the goal ratio: yes or no.
met() { awk -v a="$1" -v b="$2" -v g="$3" 'BEGIN { print (b > 0 && a / b <= g) ? "yes" : "no" }'; }

# Two commands, alternately, RUNS times each: their median wall microseconds.
pair() {  # n, command A (as one string), command B
  local a=() b=() i
  for ((i = 0; i < $1; i++)); do
    a+=("$(eval us "$2")")
    b+=("$(eval us "$3")")
  done
  echo "$(printf '%s\n' "${a[@]}" | median) $(printf '%s\n' "${b[@]}" | median)"
}

printf 'gpudx start-up and explain: %s, median of %d alternating runs, %d CPUs, load %s\n\n' "$gpudx" "$runs" \
  "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
row "measured" "figure" "reference" "figure" "ratio" "goal" "met"

read -r v t <<< "$(pair "$runs" '"$gpudx" --version' /bin/true)"
row "gpudx --version" "$(ms "$v")" "/bin/true" "$(ms "$t")" "$(ratio "$v" "$t")"
goal_row "gpudx --version" "$(ms "$v" | cut -d' ' -f1)" ms "/bin/true" "$(ms "$t" | cut -d' ' -f1)" -
read -r e v <<< "$(pair "$runs" '"$gpudx" explain --text x' '"$gpudx" --version')"
row "gpudx explain --text x" "$(ms "$e")" "gpudx --version" "$(ms "$v")" "$(ratio "$e" "$v")" "<= 1.5x" \
  "$(met "$e" "$v" 1.5)"
goal_row "gpudx explain --text x" "$(ms "$e" | cut -d' ' -f1)" ms "gpudx --version" "$(ms "$v" | cut -d' ' -f1)" "ratio<=1.5"
read -r d v <<< "$(pair "$runs" \
  '"$gpudx" diagnose --root "$work/root" --kernel-log "$work/empty.log" --no-driver' '"$gpudx" --version')"
row "diagnose, empty root and log" "$(ms "$d")" "gpudx --version" "$(ms "$v")" "$(ratio "$d" "$v")"
goal_row "diagnose, empty root and log" "$(ms "$d" | cut -d' ' -f1)" ms "gpudx --version" "$(ms "$v" | cut -d' ' -f1)" -

# The collector's own duration (its status in the snapshot), not the process's.
collector=()
for ((i = 0; i < runs; i++)); do
  collector+=("$("$gpudx" snapshot --root "$work/root" --kernel-log "$work/quiet.log" --no-driver |
    python3 -c 'import json, sys
print(int(1000 * next(c["duration_ms"] for c in json.load(sys.stdin)["collectors"] if c["name"] == "kernel_log")))')")
done
c=$(printf '%s\n' "${collector[@]}" | median)
row "kernel-log collector, quiet 400 lines" "$(ms "$c")" "1 ms (absolute goal)" "$(ms 1000)" "$(ratio "$c" 1000)" \
  "< 1 ms" "$(met "$c" 1000 1)"
goal_row "kernel-log collector, quiet 400 lines" "$(ms "$c" | cut -d' ' -f1)" ms - - "value<=1"

# explain against the kernel-log layer on the same file: wall time and peak RSS, alternately; then flat in the
# input's size: explain's peak RSS on a tenth of the lines (the first tenth of the same file) against the whole
# file's (goal: the same, within 1.2x).
big_runs=$(( runs < 5 ? runs : 5 ))
m() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }  # the summary's ratios from unrounded figures
explain_rows() {  # name (what the file is), file
  local name=$1 file=$2 n et=() er=() dt=() dr=() sr=() t r e d eR dR sR i
  n=$(wc -l < "$file")
  for ((i = 0; i < big_runs; i++)); do
    /usr/bin/time -f '%e %M' -o "$work/t" "$gpudx" explain "$file" >/dev/null 2>&1 || true
    read -r t r < <(tail -n 1 "$work/t"); et+=("$t"); er+=("$r")  # after "Command exited with non-zero status"
    /usr/bin/time -f '%e %M' -o "$work/t" "$gpudx" diagnose --root "$work/root" --kernel-log "$file" --no-driver \
      >/dev/null 2>&1 || true
    read -r t r < <(tail -n 1 "$work/t"); dt+=("$t"); dr+=("$r")
  done
  e=$(m "${et[@]}"); d=$(m "${dt[@]}"); eR=$(m "${er[@]}"); dR=$(m "${dr[@]}")
  row "explain, $n $name: time" "$e s" "diagnose --kernel-log: time" "$d s" "$(ratio "$e" "$d")" "<= 1.5x" \
    "$(met "$e" "$d" 1.5)"
  goal_row "explain, $n $name: time" "$e" s "diagnose --kernel-log, same file" "$d" "ratio<=1.5"
  row "explain, $n $name: peak RSS" "$((eR / 1024)) MB" "diagnose --kernel-log: RSS" "$((dR / 1024)) MB" \
    "$(ratio "$eR" "$dR")"
  goal_row "explain, $n $name: peak RSS" "$(mb "$eR")" MB "diagnose --kernel-log, same file" "$(mb "$dR")" -
  head -n $((n / 10)) "$file" > "$work/tenth.log"
  for ((i = 0; i < big_runs; i++)); do
    /usr/bin/time -f '%e %M' -o "$work/t" "$gpudx" explain "$work/tenth.log" >/dev/null 2>&1 || true
    read -r t r < <(tail -n 1 "$work/t"); sr+=("$r")
  done
  sR=$(m "${sr[@]}")
  row "explain, $n $name: peak RSS" "$((eR / 1024)) MB" "explain, $((n / 10)) of them" "$((sR / 1024)) MB" \
    "$(ratio "$eR" "$sR")" "<= 1.2x" "$(met "$eR" "$sR" 1.2)"
  goal_row "explain peak RSS, $n vs $((n / 10)) $name" "$(mb "$eR")" MB "explain, $((n / 10)) of them" \
    "$(mb "$sR")" "ratio<=1.2"
}
explain_rows lines "$big"
# A storm as real nodes have them (tests/agent/lib.sh's xid_storm: LINES Xid lines on 8 GPUs, each naming its own
# process, so that no two messages in a row are the same and no reading of one can be reused for the next).
src=$here
# shellcheck source=tests/agent/lib.sh
source "$here/tests/agent/lib.sh"
xid_storm "$lines" > "$work/storm.log"
explain_rows "storm lines" "$work/storm.log"
