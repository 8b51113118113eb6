# bench/goal_rows.sh: sourced by the benchmarks that measure a goal of issue #34, so that bench/speed_goals.sh can
# print every figure in one table. Each benchmark still prints its own table; with BENCH_ROWS=FILE set it also
# appends one tab-separated line per goal to FILE:
#   figure  measured  unit  reference  reference-value  ratio  goal  met
# goal_row FIGURE VALUE UNIT REFERENCE REFERENCE_VALUE GOAL
#   GOAL: "ratio<=X" (VALUE / REFERENCE_VALUE at most X), "value<=X" (VALUE at most X, in UNIT), or "-" (a
#   figure shown beside its reference, no goal). REFERENCE_VALUE may be "-" for an absolute goal.
# shellcheck shell=bash
goal_row() {
  [[ -n ${BENCH_ROWS:-} ]] || return 0
  awk -v f="$1" -v v="$2" -v u="$3" -v r="$4" -v rv="$5" -v g="$6" 'BEGIN {
    ratio = (rv != "-" && rv + 0 > 0) ? sprintf("%.2fx", v / rv) : "-"
    met = "-"
    if (g ~ /^ratio<=/) { x = substr(g, 8) + 0; met = (ratio != "-" && v / rv <= x) ? "yes" : "no" }
    else if (g ~ /^value<=/) { x = substr(g, 8) + 0; met = (v + 0 <= x) ? "yes" : "no" }
    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f, v, u, r, rv, ratio, g, met
  }' >>"$BENCH_ROWS"
}
