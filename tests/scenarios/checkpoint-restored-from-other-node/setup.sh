#!/usr/bin/env bash
# A CUDA process checkpointed on an HGX node, whose GPUs sit at 0000:1b:00.0 and 0000:43:00.0, was restored
# here onto GPU-992cb470-9027-88f4-48a9-a9a329d6978d and GPU-40cd403d-66ba-4608-72b9-5be5031085dc. Its
# UUIDs follow the GPUs of this node, but cuDeviceGetPCIBusId and the PCI attributes still answer the
# source node's addresses, which do not exist here. The CUDA answers are those the restored process gets.
set -euo pipefail
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "cuda_device_override": {
  "0": {"bus_id": "0000:1B:00.0", "pci": "0000:1b:00.0", "attr_bus": 27, "attr_device": 0},
  "1": {"bus_id": "0000:43:00.0", "pci": "0000:43:00.0", "attr_bus": 67, "attr_device": 0}
 }
}
JSON
