#!/usr/bin/env bash
# The driver package was purged (ahead of a reinstall that never ran): /lib/modules/<release> no longer
# holds an nvidia module, but 580.159.04 stays loaded in memory. This boot works; the next one has no driver.
set -euo pipefail
release=$(cat proc/sys/kernel/osrelease)
mkdir -p "lib/modules/$release/kernel/drivers/net/ethernet/mellanox/mlx5/core"
: > "lib/modules/$release/kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko"
echo "kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko:" > "lib/modules/$release/modules.dep"
