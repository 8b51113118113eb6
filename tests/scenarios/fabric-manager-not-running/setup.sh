#!/usr/bin/env bash
# The baseboard's four NVSwitches (0000:00:08.0 to 0000:00:0b.0) are on this node's PCIe bus, so the H200s
# join the NVLink fabric only through nvidia-fabricmanager, and it is not running (its package was left at
# the old driver version and the service refused to start). Both GPUs report fabric registration "not
# started"; cuInit answers CUDA_ERROR_SYSTEM_NOT_READY.
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
  "0": {"fabric_state": 1, "fabric_status": 0},
  "1": {"fabric_state": 1, "fabric_status": 0}
 },
 "faults": [{"call": "cuInit", "result": 802}]
}
JSON
# systemd's view, as gather records it (docs/capture-format.md): the start script exited 1, as in
# NVIDIA/gpu-operator#610 ("nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE").
cat > _commands/systemctl-show.txt <<'UNITS'
ActiveEnterTimestamp=
ActiveState=failed
ExecMainStatus=1
Id=nvidia-fabricmanager.service
InactiveEnterTimestamp=Tue 2026-06-30 09:58:12 UTC
LoadState=loaded
Result=exit-code
SubState=failed
UnitFileState=enabled

ActiveState=inactive
ExecMainStatus=0
Id=nvidia-imex.service
LoadState=not-found
Result=success
SubState=dead
UnitFileState=
UNITS
