#!/usr/bin/env bash
# 0000:00:06.0 logs PCIe errors while gpudx watches: its second AER reading (kept by gather under
# _samples/later, docs/capture-format.md) shows BadTLP 3 -> 7 (correctable) and CmpltTO 2 -> 3 (non-fatal).
set -euo pipefail
"$SCENARIO"/../aer-common.sh 2 3 3 7
