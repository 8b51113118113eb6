# Two processes hold GPUs: pid 5151 belongs to a running Slurm job (its cgroup exists); pid 4242 still
# holds /dev/nvidia1 although its job's cgroup (job_1234) is gone: the job ended, the process did not.
set -euo pipefail
mkdir -p proc/4242/fd proc/5151/fd
printf 'python3\n' > proc/4242/comm
printf 'Name:\tpython3\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4242\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n' > proc/4242/status
printf '0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0\n' > proc/4242/cgroup
printf '/dev/nvidiactl' > proc/4242/fd/3
printf '/dev/nvidia1' > proc/4242/fd/4
printf '/dev/nvidia-uvm' > proc/4242/fd/5
printf 'pipe:[12345]' > proc/4242/fd/6
printf 'torchrun\n' > proc/5151/comm
printf 'Name:\ttorchrun\nState:\tR (running)\nUid:\t1001\t1001\t1001\t1001\n' > proc/5151/status
printf '0::/system.slice/slurmstepd.scope/job_1300/step_0/user/task_0\n' > proc/5151/cgroup
printf '/dev/nvidia0' > proc/5151/fd/7
mkdir -p sys/fs/cgroup/system.slice/slurmstepd.scope/job_1300/step_0/user/task_0
