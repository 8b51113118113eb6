#!/usr/bin/env bash
# The driver's recovery action on the real GPU (issue 19), into $OUT (summary.txt first):
#   - NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (field 230) read directly through libnvidia-ml.so.1 (python ctypes, the
#     same nvmlDeviceGetFieldValues gpudx uses) and as nvidia-smi -q prints it, against what gpudx reads
#     (`snapshot`: nvml.devices[].gpu_recovery_action, and `diagnose`: driver.recovery_action findings);
#   - `gpudx xid 154 --format json` and `gpudx xid 46`, `gpudx xid --list --format json` (the catalogue as shipped);
#   - the node's own kernel log through `gpudx diagnose --kernel-log` and `gpudx explain`: its Xid/SXid findings,
#     so a healthy node must have none above info.
# Runs from the repository root; uses build-device/gpudx (device/run-all.sh builds it), else build/gpudx.
set -u
OUT=${OUT:-/tmp/gpudx-xid-recovery-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=${GPUDX_BIN:-build-device/gpudx}
[[ -x $BIN ]] || BIN=build/gpudx
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
WORK=$(mktemp -d /tmp/gpudx-xid.XXXXXX)
say "gpudx: $BIN ($("$BIN" --version 2>&1 | head -1))"
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version --format=csv | tee -a "$S"

# ---- what the driver says, without gpudx
nvidia-smi -q >"$OUT/nvidia-smi-q.txt" 2>&1
say "nvidia-smi -q, recovery lines: $(grep -i 'recovery' "$OUT/nvidia-smi-q.txt" | tr -s ' ' | tr '\n' ';')"
python3 - >"$OUT/nvml-direct.txt" 2>&1 <<'PY'
import ctypes
nvml = ctypes.CDLL("libnvidia-ml.so.1")
class Value(ctypes.Union):
    _fields_ = [("ullVal", ctypes.c_ulonglong), ("dVal", ctypes.c_double)]
class FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", Value)]
assert ctypes.sizeof(FieldValue) == 40
print("nvmlInit_v2", nvml.nvmlInit_v2())
n = ctypes.c_uint(0)
nvml.nvmlDeviceGetCount_v2(ctypes.byref(n))
for i in range(n.value):
    h = ctypes.c_void_p()
    nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
    uuid = ctypes.create_string_buffer(96)
    nvml.nvmlDeviceGetUUID(h, uuid, 96)
    f = FieldValue(fieldId=230)
    rc = nvml.nvmlDeviceGetFieldValues(h, 1, ctypes.byref(f))
    print(f"gpu {i} {uuid.value.decode()} call_rc={rc} field_rc={f.nvmlReturn} valueType={f.valueType} value={f.value.ullVal}")
PY
say "NVML directly (field 230): $(grep '^gpu' "$OUT/nvml-direct.txt" | tr '\n' ';') $(grep -v '^gpu\|nvmlInit' "$OUT/nvml-direct.txt" | head -3)"

# ---- what gpudx reads
"$BIN" snapshot -o "$OUT/snapshot.json" >"$OUT/snapshot.log" 2>&1; say "snapshot exit $?"
python3 - "$OUT/snapshot.json" <<'PY' | tee -a "$S"
import json, sys
s = json.load(open(sys.argv[1]))
for d in s.get("nvml", {}).get("devices", []):
    unsupported = [u for u in d.get("unsupported", []) if "RECOVERY" in u]
    errors = [e for e in d.get("errors", []) if "RECOVERY" in e or "230" in e]
    print(f"gpudx snapshot: gpu {d.get('index')} {d.get('uuid')} gpu_recovery_action={d.get('gpu_recovery_action')} "
          f"unsupported={unsupported} errors={errors}")
PY
"$BIN" diagnose --format json >"$OUT/diagnose.json" 2>"$OUT/diagnose.err"; say "diagnose --format json exit $?"
"$BIN" diagnose >"$OUT/diagnose.txt" 2>&1; say "diagnose exit $?"
python3 - "$OUT/diagnose.json" <<'PY' | tee -a "$S"
import json, sys
d = json.load(open(sys.argv[1]))
fs = [f for f in d.get("findings", []) if f.get("id") in ("driver.recovery_action", "kernel_log.xid", "kernel_log.xid_repeated", "kernel_log.sxid", "driver.query_failed")]
print(f"diagnose: {len(d.get('findings', []))} findings; recovery/xid/sxid/query_failed ones: {len(fs)}")
for f in fs:
    print(f"  {f.get('severity')} {f.get('id')}: {f.get('message')}")
PY

# ---- the catalogue as shipped
"$BIN" xid 154 --format json >"$OUT/xid-154.json" 2>&1; say "xid 154 --format json exit $?: $(python3 -c 'import json,sys; x=json.load(open(sys.argv[1]))["xid"]; print(x["mnemonic"], x["immediate"], x["severity"])' "$OUT/xid-154.json" 2>&1)"
"$BIN" xid 46 >"$OUT/xid-46.txt" 2>&1; say "xid 46 exit $?"; cat "$OUT/xid-46.txt" >>"$S"
"$BIN" xid --list --format json >"$OUT/xid-list.json" 2>&1; say "xid --list --format json exit $?"
"$BIN" xid -1 >"$OUT/xid-bad.txt" 2>&1; say "xid -1 exit $? (want 64): $(head -1 "$OUT/xid-bad.txt")"

# ---- this node's own kernel log: a healthy node has no Xid/SXid finding above info
{ dmesg 2>/dev/null || journalctl -k -b 2>/dev/null; } >"$WORK/kernel.txt"
say "kernel log: $(wc -l <"$WORK/kernel.txt") lines, $(grep -c 'Xid' "$WORK/kernel.txt") with Xid"
grep -E 'Xid|SXid' "$WORK/kernel.txt" | tail -40 >"$OUT/kernel-xid-lines.txt"
"$BIN" explain "$WORK/kernel.txt" --format json >"$OUT/explain.json" 2>&1; say "explain (own kernel log) exit $?"
"$BIN" diagnose --kernel-log "$WORK/kernel.txt" --format json >"$OUT/diagnose-own-log.json" 2>&1; say "diagnose --kernel-log exit $?"
rm -rf "$WORK"
