#!/usr/bin/env bash
# Checks the host collectors (host, pcie, module) against the real 2xH200 node.
# Run from the repo root as root; uses build-device/gpudx if carried, else builds it. Results under $OUT.
#  1. `gpudx snapshot --no-driver` live: pcie lists 0000:00:06.0 and 0000:00:07.0 as GPUs (class 0x030200,
#     10de:2335, driver nvidia, 32 GT/s x16); module layer has nvidia 580.159.04 loaded and both GPUs in
#     /proc/driver/nvidia/gpus with their UUIDs; host has the kernel release of `uname -r`.
#  2. module files: whether /lib/modules/$(uname -r) exists there and what libkmod read for nvidia
#     (compared with `modinfo` if present, and with the raw .modinfo of the file).
#  3. Timing: duration_ms of the host, pcie and module collectors over 20 runs (target: < 10 ms together).
#  4. The live config-space read (pcie.fell_off_bus must not fire on healthy cards).
set -uo pipefail
OUT=${OUT:-/tmp/hostpci-out}
mkdir -p "$OUT"
BIN=build-device/gpudx
if [[ ! -x $BIN ]]; then
    cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 &&
        ninja -C build-device gpudx > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -50 "$OUT/build.log"; exit 1; }
fi
uname -r > "$OUT/uname-r.txt"
ls -la "/lib/modules/$(uname -r)" > "$OUT/lib-modules.txt" 2>&1
find "/lib/modules/$(uname -r)" -name 'nvidia*.ko*' > "$OUT/nvidia-ko-files.txt" 2>&1
command -v modinfo && modinfo nvidia > "$OUT/modinfo-nvidia.txt" 2>&1
ls /var/lib/dkms > "$OUT/dkms.txt" 2>&1
for a in 0000:00:06.0 0000:00:07.0; do
    od -An -tx1 -N4 /sys/bus/pci/devices/$a/config > "$OUT/config-$a.txt" 2>&1
    ls /sys/bus/pci/devices/$a > "$OUT/sysfs-$a.txt" 2>&1
done
ls /sys/bus/pci/slots > "$OUT/slots.txt" 2>&1
$BIN snapshot --no-driver -o "$OUT/snapshot.json" 2> "$OUT/snapshot.err"
$BIN diagnose --no-driver --expect-gpus 2 --format json -o "$OUT/diagnose.json" 2> "$OUT/diagnose.err"
echo "diagnose exit $?" >> "$OUT/diagnose.err"
for i in $(seq 20); do
    $BIN snapshot --no-driver -o "$OUT/s.json" 2>/dev/null
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(" ".join(f"{c[\"name\"]}={c[\"duration_ms\"]:.2f}" for c in s["collectors"] if c["name"] in ("host","pcie","module")))' "$OUT/s.json" >> "$OUT/timing.txt" 2>&1
done
python3 - "$OUT/snapshot.json" <<'PY' > "$OUT/summary.txt" 2>&1
import json, sys
s = json.load(open(sys.argv[1]))
print("gpus", s["pcie"]["gpus"])
for d in s["pcie"]["devices"]:
    if d["is_gpu"]:
        print(d["address"], hex(d["vendor_id"]), hex(d["device_id"]), d["driver"], d["link_current"], d["config_unreadable"], d["device_name"])
m = s["module"]
print("loaded", [(l["name"], l["version"]) for l in m["loaded"]])
print("driver", m["nvidia_driver_version"], "files_unavailable:", m["files_unavailable"])
print("files", m["files"])
print("procfs gpus", [(g["address"], g["uuid"], g["excluded"]) for g in m["nvidia_gpus"]])
print("host", s["host"])
for c in s["collectors"]:
    print(c["name"], c["state"], c["message"], c["problems"][:5])
PY
cat "$OUT/summary.txt"; tail -3 "$OUT/timing.txt"
