# The kernel module is 580.159.04 but the user-space driver the loader picks is 575.57.08 (a module
# upgraded without its libraries). Links are recorded the way old captures record them: a file holding
# the target name.
set -euo pipefail
for dir in usr/local/nvidia/lib64 lib; do
  mkdir -p "$dir"
  : > "$dir/libcuda.so.575.57.08"
  : > "$dir/libnvidia-ml.so.575.57.08"
  printf 'libcuda.so.575.57.08\n' > "$dir/libcuda.so.1"
  printf 'libnvidia-ml.so.575.57.08\n' > "$dir/libnvidia-ml.so.1"
done
