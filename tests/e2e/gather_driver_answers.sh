#!/usr/bin/env bash
# `gpudx gather` records what NVML and the CUDA driver answered (_driver/answers.json), and a replay of
# the capture through the stand-in libraries gives the same driver layers as the gathering run did.
# The "driver" here is the stand-in pair serving the recorded 2×H200 answers, so the test runs anywhere.
set -euo pipefail
gpudx=$1 standins=$2 scenario=$3 work=$4
rm -rf "$work"; mkdir -p "$work"
export GPUDX_STANDIN_SCENARIO=$scenario
"$gpudx" gather --dir "$work/capture" --no-commands --driver-lib-dir "$standins" 2>"$work/gather.log"
"$gpudx" snapshot --driver-lib-dir "$standins" --all-devices > "$work/live.json"
unset GPUDX_STANDIN_SCENARIO  # the replay must find the answers in the capture, not in the scenario file
test -s "$work/capture/_driver/answers.json" || { echo "no _driver/answers.json in the capture"; cat "$work/gather.log"; exit 1; }
"$gpudx" snapshot --driver-lib-dir "$standins" --all-devices --root "$work/capture" > "$work/replay.json"
python3 - "$work/live.json" "$work/replay.json" <<'PY'
import json, sys
VOLATILE = {"duration_ms", "library_path"}
def norm(v):
    if isinstance(v, dict): return {k: norm(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list): return [norm(x) for x in v]
    return v
live, replay = (json.load(open(p)) for p in sys.argv[1:3])
problems = []
for layer in ("nvml", "cuda"):
    a, b = norm(live[layer]), norm(replay[layer])
    if a != b:
        problems.append(f"{layer} differs:\nlive   {json.dumps(a, sort_keys=True)[:1500]}\nreplay {json.dumps(b, sort_keys=True)[:1500]}")
uuids = [d["uuid"] for d in replay["nvml"]["devices"]]
if len(uuids) != 2 or not all(u.startswith("GPU-") for u in uuids):
    problems.append(f"replayed NVML devices: {uuids}")
if problems:
    print("\n".join(problems)); sys.exit(1)
print(f"driver layers replay identically from the capture: NVML {uuids}")
PY
