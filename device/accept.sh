#!/usr/bin/env bash
# gpudx accept on the real 2xH200 machine, then PyTorch measuring the same transfers with the same
# sizes, and the ratios gpudx / PyTorch (target >= 0.9 each).
#
# Run from the repository root on the device machine; results under $OUT:
#   accept.json         the record (gpudx accept --format json), timed: must take < 10 s wall
#   accept.txt          the same record as text
#   accept-wall.txt     wall time and exit code of the timed run
#   accept-allow.json   a second run with --allow <first GPU> --pairs none: the isolation check
#                       (expected here: CUDA confined, NVML not, since nothing confines /dev/nvidia*)
#   accept-ratios.txt   gpudx vs PyTorch bandwidth table
#
# Accounting, identical on both sides (GB = 1e9 bytes):
#   d2d  = 2 x size x repetitions / time   (bytes read + bytes written), cuMemcpyDtoDAsync vs dst.copy_(src)
#   h2d, d2h = size x repetitions / time   pinned host memory (cuMemHostAlloc vs pin_memory=True)
#   p2p  = size x repetitions / time       one direction, issued on the source GPU's stream
# Sizes and repetitions are read from gpudx's own record, so both sides move the same bytes.
# Both sides: one untimed warm-up transfer, then the repetitions between two CUDA events.
set -u
OUT=${OUT:-/tmp/gpudx-accept-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."

BIN=build-device/gpudx
if [ ! -x "$BIN" ]; then
    echo "== building gpudx (no prebuilt binary in build-device/)"
    cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && ninja -C build-device gpudx >/dev/null ||
        { echo "build failed"; exit 1; }
fi

nvidia-smi -L 2>/dev/null | tee "$OUT/nvidia-smi-L.txt"

echo "== gpudx accept (timed)"
t0=$(date +%s.%N)
"$BIN" accept --format json -o "$OUT/accept.json"
rc=$?
t1=$(date +%s.%N)
wall=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
verdict_wall=$(python3 -c "print('OK' if $t1 - $t0 < 10 else 'TOO SLOW')")
echo "gpudx accept: exit $rc, wall ${wall} s (< 10 s required: $verdict_wall)" | tee "$OUT/accept-wall.txt"
"$BIN" accept --from "$OUT/accept.json" | tee "$OUT/accept.txt"

echo "== gpudx accept --compare against itself (expect: no changes)"
"$BIN" accept --from "$OUT/accept.json" --compare "$OUT/accept.json" | tail -3

echo "== isolation check with an allocation of the first GPU"
first=$(python3 -c "import json;print(json.load(open('$OUT/accept.json'))['gpus'][0]['uuid'])" 2>/dev/null)
if [ -n "$first" ]; then
    "$BIN" accept --allow "$first" --pairs none --format json -o "$OUT/accept-allow.json"
    echo "exit $?"
    python3 - "$OUT/accept-allow.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for t in r["tests"]:
    if t["id"].startswith("isolation"):
        print(t["id"], t["status"], "-", t["reason"])
        for k, v in t["details"].items():
            print("   ", k, "=", v)
EOF
fi

echo "== PyTorch reference, same sizes"
python3 - "$OUT/accept.json" "$OUT/accept-ratios.txt" <<'EOF'
import json, sys, time
import torch

rec = json.load(open(sys.argv[1]))
tests = rec["tests"]
gpus = rec["gpus"]

def test(tid, uuid=None):
    for t in tests:
        if t["id"] == tid and (uuid is None or (t["subjects"] and t["subjects"][0] == uuid)):
            return t
    return None

def fig(t, name, default=None):
    if t is None:
        return default
    return t["figures"].get(name, default)

def timed(stream, reps, op):
    op()  # warm-up, untimed
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record(stream)
        for _ in range(reps):
            op()
        end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) / 1000.0

