#!/bin/sh
# Slurm Prolog: record which physical GPUs this job was given (UUID, PCI address, the CUDA ordinal the job will
# see), with job id, user and container image, as one JSON line in /var/log/gpudx/allocations.jsonl. When a
# job later reports "GPU 1 failed", the record says which card that was (docs/integration.md).
#
# slurm.conf:
#   Prolog=/usr/share/doc/gpudx/examples/slurm/prolog.sh
#
# slurmd runs the Prolog as root with the job's SLURM_JOB_ID, SLURM_JOB_GPUS, SLURM_JOB_USER... set.
GPUDX=${GPUDX:-/usr/bin/gpudx}
GPUDX_RECORD_FILE=${GPUDX_RECORD_FILE:-/var/log/gpudx/allocations.jsonl}

# --no-driver: the driver's procfs already gives UUID and PCI address; drop it to record MIG instance UUIDs
# (NVML then adds ~0.1-0.3 s to each job start).
# shellcheck disable=SC2086  # GPUDX_RECORD_ARGS is a list of options
"$GPUDX" record --file "$GPUDX_RECORD_FILE" ${GPUDX_RECORD_ARGS:---no-driver} ||
  echo "gpudx record failed for job ${SLURM_JOB_ID:-?}; the job runs anyway" >&2
# A failing Prolog drains the node and requeues the job: a missing record is never worth that.
exit 0
