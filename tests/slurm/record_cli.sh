#!/usr/bin/env bash
# `gpudx record` from the command line: a prolog-like environment and the h200x2 capture give one JSON line
# per call, appended; an unwritable file is exit 64 with a message.
set -euo pipefail
gpudx=$1 src=$2 work=$3
source "$src/tests/integration/lib.sh"
rm -rf "$work" && mkdir -p "$work"
file=$work/log/allocations.jsonl
root=$src/tests/fixtures/h200x2
env -i PATH="$PATH" SLURM_JOB_ID=81723 SLURM_JOB_GPUS=1 SLURMD_NODENAME=gpu-a17 SLURM_JOB_USER=alice \
  "$gpudx" record --root "$root" --no-driver --file "$file"
env -i PATH="$PATH" SLURM_JOB_ID=81724 CUDA_VISIBLE_DEVICES=GPU-992cb470-9027-88f4-48a9-a9a329d6978d,1 \
  "$gpudx" record --root "$root" --no-driver --file "$file" --node gpu-a17 --fsync
[[ $(wc -l < "$file") == 2 ]] || fail "expected 2 lines in $file: $(cat "$file")"
python3 - "$file" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
a, b = lines
assert a["kind"] == "gpudx-allocation-record" and a["schema_version"] == 1, a
assert a["job_id"] == "81723" and a["node"] == "gpu-a17" and a["user"] == "alice", a
assert a["allocation"] == {"variable": "SLURM_JOB_GPUS", "value": "1", "indices": "device_minor"}, a
assert a["gpus"] == [{"local_ordinal": 0, "uuid": "GPU-40cd403d-66ba-4608-72b9-5be5031085dc", "pci": "0000:00:07.0",
                      "minor": 1, "mig_uuid": None, "entry": "1"}], a["gpus"]
assert a["container_image"] is None, a
assert [(g["local_ordinal"], g["pci"]) for g in b["gpus"]] == [(0, "0000:00:06.0"), (1, "0000:00:07.0")], b["gpus"]
print("record:", json.dumps(a))
PY
# `--file -` prints the line instead.
out=$(env -i PATH="$PATH" SLURM_JOB_ID=5 "$gpudx" record --root "$root" --no-driver --file - --node n1)
[[ $out == '{"kind":"gpudx-allocation-record"'* ]] || fail "stdout record: $out"
set +e
err=$("$gpudx" record --root "$root" --no-driver --file /proc/version/x.jsonl 2>&1)
rc=$?
set -e
[[ $rc == 64 && $err == "gpudx: cannot append the record to /proc/version/x.jsonl: "* ]] || fail "unwritable: rc=$rc $err"
echo PASS
