#!/usr/bin/env bash
# The IOMMU blocks DMA reads from GPU 0 (0000:00:06.0): translated mode with peer-to-peer traffic.
set -euo pipefail
cat >> _commands/dmesg.txt <<'LOG'
[ 2044.170001] DMAR: DRHD: handling fault status reg 2
[ 2044.170015] DMAR: [DMA Read NO_PASID] Request device [00:06.0] fault addr 0x3fffe0000 [fault reason 0x06] PTE Read access is not set
[ 2044.170210] DMAR: DRHD: handling fault status reg 3
[ 2044.170222] DMAR: [DMA Read NO_PASID] Request device [00:06.0] fault addr 0x3fffe1000 [fault reason 0x06] PTE Read access is not set
LOG
