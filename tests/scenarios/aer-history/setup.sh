#!/usr/bin/env bash
# 0000:00:06.0 counted a few PCIe errors once, since boot; the second
# reading (_samples/later) shows the same counts: history, not a warning. The node stays healthy.
set -euo pipefail
"$SCENARIO"/../aer-common.sh 2 3 2 3
