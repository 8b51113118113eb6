#!/usr/bin/env bash
# The XGMI links of the MI300X at 0000:a6:00.0 (KFD node 7) did not train at boot: amdgpu left it out of the hive
# the other seven share, so KFD publishes hive_id 0 for it. It still computes, but every transfer between it and
# its peers goes over PCIe, and an 8-GPU collective runs at the speed of that slowest path.
set -euo pipefail
sed -i 's/^hive_id .*/hive_id 0/' sys/devices/virtual/kfd/kfd/topology/nodes/7/properties
grep -q '^location_id 42496$' sys/devices/virtual/kfd/kfd/topology/nodes/7/properties  # 0xa600: 0000:a6:00.0
