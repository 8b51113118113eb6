#!/usr/bin/env bash
# mlx4_0 port 1 counts symbol and receive errors, and they grow between the two readings (the later one kept by
# gather under _samples/later, docs/capture-format.md): a marginal cable. mlx4_0 port 2 counted a few once
# (history only).
set -euo pipefail
"$SCENARIO"/../ib-common.sh
ports=sys/class/infiniband/mlx4_0/ports
later=_samples/later/$ports
mkdir -p "$later/1/counters" "$later/2/counters"
for p in 1 2; do cp "$ports/$p/counters/"* "$later/$p/counters/"; done
echo 12 > "$ports/1/counters/symbol_error"
echo 3 > "$ports/1/counters/port_rcv_errors"
echo 40 > "$later/1/counters/symbol_error"
echo 5 > "$later/1/counters/port_rcv_errors"
echo 2 > "$ports/2/counters/link_error_recovery"
echo 2 > "$later/2/counters/link_error_recovery"
