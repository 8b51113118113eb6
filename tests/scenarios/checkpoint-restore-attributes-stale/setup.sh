#!/usr/bin/env bash
# The same swap restore as checkpoint-restore-swapped, in a process whose bus-id strings were corrected
# (an interposer rewrote cuDeviceGetPCIBusId to follow the UUID) but whose PCI attributes were not:
# cuDeviceGetAttribute(PCI_DEVICE_ID) still gives the old card's device number (6 for ordinal 0 now on
# 0000:00:07.0, 7 for ordinal 1 now on 0000:00:06.0). Code that builds the address from the attributes, as
# the CUDA runtime's cudaDeviceProp does, names the other card.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "cuda_device_override": {
  "0": {"uuid": "GPU-40cd403d-66ba-4608-72b9-5be5031085dc", "bus_id": "0000:00:07.0", "pci": "0000:00:07.0",
        "attr_device": 6},
  "1": {"uuid": "GPU-992cb470-9027-88f4-48a9-a9a329d6978d", "bus_id": "0000:00:06.0", "pci": "0000:00:06.0",
        "attr_device": 7}
 }
}
JSON
