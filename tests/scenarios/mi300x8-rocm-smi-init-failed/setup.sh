#!/usr/bin/env bash
# rsmi_init fails with RSMI_STATUS_PERMISSION: the user running the health check cannot read the files ROCm SMI
# needs. The GPUs themselves are fine (KFD lists all eight).
set -euo pipefail
mv _driver/answers.json _driver/recorded.json
echo '{"base": "recorded.json", "faults": [{"call": "rsmi_init", "result": 4}]}' > _driver/answers.json
