#!/usr/bin/env bash
# The baseboard's four NVSwitches (0000:00:08.0 to 0000:00:0b.0) are on this node's PCIe bus and
# nvidia-fabricmanager ran, but registration went wrong: GPU-992cb470-9027-88f4-48a9-a9a329d6978d
# (0000:00:06.0) finished it with an error status, and for GPU-40cd403d-66ba-4608-72b9-5be5031085dc
# (0000:00:07.0) the fabric query itself fails (NVML "Unknown Error"), so its state is unknown.
set -euo pipefail
# add_nvswitch ADDR: an NVSwitch (10de:22a3, class 0680) on the root bus, bound to nvidia-nvswitch.
add_nvswitch() {
    local addr=$1 dev=sys/devices/pci0000:00/$1
    mkdir -p "$dev"
    echo 0x068000 > "$dev/class"
    echo 0x10de > "$dev/vendor"
    echo 0x22a3 > "$dev/device"
    echo 0x10de > "$dev/subsystem_vendor"
    echo 0x1796 > "$dev/subsystem_device"
    echo 0xa1 > "$dev/revision"
    echo -1 > "$dev/numa_node"
    echo "../../../bus/pci/drivers/nvidia-nvswitch" > "$dev/driver"
    printf "DRIVER=nvidia-nvswitch\nPCI_CLASS=68000\nPCI_ID=10DE:22A3\nPCI_SUBSYS_ID=10DE:1796\nPCI_SLOT_NAME=%s\n" "$addr" > "$dev/uevent"
    echo "../../../devices/pci0000:00/$addr" > "sys/bus/pci/devices/$addr"
}
for a in 0000:00:08.0 0000:00:09.0 0000:00:0a.0 0000:00:0b.0; do add_nvswitch "$a"; done
mkdir -p _driver
cp "$STANDIN_SCENARIOS"/h200x2.json _driver/
cat > _driver/answers.json <<'JSON'
{
 "base": "h200x2.json",
 "nvml_device_override": {
  "0": {"fabric_state": 3, "fabric_status": 999}
 },
 "faults": [{"call": "nvmlDeviceGetGpuFabricInfo", "device": 1, "result": 999}]
}
JSON
# The fabric manager itself runs (systemctl show, as gather records it: docs/capture-format.md).
cat > _commands/systemctl-show.txt <<'UNITS'
ActiveEnterTimestamp=Tue 2026-06-30 09:58:11 UTC
ActiveState=active
ExecMainStatus=0
Id=nvidia-fabricmanager.service
InactiveEnterTimestamp=
LoadState=loaded
Result=success
SubState=running
UnitFileState=enabled

Id=nvidia-imex.service
LoadState=not-found
ActiveState=inactive
SubState=dead
Result=success
ExecMainStatus=0
UnitFileState=
UNITS
