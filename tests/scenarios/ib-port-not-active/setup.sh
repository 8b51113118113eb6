#!/usr/bin/env bash
# mlx5_0 port 1 is cabled and trained (LinkUp) but stays INIT: no subnet manager configured it, so it carries no
# traffic although the link light is on.
set -euo pipefail
"$SCENARIO"/../ib-common.sh
echo "5: LinkUp" > sys/class/infiniband/mlx5_0/ports/1/phys_state
echo "2: INIT" > sys/class/infiniband/mlx5_0/ports/1/state
