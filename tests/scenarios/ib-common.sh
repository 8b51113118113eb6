#!/usr/bin/env bash
# Shared by the ib-* scenarios: the InfiniBand tree of real hosts (tests/fixtures/infiniband-procfs, from
# prometheus/procfs) copied into the h200x2 capture, and mlx5_0 given a PCI function beside the GPUs: a
# ConnectX-6 (15b3:101b, class 0207) at 0000:00:0c.0 on the same root bus, NUMA node unknown as in this VM.
set -euo pipefail
mkdir -p sys/class
cp -r "$FIXTURES/infiniband-procfs/sys/class/infiniband" sys/class/
addr=0000:00:0c.0 dev=sys/devices/pci0000:00/0000:00:0c.0
mkdir -p "$dev"
echo 0x020700 > "$dev/class"
echo 0x15b3 > "$dev/vendor"
echo 0x101b > "$dev/device"
echo -1 > "$dev/numa_node"
echo "../../../bus/pci/drivers/mlx5_core" > "$dev/driver"
printf "DRIVER=mlx5_core\nPCI_CLASS=20700\nPCI_ID=15B3:101B\nPCI_SUBSYS_ID=15B3:0007\nPCI_SLOT_NAME=%s\n" "$addr" > "$dev/uevent"
echo "../../../devices/pci0000:00/$addr" > "sys/bus/pci/devices/$addr"
# Recorded links are files holding their target (docs/capture-format.md).
echo "../../../devices/pci0000:00/$addr" > sys/class/infiniband/mlx5_0/device
