#!/usr/bin/env bash
# Strings from the node that try to break the outputs: a process holding /dev/nvidia1 after its job ended is
# named with a quote, a backslash, a newline, braces and an invalid UTF-8 byte, and the driver's record of
# 0000:00:07.0 carries a UUID with the characters that end a Prometheus label ("}) and an invalid byte.
# Its finding names that GPU, so the UUID reaches the labels of gpudx_finding; the exposition must stay
# valid (tests/integration/prometheus/run.sh runs promtool and node_exporter on it).
set -euo pipefail
info=proc/driver/nvidia/gpus/0000:00:07.0/information
sed -i 's/^GPU UUID:.*/GPU UUID: \t GPU-40cd403d"},evil="1\\} 1 \xff/' "$info"
mkdir -p proc/4242/fd
printf 'py"th\\on\n}{evil="x"} 1\xff\n' > proc/4242/comm
printf 'Name:\tpython3\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4242\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n' > proc/4242/status
printf '0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0\n' > proc/4242/cgroup
printf '/dev/nvidiactl' > proc/4242/fd/3
printf '/dev/nvidia1' > proc/4242/fd/4
# The cgroup tree is mounted and the job's cgroup is gone: the holder is stuck (an error naming the GPU).
mkdir -p sys/fs/cgroup/system.slice/slurmstepd.scope
