#!/usr/bin/env bash
# Driver layers on the real 2×H200 node: what gpudx's NVML / CUDA probes see next to nvidia-smi, taken
# in the same run, and how long it takes. Run from the repository root as root; gpudx prebuilt at
# build-device/gpudx. Everything goes under $OUT.
#
# Checks (see the summary at the end of $OUT/summary.txt):
#  1. `gpudx snapshot` (with --all-devices) and `gpudx ids` text/json/csv: NVML and CUDA statuses ok,
#     2 GPUs, UUIDs and bus ids equal to nvidia-smi -q -x's, ids exit code 0 (consistent).
#  2. Timings (median): full snapshot with NVML but no CUDA (--no-cuda) ×20, full snapshot with CUDA ×20,
#     `nvidia-smi -q` ×10, the manual shell snapshot of REFERENCE.md ×10; per-collector durations.
#  3. CUDA_VISIBLE_DEVICES evaluation on the real driver: =1, =<UUID of GPU1>, =GPU-deadbeef (expect exit 1).
#  4. A deadline shorter than cuInit (0.05 s): cuda must time out naming cuInit(0), NVML still ok, exit fast.
set -u
OUT=${OUT:-/tmp/gpudx-driver-out}
mkdir -p "$OUT"
GPUDX=${GPUDX:-build-device/gpudx}
S="$OUT/summary.txt"
: >"$S"
log() { echo "$*" | tee -a "$S"; }

if [ ! -x "$GPUDX" ]; then
  log "no gpudx binary at $GPUDX"
  exit 1
fi
log "== host: $(uname -r); driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null)"
log "== gpudx: $($GPUDX --version 2>&1)"

# ---- 1. Same-run captures.
nvidia-smi -q -x >"$OUT/nvidia-smi-q.xml" 2>&1
nvidia-smi -q >"$OUT/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=index,uuid,pci.bus_id,minor_number --format=csv,noheader >"$OUT/nvidia-smi-ids.csv" 2>&1
env | grep -E '^(CUDA|NVIDIA|LD_LIBRARY_PATH)' >"$OUT/env.txt" || true
$GPUDX snapshot --all-devices -o "$OUT/snapshot.json" 2>"$OUT/snapshot.stderr"; log "snapshot exit $?"
$GPUDX snapshot --format text >"$OUT/snapshot.txt" 2>&1
$GPUDX ids >"$OUT/ids.txt" 2>&1; log "ids (text) exit $?"
$GPUDX ids --format json >"$OUT/ids.json" 2>&1; log "ids (json) exit $?"
$GPUDX ids --format csv >"$OUT/ids.csv" 2>&1; log "ids (csv) exit $?"
$GPUDX diagnose -v >"$OUT/diagnose.txt" 2>&1; log "diagnose exit $?"
$GPUDX diagnose --format json >"$OUT/diagnose.json" 2>&1
cat "$OUT/ids.txt" | tee -a "$S"

log "== nvidia-smi ids:"; cat "$OUT/nvidia-smi-ids.csv" | tee -a "$S"
if command -v python3 >/dev/null; then
  python3 - "$OUT" <<'PY' | tee -a "$S"
import json, sys, re
out = sys.argv[1]
snap = json.load(open(out + "/snapshot.json"))
xml = open(out + "/nvidia-smi-q.xml").read()
smi = dict(zip(re.findall(r"<uuid>(GPU-[0-9a-f-]+)</uuid>", xml), re.findall(r"<pci_bus_id>([0-9A-Fa-f:.]+)</pci_bus_id>", xml)))
for c in snap["collectors"]:
    if c["name"] in ("nvml", "cuda", "pcie", "module"):
        print("collector %-6s %-9s %7.2f ms %s" % (c["name"], c["state"], c["duration_ms"], c.get("message", "")))
nv = {d["uuid"]: d["bus_id"] for d in snap["nvml"]["devices"]}
cu = {d["uuid"]: d["bus_id"] for d in snap["cuda"]["caller"]["devices"]}
print("nvidia-smi:", smi)
print("gpudx NVML:", nv, "library", snap["nvml"]["library_path"], "driver", snap["nvml"]["driver_version"])
print("gpudx CUDA:", cu, "library", snap["cuda"]["library_path"], "cuInit", snap["cuda"]["caller"]["init_name"])
norm = lambda b: b.lower()[-12:]
print("CHECK nvml uuids == nvidia-smi:", set(nv) == set(smi) and all(norm(nv[u]) == norm(smi[u]) for u in smi))
print("CHECK cuda uuids == nvidia-smi:", set(cu) == set(smi) and all(norm(cu[u]) == norm(smi[u]) for u in smi))
for d in snap["nvml"]["devices"]:
    print("nvml dev", d["index"], d["uuid"], "persist", d["persistence_mode"], "ecc", d["ecc_enabled"],
          "fabric", d["fabric_state"], d["fabric_status"], "links", sum(1 for l in d["nvlinks"] if l["active"]),
          "unsupported", d["unsupported"], "errors", d["errors"])
