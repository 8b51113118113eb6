#!/usr/bin/env bash
# What a machine with one GPU can prove, in one run (results under $OUT, summary.txt first):
#   - the live layers: `gpudx diagnose` (text and JSON, exit code), `ids`, `snapshot --all-devices`;
#   - a capture of this node with its driver answers (gather --dir), replayed with --root through the stand-ins
#     (the fixture tests/fixtures/h200x1-gathered, which must diagnose healthy);
#   - `gpudx explain --here` over this node's own kernel log (when explain exists);
#   - checkpoint and restore of a process holding 1 GiB on the GPU, its memory re-read after each step
#     (the holder of device/ckpt.sh), `state` before and after, a malformed device map (exit 64, nothing locked);
#   - `gpudx accept` (quick) on the one GPU.
# Needs build-device/gpudx (device/run-all.sh builds it).
set -u
OUT=${OUT:-/tmp/gpudx-one-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN=$ROOT/build-device/gpudx
S=$OUT/summary.txt; : >"$S"
say() { echo "$*" | tee -a "$S"; }
WORK=$(mktemp -d /tmp/gpudx-one.XXXXXX)
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,driver_version --format=csv | tee -a "$S"

# ---- live layers
"$BIN" diagnose >"$OUT/diagnose.txt" 2>&1; say "diagnose exit $?"
"$BIN" diagnose --format json >"$OUT/diagnose.json" 2>/dev/null; say "diagnose --format json exit $?"
grep -E '^(Verdict|Boundary|  (ERROR|WARN))' "$OUT/diagnose.txt" | head -20 | tee -a "$S"
"$BIN" ids >"$OUT/ids.txt" 2>&1; say "ids exit $?"; cat "$OUT/ids.txt" | tee -a "$S"
"$BIN" snapshot --all-devices -o "$OUT/snapshot.json"; say "snapshot exit $?"

# ---- capture and replay
rm -rf "$WORK/h200x1-gathered"
"$BIN" gather --dir "$WORK/h200x1-gathered" >"$OUT/gather.log" 2>&1; say "gather exit $?"
tar -czf "$OUT/h200x1-gathered.tar.gz" -C "$WORK" h200x1-gathered
"$BIN" diagnose --root "$WORK/h200x1-gathered" >"$OUT/replay.txt" 2>&1; say "replay (no stand-ins) exit $?"

# ---- explain over this node's own kernel log
if "$BIN" explain --help >/dev/null 2>&1; then
    dmesg >"$WORK/dmesg.txt" 2>/dev/null || journalctl -k -b >"$WORK/dmesg.txt" 2>/dev/null
    "$BIN" explain "$WORK/dmesg.txt" >"$OUT/explain.txt" 2>&1; say "explain (own kernel log) exit $?"
    "$BIN" explain --here "$WORK/dmesg.txt" >>"$OUT/explain.txt" 2>&1; say "explain --here exit $?"
    head -30 "$OUT/explain.txt" >>"$S"
fi

# ---- checkpoint / restore on the one GPU
eval "$(sed -n "/^cat >\"\$WORK\/holder.cpp\" <<'EOF'/,/^EOF\$/p" device/ckpt.sh)"
g++ -O2 -std=c++20 -I"$ROOT/src" -o "$WORK/holder" "$WORK/holder.cpp" -ldl || say "FAIL: holder build"
mkfifo "$WORK/h.fifo"
"$WORK/holder" 1 "$WORK/h.fifo" >"$OUT/holder.log" 2>&1 &
HPID=$!
for _ in $(seq 600); do grep -q '^ready' "$OUT/holder.log" && break; sleep 0.1; done
it=0
verify() {
    timeout 5 bash -c "echo verify >'$WORK/h.fifo'" || { say "FAIL: $1: holder gone"; return; }
    for _ in $(seq 1200); do grep -q "^done $it\$" "$OUT/holder.log" && break; sleep 0.05; done
    if grep "^it=$it ctxdev" "$OUT/holder.log" | grep -q 'memory intact'; then say "PASS: $1: memory intact"
    else say "FAIL: $1: $(grep "^it=$it" "$OUT/holder.log" | head -2)"; fi
    it=$((it + 1))
}
verify "before"
"$BIN" state "$HPID" >"$OUT/state-1.txt" 2>&1; say "state exit $?: $(head -3 "$OUT/state-1.txt" | tr '\n' ' ')"
"$BIN" checkpoint "$HPID" --device-map 'not a map' >"$OUT/badmap.txt" 2>&1; say "checkpoint with a malformed map exit $? (want 64)"
"$BIN" state "$HPID" >"$OUT/state-2.txt" 2>&1; say "state after the refused map: $(head -1 "$OUT/state-2.txt")"
"$BIN" checkpoint "$HPID" --format json >"$OUT/checkpoint.json" 2>"$OUT/checkpoint.err"; say "checkpoint exit $?"
"$BIN" state "$HPID" >"$OUT/state-3.txt" 2>&1; say "state after checkpoint: $(head -1 "$OUT/state-3.txt")"
"$BIN" restore "$HPID" --format json >"$OUT/restore.json" 2>"$OUT/restore.err"; say "restore exit $?"
verify "after checkpoint and restore"
"$BIN" migrate "$HPID" --format json >"$OUT/migrate.json" 2>"$OUT/migrate.err"; say "migrate (same GPU) exit $?"
verify "after migrate"
timeout 2 bash -c "echo quit >'$WORK/h.fifo'" 2>/dev/null; sleep 0.5; kill "$HPID" 2>/dev/null

# ---- acceptance on the one GPU
start=$(date +%s.%N)
"$BIN" accept --format json >"$OUT/accept.json" 2>"$OUT/accept.err"; rc=$?
end=$(date +%s.%N)
say "accept exit $rc in $(python3 -c "print(f'{$end-$start:.1f}')") s"
"$BIN" accept --from "$OUT/accept.json" --compare "$OUT/accept.json" >/dev/null 2>&1; say "accept --compare (same record) exit $?"
python3 - "$OUT/accept.json" <<'PY' | tee -a "$S"
import json, sys
r = json.load(open(sys.argv[1]))
print("accept verdict", r.get("verdict"))
for t in r.get("tests", []):
    figs = ", ".join(f"{k}={v:.1f}" for k, v in t.get("figures", {}).items() if "gbps" in k)
    print(f"  {t['id']:<18} {t['status']:<7} {figs}")
PY
rm -rf "$WORK"
