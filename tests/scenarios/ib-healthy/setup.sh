#!/usr/bin/env bash
# The InfiniBand adapters of real hosts as prometheus/procfs keeps them (all ports ACTIVE, every link error counter
# 0) beside the h200x2 GPUs: no finding, and mlx5_0 is placed on the GPUs' root complex.
set -euo pipefail
"$SCENARIO"/../ib-common.sh
