# Two copies of libcuda.so.1 on the loader path with different versions: the driver's own in
# /usr/local/nvidia/lib64 (what the module runs, first in the cache) and a stale 550 one left in /lib.
# The capture's _commands/ldconfig-p.txt already lists both, /usr/local/nvidia/lib64 first.
set -euo pipefail
mkdir -p usr/local/nvidia/lib64 lib
: > usr/local/nvidia/lib64/libcuda.so.580.159.04
ln -s libcuda.so.580.159.04 usr/local/nvidia/lib64/libcuda.so.1
: > lib/libcuda.so.550.54.15
ln -s libcuda.so.550.54.15 lib/libcuda.so.1
