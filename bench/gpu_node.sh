# Sourced by the benchmarks that need a GPU node (bench/diagnose_vs_driver.sh, bench/driver_settle.sh).

# gpu_node_setup NAME: exits 77 (skipped) where there is no nvidia-smi or libcuda.so.1 does not start; else makes
# $work (removed on exit), compiles bench/cuda_floor.c into $floor, and sets $gpus to the GPUs it counted.
gpu_node_setup() {
  local name=$1
  command -v nvidia-smi >/dev/null || { echo "$name: no nvidia-smi here (not a GPU node): skipped"; exit 77; }
  work=$(mktemp -d "/tmp/gpudx-bench-$name.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  floor=$work/cuda_floor
  ${CC:-cc} -O2 -o "$floor" "$here/bench/cuda_floor.c" -ldl ||
    { echo "$name: could not compile bench/cuda_floor.c"; exit 77; }
  gpus=$("$floor") || { echo "$name: libcuda.so.1 did not start (status $?): skipped"; exit 77; }
}

# us COMMAND...: the command's wall time in microseconds, its output and exit code dropped (a verdict, not a failure).
us() { local t0=${EPOCHREALTIME/./}; "$@" >/dev/null 2>&1; echo $(( ${EPOCHREALTIME/./} - t0 )); }
