#!/usr/bin/env bash
# The InfiniBand adapters of real hosts (ib-common.sh) in a node whose class expects four InfiniBand ports at
# 100 Gb/sec (matrix.toml beside this file). hfi1_0 port 1 runs at 100 Gb/sec (EDR) and conforms; mlx4_0's two
# ports run at 40 Gb/sec (QDR): lower than the class's rate; mlx5_0 port 1 is down (Polling, DOWN): not ACTIVE,
# an error from the class instead of ib.port_down's info.
set -euo pipefail
"$SCENARIO"/../ib-common.sh
echo "2: Polling" > sys/class/infiniband/mlx5_0/ports/1/phys_state
echo "1: DOWN" > sys/class/infiniband/mlx5_0/ports/1/state
