#!/bin/sh
# Slurm Epilog: after each job, check the GPUs the job just used (an Xid during the job, a card fallen off the
# bus) and drain the node before the next job lands on it; resume it if gpudx had drained it and it is healthy.
#
# slurm.conf:
#   Epilog=/usr/share/doc/gpudx/examples/slurm/epilog.sh
GPUDX=${GPUDX:-/usr/bin/gpudx}
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

# shellcheck disable=SC2086  # GPUDX_ARGS is a list of options
"$GPUDX" diagnose --format slurm --drain --no-cuda $GPUDX_ARGS >/dev/null ||
  true  # the verdict is acted on by the drain; its exit code is not the Epilog's
# A failing Epilog makes Slurm drain the node with "Epilog error": let gpudx's reason speak instead.
exit 0
