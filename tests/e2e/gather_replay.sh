#!/usr/bin/env bash
# A snapshot of the live machine and a snapshot of its own capture replayed with --root must be equal
# apart from the fields that describe time (and the root they were read from).
set -euo pipefail
gpudx=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
"$gpudx" gather --dir "$work/capture" --no-driver --no-commands 2>"$work/gather.log"
# The node page sits at the top of the capture, the first thing whoever unpacks it reads, naming every GPU the
# capture's own snapshot found by its PCI address.
[[ -s $work/capture/report.html ]] || { echo "gather wrote no report.html" >&2; exit 1; }
grep -q 'Content-Security-Policy' "$work/capture/report.html" || { echo "report.html: no security policy" >&2; exit 1; }
python3 - "$work/capture" <<'PY'
import json, sys
snap = json.load(open(sys.argv[1] + "/_commands/gpudx-snapshot.json"))
page = open(sys.argv[1] + "/report.html").read()
missing = [g for g in snap["pcie"]["gpus"] if g not in page]
sys.exit(f"report.html does not name {missing}" if missing else 0)
PY
"$gpudx" gather --dir "$work/no-report" --no-driver --no-commands --no-report 2>/dev/null
[[ ! -e $work/no-report/report.html ]] || { echo "gather --no-report wrote report.html" >&2; exit 1; }
"$gpudx" snapshot --no-driver > "$work/live.json"
"$gpudx" snapshot --no-driver --root "$work/capture" > "$work/replay.json"
python3 - "$work/live.json" "$work/replay.json" "$work/capture" <<'PY'
import json, sys
# caller_can_open is asked of the live machine only: a replay cannot know who will open the nodes.
VOLATILE = {"duration_ms", "collected_at", "root", "caller_can_open", "processes_scanned", "processes_unreadable"}
def norm(v):
    if isinstance(v, dict): return {k: norm(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list): return [norm(x) for x in v]
    return v
live, replay = (norm(json.load(open(p))) for p in sys.argv[1:3])
# The live kernel log is /dev/kmsg; its capture is _commands/dmesg.txt holding the same records.
for snap in (live, replay):
    snap.get("kernel_log", {}).pop("source", None)
# Collectors whose sources change between two reads of a running machine: the kernel log grows and
# processes come and go. Their content is compared by kind, not by count.
if live != replay:
    import difflib
    a = json.dumps(live, indent=1, sort_keys=True).splitlines()
    b = json.dumps(replay, indent=1, sort_keys=True).splitlines()
    print("\n".join(list(difflib.unified_diff(a, b, "live", "replay", lineterm=""))[:200]))
    sys.exit(1)
print("live and replayed snapshots are equal (%d collectors)" % len(live["collectors"]))
PY
