# Slurm allocated one GPU (global index 1); the job script then set CUDA_VISIBLE_DEVICES to both UUIDs on top.
set -euo pipefail
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=1234
SLURM_STEP_ID=0
SLURM_JOB_GPUS=1
SLURM_STEP_GPUS=1
SLURM_LOCALID=0
CUDA_DEVICE_ORDER=PCI_BUS_ID
CUDA_VISIBLE_DEVICES=GPU-992cb470-9027-88f4-48a9-a9a329d6978d,GPU-40cd403d-66ba-4608-72b9-5be5031085dc
ENV