# torch ordinals follow CUDA's order, like gpudx's; map by UUID to be sure.
def torch_index(uuid):
    for i in range(torch.cuda.device_count()):
        u = str(torch.cuda.get_device_properties(i).uuid)
        if uuid.lower().endswith(u.lower()) or u.lower() in uuid.lower():
            return i
    return gpus.index(next(g for g in gpus if g["uuid"] == uuid))

rows = []
for g in gpus:
    uuid = g["uuid"]
    dev = torch_index(uuid)
    torch.cuda.set_device(dev)
    stream = torch.cuda.current_stream(dev)
    t = test("gpu.d2d", uuid)
    size = int(fig(t, "d2d_bytes", 4 << 30)); reps = int(fig(t, "d2d_repetitions", 20))
    src = torch.empty(size, dtype=torch.uint8, device=dev); dst = torch.empty_like(src)
    s = timed(stream, reps, lambda: dst.copy_(src))
    rows.append((f"d2d  GPU{dev} (r+w)", fig(t, "d2d_gbps"), 2 * size * reps / s / 1e9, size, reps))
    del src, dst
    for kind in ("h2d", "d2h"):
        t = test("gpu." + kind, uuid)
        size = int(fig(t, kind + "_bytes", 1 << 30)); reps = int(fig(t, kind + "_repetitions", 5))
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        d = torch.empty(size, dtype=torch.uint8, device=dev)
        op = (lambda: d.copy_(host, non_blocking=True)) if kind == "h2d" else (lambda: host.copy_(d, non_blocking=True))
        s = timed(stream, reps, op)
        rows.append((f"{kind}  GPU{dev} pinned", fig(t, kind + "_gbps"), size * reps / s / 1e9, size, reps))
        del host, d
    torch.cuda.empty_cache()

for t in tests:
    if t["id"] != "pair.copy" or len(t["subjects"]) != 2:
        continue
    a, b = (torch_index(u) for u in t["subjects"])
    for name, src_i, dst_i in (("a_to_b", a, b), ("b_to_a", b, a)):
        size = int(fig(t, name + "_bytes", 4 << 30)); reps = int(fig(t, name + "_repetitions", 10))
        src = torch.empty(size, dtype=torch.uint8, device=src_i)
        dst = torch.empty(size, dtype=torch.uint8, device=dst_i)
        torch.cuda.set_device(src_i)
        # PyTorch copies between GPUs on the source device's current stream.
        s = timed(torch.cuda.current_stream(src_i), reps, lambda: dst.copy_(src))
        rows.append((f"p2p  GPU{src_i}->GPU{dst_i}", fig(t, name + "_gbps"), size * reps / s / 1e9, size, reps))
        del src, dst
        torch.cuda.empty_cache()

lines = [f"gpudx accept vs PyTorch {torch.__version__} (same sizes; GB = 1e9 bytes; target ratio >= 0.9)",
         f"{'transfer':<22}{'size':>10}{'reps':>6}{'gpudx GB/s':>12}{'torch GB/s':>12}{'ratio':>8}  verdict"]
ok = True
for what, mine, ref, size, reps in rows:
    if mine is None:
        lines.append(f"{what:<22}{size/2**30:>8.2f}Gi{reps:>6}{'n/a':>12}{ref:>12.1f}{'':>8}  gpudx did not measure it")
        ok = False
        continue
    ratio = mine / ref if ref else float("nan")
    good = ratio >= 0.9
    ok &= good
    lines.append(f"{what:<22}{size/2**30:>8.2f}Gi{reps:>6}{mine:>12.1f}{ref:>12.1f}{ratio:>8.3f}  {'ok' if good else 'BELOW 0.9'}")
lines.append("all ratios >= 0.9" if ok else "some ratios below 0.9")
text = "\n".join(lines) + "\n"
open(sys.argv[2], "w").write(text)
print(text)
EOF
echo "== done; files in $OUT"
ls -la "$OUT"