PY
fi

# ---- 2. Timings.
median_ms() {  # median of "$1" runs of the rest of the command line, in ms
  local n=$1; shift
  local i t0 t1
  for i in $(seq "$n"); do
    t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000 ))
  done | sort -n | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.1f", m/1000}'
}
manual_snapshot() {
  uname -r; lspci -Dnn | grep -Ei 'VGA|3D|Display'; lsmod | grep -E 'nvidia|amdgpu'
  modinfo nvidia | grep -E '^(version|vermagic):'; nvidia-smi -L
  nvidia-smi -q | grep -E 'Product Name|GPU UUID|Bus Id'
  cat /proc/driver/nvidia/version; ldconfig -p | grep 'libcuda\.so'; readlink -f /usr/lib/x86_64-linux-gnu/libcuda.so.1
  nvcc -V; fuser -v /dev/nvidia*; nvidia-smi pmon -c 1
  dmesg | grep -Ei 'NVRM|Xid|amdgpu|kfd|IOMMU|AER|pcie' | tail -50
  env | grep -E 'CUDA|NVIDIA|ROCR|HIP|LD_LIBRARY_PATH'; ls -l /dev/nvidia* /dev/kfd /dev/dri/render*
}
log "== timings (median, ms)"
log "gpudx snapshot --no-cuda (NVML, no cuInit) x20: $(median_ms 20 $GPUDX snapshot --no-cuda)"
log "gpudx snapshot --no-driver x20:                $(median_ms 20 $GPUDX snapshot --no-driver)"
log "gpudx snapshot (NVML + CUDA) x20:              $(median_ms 20 $GPUDX snapshot)"
log "gpudx ids x10:                                 $(median_ms 10 $GPUDX ids)"
log "nvidia-smi -q x10:                             $(median_ms 10 nvidia-smi -q)"
log "nvidia-smi -q -x x10:                          $(median_ms 10 nvidia-smi -q -x)"
log "manual shell snapshot x10:                     $(median_ms 10 manual_snapshot)"
for i in $(seq 5); do $GPUDX snapshot --no-cuda -o "$OUT/timing-nocuda-$i.json" 2>/dev/null; done
if command -v python3 >/dev/null; then
  python3 - "$OUT" <<'PY' | tee -a "$S"
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/timing-nocuda-*.json")):
    s = json.load(open(f))
    print(f.rsplit("/", 1)[1], " ".join("%s=%.1f" % (c["name"], c["duration_ms"]) for c in s["collectors"]))
PY
fi

# ---- 3. CUDA_VISIBLE_DEVICES on the real driver.
GPU1=$(sed -n 2p "$OUT/nvidia-smi-ids.csv" | cut -d, -f2 | tr -d ' ')
for cvd in 1 "$GPU1" "${GPU1:0:12}" GPU-deadbeef "0,7"; do
  CUDA_VISIBLE_DEVICES="$cvd" $GPUDX ids --all-devices --format json >"$OUT/ids-cvd-$(echo "$cvd" | tr -c 'A-Za-z0-9' _).json" 2>&1
  rc=$?
  log "CUDA_VISIBLE_DEVICES=$cvd: ids exit $rc; $(CUDA_VISIBLE_DEVICES="$cvd" $GPUDX ids 2>&1 | grep -E '^(error|warning) ' | head -3 | tr '\n' ' ')"
done
CUDA_DEVICE_ORDER=PCI_BUS_ID $GPUDX ids >"$OUT/ids-pci-order.txt" 2>&1; log "CUDA_DEVICE_ORDER=PCI_BUS_ID: exit $?"

# ---- 4. A deadline shorter than cuInit.
t0=$(date +%s%N)
$GPUDX snapshot --deadline 0.05 -o "$OUT/snapshot-short-deadline.json" 2>&1
t1=$(date +%s%N)
log "snapshot --deadline 0.05 took $(( (t1 - t0) / 1000000 )) ms"
grep -o '"timed_out_call": "[^"]*"' "$OUT/snapshot-short-deadline.json" | tee -a "$S"
log "done"
