#!/usr/bin/env bash
# Page retirement pending on GPU-40cd403d-66ba-4608-72b9-5be5031085dc (0000:00:07.0): a page was marked for
# retirement after a double-bit error and takes effect only at the next GPU reset.
# The H200s of the capture use row remapping, and their NVML answers the retired-pages query with "Not
# Supported" (see h200x2.json); GPUs with page retirement (Volta and older) answer it. This scenario makes
# 0000:00:07.0 answer the way such a card does; everything else is the capture as recorded.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "nvml_device_override": {
  "1": {"retired_pages_pending": 1, "unsupported": []}
 }
}
JSON
