#!/usr/bin/env bash
# GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0) runs in MIG mode. Its two instances were destroyed
# and re-created (a MIG profile change), which gives them new UUIDs; a job script still pins the UUID of
# an instance from before, copied from an old `nvidia-smi -L`. CUDA finds no such device and, since that
# is the list's only entry, sees no GPU at all.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "nvml_device_override": {
  "1": {"mig_mode": true,
        "mig_uuids": ["MIG-5f6c1a3e-1b2d-5c4e-9a8b-0123456789ab", "MIG-a3e07b52-94c1-5d0e-8f27-6b1c9d4e2a70"]}
 }
}
JSON
cat > _commands/environment.txt <<'ENV'
SLURM_JOB_ID=5120
CUDA_VISIBLE_DEVICES=MIG-0b8e2c47-3d19-5a6f-b1e4-7c2d90f31a58
PATH=/usr/bin:/bin
ENV
