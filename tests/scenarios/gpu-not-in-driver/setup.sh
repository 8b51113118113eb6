#!/usr/bin/env bash
# nvidia is bound to 0000:00:07.0 on PCIe but the GPU failed to initialise: the driver has no record of it.
set -euo pipefail
rm -rf proc/driver/nvidia/gpus/0000:00:07.0
