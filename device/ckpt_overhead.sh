#!/usr/bin/env bash
# Where gpudx migrate's overhead over the raw driver calls comes from: a process holding GIB GiB (default 1)
# swapped GPU0 <-> GPU1 by (a) the raw controller, (b) the raw controller with NVML initialised in its
# process (skipped with RAW_NVML=0), (c) gpudx migrate, ROUNDS rounds (default 3) of there and back,
# interleaved. The holder verifies every byte at the end. Reuses the holder and the controller of device/ckpt.sh.
set -u
OUT=${OUT:-/tmp/gpudx-ckpt-overhead}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
ROOT=$(pwd); BIN=$ROOT/build-device/gpudx
WORK=$(mktemp -d /tmp/gpudx-ckov.XXXXXX)
for f in holder rawctl; do
  awk -v f="$f" '$0 ~ "cat >\"\\$WORK/" f ".cpp\" <<.EOF." {on=1; next} on && /^EOF$/ {on=0} on' device/ckpt.sh > "$WORK/$f.cpp"
  g++ -O2 -std=c++20 -I"$ROOT/src" -o "$WORK/$f" "$WORK/$f.cpp" -ldl || { echo "build $f failed"; exit 1; }
done
unset CUDA_VISIBLE_DEVICES; export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkfifo "$WORK/h.fifo"
"$WORK/holder" "${GIB:-1}" "$WORK/h.fifo" > "$OUT/holder.log" 2>&1 &
HOLDER=$!
for _ in $(seq 1800); do grep -q '^ready' "$OUT/holder.log" && break; sleep 0.1; done
for r in $(seq "${ROUNDS:-3}"); do
  for leg in there back; do
    "$WORK/rawctl" $HOLDER >> "$OUT/raw.txt" 2>&1
    [ "${RAW_NVML:-1}" = 1 ] && RAW_WITH_NVML=1 "$WORK/rawctl" $HOLDER >> "$OUT/raw-nvml.txt" 2>&1
    "$BIN" migrate $HOLDER --device-map swap:0,1 --format json > "$OUT/gpudx-$r-$leg.json" 2>&1
  done
done
echo verify > "$WORK/h.fifo"
for _ in $(seq 1200); do grep -q "^done" "$OUT/holder.log" && break; sleep 0.05; done
echo quit > "$WORK/h.fifo"; sleep 0.5
kill $HOLDER 2>/dev/null
tail -3 "$OUT/holder.log"
python3 - "$OUT" <<'PY'
import json, glob, os, re, statistics, sys
out = sys.argv[1]
def raw(path):
    rows = [dict(re.findall(r"(\w+)=([\d.]+)", l)) for l in open(path) if l.startswith("raw")] if os.path.exists(path) else []
    if not rows: return {"checkpoint": float("nan"), "restore": float("nan")}, 0
    return {k: statistics.median(float(r[k]) for r in rows) for k in ("checkpoint", "restore")}, len(rows)
g = {"checkpoint": [], "restore": []}
for f in glob.glob(out + "/gpudx-*.json"):
    j = json.load(open(f))
    for st in j.get("steps", []):
        if st.get("step") in g: g[st["step"]].append(st["seconds"])
gm = {k: statistics.median(v) if v else float("nan") for k, v in g.items()}
(a, na), (b, nb) = raw(out + "/raw.txt"), raw(out + "/raw-nvml.txt")
print(f"median seconds      raw (n={na})   raw+NVML (n={nb})   gpudx (n={len(g['checkpoint'])})")
for k in ("checkpoint", "restore"):
    print(f"{k:12s} {a[k]:14.4f} {b[k]:16.4f} {gm[k]:12.4f}")
tot = lambda d: d["checkpoint"] + d["restore"]
print(f"ckpt+restore {tot(a):14.4f} {tot(b):16.4f} {tot(gm):12.4f}   gpudx/raw {tot(gm)/tot(a):.3f}, raw+NVML/raw {tot(b)/tot(a):.3f}")
PY
