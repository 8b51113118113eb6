#!/usr/bin/env bash
# amdgpu binds all eight MI300Xs (each has its DRM card and render node), but KFD fails to add the fourth,
# 0000:65:00.0, to its topology ("device 1002:74a1 NOT added due to errors"): the GPUs after it take the node
# numbers one lower, as KFD numbers nodes in the order it adds them. rocminfo and HIP see seven GPUs; amd-smi
# and the render node still show eight.
set -euo pipefail
nodes=sys/devices/virtual/kfd/kfd/topology/nodes
rm -rf "$nodes/5"
for n in 6 7 8 9; do mv "$nodes/$n" "$nodes/$((n - 1))"; done
# KFD's line for that GPU is the one after amdgpu probed 0000:65:00.0.
awk '/amdgpu 0000:65:00.0: enabling device/ { seen = 1 }
     seen && /kfd kfd: amdgpu: added device 1002:74a1/ { sub(/added device 1002:74a1/, "device 1002:74a1 NOT added due to errors"); seen = 0 }
     { print }' _commands/dmesg.txt > _commands/dmesg.txt.new
mv _commands/dmesg.txt.new _commands/dmesg.txt
grep -q "NOT added" _commands/dmesg.txt
