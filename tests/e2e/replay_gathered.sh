#!/usr/bin/env bash
# The capture gpudx gathered on a real 2×H200 machine (tests/fixtures/h200x2-gathered, with that machine's
# recorded NVML and CUDA answers) replays through the stand-in libraries as the machine itself saw it:
# the driver layers equal the snapshot gpudx took there while gathering (_commands/gpudx-snapshot.json),
# and `gpudx ids` finds every source consistent.
set -euo pipefail
gpudx=$1 fixture=$2 standins=$3 work=$4
rm -rf "$work"; mkdir -p "$work"
"$gpudx" snapshot --root "$fixture" --driver-lib-dir "$standins" --all-devices > "$work/replay.json"
python3 - "$fixture/_commands/gpudx-snapshot.json" "$work/replay.json" <<'PY'
import json, sys
# Where the library was loaded from and how long calls took differ between the machine and the replay;
# who may open a device node is asked of the live machine only (as in gather_replay.sh).
VOLATILE = {"duration_ms", "library_path", "init_seconds", "seconds", "caller_can_open", "processes_scanned",
            "processes_unreadable"}
def norm(v):
    if isinstance(v, dict): return {k: norm(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list): return [norm(x) for x in v]
    return v
def added_defaults(live, replay):
    """Fields a newer gpudx adds with their default value (docs/snapshot-format.md: fields are only added) are
    dropped from the replay where the machine's older snapshot does not have them."""
    if isinstance(live, dict) and isinstance(replay, dict):
        return {k: added_defaults(live.get(k), v) for k, v in replay.items()
                if k in live or (v not in (None, [], {}, "", False, "not_read") and k not in NEWER_FIELDS)}
    if isinstance(live, list) and isinstance(replay, list) and len(live) == len(replay):
        return [added_defaults(a, b) for a, b in zip(live, replay)]
    return replay
# Facts a newer gpudx reads that the capture, gathered before them, holds no answer for (docs/gpu-health.md):
# dropped from the replay where the machine's snapshot does not have them.
NEWER_FIELDS = {"health", "fabric_clique_id"}
live, replay = (json.load(open(p)) for p in sys.argv[1:3])
replay = added_defaults(live, replay)
# Queries a newer gpudx makes that the capture, gathered before them, holds no answer for: the stand-in answers
# "not supported", so they are listed as unsupported in the replay only.
NEWER_QUERIES = {"NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", "nvmlDeviceGetRetiredPages", "NVML_FI_DEV_NVLINK_LINK_COUNT",
                 "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetTemperatureThreshold",
                 "nvmlDeviceGetRowRemapperHistogram", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetTemperature", "NVML_FI_DEV_MEMORY_TEMP", "nvmlDeviceGetPowerUsage",
                 "nvmlDeviceGetPcieReplayCounter", "NVML_FI_DEV_NVLINK_GET_VERSION", "NVML_FI_DEV_NVLINK_GET_SPEED",
                 "nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                 "nvmlDeviceGetNvLinkRemoteDeviceType"}
for was, now in zip(live["nvml"].get("devices", []), replay["nvml"].get("devices", [])):
    if "unsupported" in now:
        now["unsupported"] = [c for c in now["unsupported"] if c not in NEWER_QUERIES or c in was.get("unsupported", [])]
problems = []
# The devices layer is compared without its holders: the snapshot recorded while gathering this capture
# listed the gathering gpudx's own driver probes as holders (fixed since: they are left out), and the
# capture holds no /proc entries for those short-lived processes.
for snap in (live, replay):
    snap["devices"].pop("holders", None)
for layer in ("nvml", "cuda", "pcie", "module", "devices"):
    if norm(live[layer]) != norm(replay[layer]):
        a = json.dumps(norm(live[layer]), sort_keys=True); b = json.dumps(norm(replay[layer]), sort_keys=True)
        i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), 0)
        problems.append(f"{layer} differs near: machine ...{a[max(0, i-200):i+200]}\n   replay ...{b[max(0, i-200):i+200]}")
gpus = [(d["uuid"], d["pci"]) for d in replay["nvml"]["devices"]]
if len(gpus) != 2: problems.append(f"NVML devices in the replay: {gpus}")
if problems: print("\n".join(problems)); sys.exit(1)
print("replayed driver layers equal the machine's:", gpus)
PY
rc=0
"$gpudx" ids --root "$fixture" --driver-lib-dir "$standins" > "$work/ids.txt" || rc=$?
cat "$work/ids.txt"
[[ $rc -eq 0 ]] || { echo "ids exit $rc, expected 0"; exit 1; }
grep -q "^consistent" "$work/ids.txt" || { echo "ids did not find the sources consistent"; exit 1; }
