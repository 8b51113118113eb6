#!/bin/sh
# Slurm HealthCheckProgram: gpudx diagnoses this node's GPU stack; on an error finding it drains the node with
# a reason naming the check, the GPU's UUID and its PCI address ("gpudx: pcie.fell_off_bus GPU-40cd403d
# 0000:00:07.0"); once healthy again it resumes the node, but only when the drain is gpudx's own.
#
# slurm.conf:
#   HealthCheckProgram=/usr/share/doc/gpudx/examples/slurm/healthcheck.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY
#
# slurmd runs this as root with almost no environment (SLURMD_NODENAME only), hence the full paths. Set
# GPUDX_ARGS for more options, e.g. GPUDX_ARGS="--expect-gpus 8" when this file is copied and edited.
GPUDX=${GPUDX:-/usr/bin/gpudx}
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

# --no-cuda: NVML answers the health questions; cuInit would add ~0.4 s on every run.
# shellcheck disable=SC2086  # GPUDX_ARGS is a list of options
"$GPUDX" diagnose --format slurm --drain --no-cuda $GPUDX_ARGS
rc=$?
# 0/1/2/3 are verdicts, already acted on by the drain. 64 (usage) and 69 (scontrol failed) mean the health
# check itself did not work: pass them on so slurmd logs "health_check failed".
case $rc in
  0|1|2|3) exit 0 ;;
  *) exit "$rc" ;;
esac
