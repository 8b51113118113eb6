# The scheduler handed this node a GPU UUID it does not have (a card replaced, the inventory not updated).
set -euo pipefail
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=4321
CUDA_VISIBLE_DEVICES=GPU-1f2e3d4c-5b6a-7988-0a1b-2c3d4e5f6a7b,GPU-40cd403d-66ba-4608-72b9-5be5031085dc
ENV
