#!/usr/bin/env bash
# ROCm SMI lists seven of the eight GPUs: the one at 0000:65:00.0 (KFD node 5, renderD131) is in the KFD
# topology, so ROCr and HIP use it, but monitoring built on ROCm SMI (rocm-smi, exporters) does not see it.
set -euo pipefail
mv _driver/answers.json _driver/recorded.json
echo '{"base": "recorded.json", "rocm_smi_drop_devices": [3]}' > _driver/answers.json
