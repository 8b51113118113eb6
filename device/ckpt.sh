#!/usr/bin/env bash
# gpudx checkpoint/restore/migrate on the real 2xH200 machine, checked by the migrated processes themselves,
# and timed side by side with the raw driver calls made by a minimal controller in the same run.
#
# Run from the repository root on the device machine (as root); results under $OUT:
#   nvidia-smi.txt             the GPUs (index, UUID, bus id, memory)
#   holder-1g.log, holder-16g.log   what each test process printed: after every move, ordinal 0's
#                              cuDeviceGetUuid_v2 and cuDeviceGetPCIBusId, and "memory intact" (or the
#                              first corrupt offset) after re-reading every byte it wrote before
#   gpudx-*.json / gpudx-*.txt every gpudx run (state, migrate there and back, errors)
#   raw-*.txt                  the minimal controller's per-step timings
#   summary.txt                PASS/FAIL lines and the timing table gpudx vs raw (overhead target < 5 %)
#
# What it checks:
#   1. `gpudx migrate PID --device-map swap:0,1` moves a 1 GiB and a 16 GiB process GPU0 -> GPU1 and back;
#      every byte verified by the process after each move; exit 0; final state running.
#   2. Per-step times: gpudx's (timed in its driver worker) vs the raw controller's, same process, same map;
#      end-to-end wall time of `gpudx migrate` vs the raw controller (both include cuInit).
#   3. After the swap the process's ordinal 0 reports GPU1's UUID with GPU0's bus id (the stale bus-id bug)
#      unless the shim is loaded; gpudx warns about it (or, with build-device/libgpudx_shim.so present, a
#      third process started with LD_PRELOAD shows the bus id gpudx's shim answers).
#   4. Real driver errors: checkpoint of an unlocked process (CUDA_ERROR_ILLEGAL_STATE expected, process
#      left running), a bad map (exit 64, nothing locked), two processes migrated together.
set -u
OUT=${OUT:-/tmp/gpudx-ckpt-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN=$ROOT/build-device/gpudx
WORK=$(mktemp -d /tmp/gpudx-ckpt.XXXXXX)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
now() { date +%s.%N; }

if [ ! -x "$BIN" ]; then
    echo "== building gpudx (no prebuilt binary in build-device/)"
    cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && ninja -C build-device gpudx >/dev/null ||
        { echo "build failed"; exit 1; }
fi
unset CUDA_VISIBLE_DEVICES
export CUDA_DEVICE_ORDER=PCI_BUS_ID
nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total,memory.free --format=csv | tee "$OUT/nvidia-smi.txt"

# ---- The test process: holds N GiB on ordinal 0 with a pattern; on each line from its FIFO re-reads all of it.
cat >"$WORK/holder.cpp" <<'EOF'
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include "abi/cuda.hpp"
using namespace gpudx;
template <class F> F sym(void* h, const char* n) { auto p = reinterpret_cast<F>(dlsym(h, n)); if (!p) { std::printf("missing %s\n", n); std::exit(2); } return p; }
#define CK(x) do { int rc_ = (x); if (rc_) { std::printf("FAILED %s = %d\n", #x, rc_); std::fflush(stdout); std::exit(3); } } while (0)
static inline unsigned long long word(size_t i) { return (i * 0x9E3779B97F4A7C15ULL) ^ 0x5bd1e995ULL; }
int main(int argc, char** argv) {
    if (argc < 3) return 64;
    size_t bytes = std::strtoull(argv[1], nullptr, 10) << 30;
    const char* fifo = argv[2];
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { std::printf("no libcuda\n"); return 2; }
    CK(sym<cu::Init>(h, "cuInit")(0));
    auto get = sym<cu::DeviceGet>(h, "cuDeviceGet");
    auto uuid_of = sym<cu::DeviceGetUuid>(h, "cuDeviceGetUuid_v2");
    auto bus_of = sym<cu::DeviceGetPCIBusId>(h, "cuDeviceGetPCIBusId");
    auto retain = sym<cu::DevicePrimaryCtxRetain>(h, "cuDevicePrimaryCtxRetain");
    auto set_current = sym<cu::CtxSetCurrent>(h, "cuCtxSetCurrent");
    auto ctx_device = sym<cu::CtxGetDevice>(h, "cuCtxGetDevice");
    auto alloc = sym<cu::MemAlloc>(h, "cuMemAlloc_v2");
    auto host_alloc = sym<cu::MemHostAlloc>(h, "cuMemHostAlloc");
    auto htod = sym<cu::MemcpyHtoD>(h, "cuMemcpyHtoD_v2");
    auto dtoh = sym<cu::MemcpyDtoH>(h, "cuMemcpyDtoH_v2");
    CUdevice dev0; CK(get(&dev0, 0));
    CUcontext ctx; CK(retain(&ctx, dev0)); CK(set_current(ctx));
    CUdeviceptr d; CK(alloc(&d, bytes));
    const size_t chunk = 256ULL << 20;
    void* hp; CK(host_alloc(&hp, chunk, 0));
    auto* w = static_cast<unsigned long long*>(hp);
    for (size_t off = 0; off < bytes; off += chunk) {
        for (size_t i = 0; i < chunk / 8; ++i) w[i] = word(off / 8 + i);
        CK(htod(d + off, hp, chunk));
    }
    std::printf("ready pid=%d bytes=%zu\n", getpid(), bytes);
    std::fflush(stdout);
    int fd = open(fifo, O_RDWR);  // RDWR: never sees EOF between writers
    FILE* in = fdopen(fd, "r");
    char line[128];
    for (int it = 0; fgets(line, sizeof line, in); ++it) {
        if (!std::strncmp(line, "quit", 4)) break;
        size_t bad = ~size_t{0};
        for (size_t off = 0; off < bytes && bad == ~size_t{0}; off += chunk) {
            CK(dtoh(hp, d + off, chunk));
            for (size_t i = 0; i < chunk / 8; ++i) if (w[i] != word(off / 8 + i)) { bad = off + i * 8; break; }
        }
        for (int ord = 0; ord < 2; ++ord) {
            CUdevice dv; if (get(&dv, ord)) continue;
            CUuuid u; char bus[32] = {};
            uuid_of(&u, dv); bus_of(bus, sizeof bus - 1, dv);
            const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
            std::printf("it=%d ord=%d cuUuid=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x cuBus=%s\n", it, ord,
                        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15], bus);
        }
        CUdevice cur = -1; ctx_device(&cur);
        if (bad == ~size_t{0}) std::printf("it=%d ctxdev=%d memory intact\n", it, cur);
        else std::printf("it=%d ctxdev=%d memory CORRUPT at offset %zu\n", it, cur, bad);
        std::printf("done %d\n", it);
        std::fflush(stdout);
    }
    return 0;
}
EOF

# ---- The minimal controller: the same four driver calls gpudx makes, timed, nothing else.
cat >"$WORK/rawctl.cpp" <<'EOF'
#include <dlfcn.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "abi/cuda.hpp"
using namespace gpudx;
using C = std::chrono::steady_clock;
static double s(C::time_point a) { return std::chrono::duration<double>(C::now() - a).count(); }
int main(int argc, char** argv) {
    auto t_all = C::now();
    int pid = std::atoi(argv[1]);
    if (std::getenv("RAW_WITH_NVML")) {  // as gpudx's worker does: NVML initialised in the same process
        void* nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
        if (nv) reinterpret_cast<int (*)()>(dlsym(nv, "nvmlInit_v2"))();
    }
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    auto t = C::now();
    int rc = reinterpret_cast<cu::Init>(dlsym(h, "cuInit"))(0);
    double init = s(t);
    int n = 0;
    reinterpret_cast<cu::DeviceGetCount>(dlsym(h, "cuDeviceGetCount"))(&n);
    std::vector<CUuuid> uuids(n);
    for (int i = 0; i < n; ++i) {
        CUdevice d; reinterpret_cast<cu::DeviceGet>(dlsym(h, "cuDeviceGet"))(&d, i);
        reinterpret_cast<cu::DeviceGetUuid>(dlsym(h, "cuDeviceGetUuid_v2"))(&uuids[i], d);
    }
    std::vector<CUcheckpointGpuPair> pairs(n);
    for (int i = 0; i < n; ++i) pairs[i] = {uuids[i], uuids[i]};
    if (n >= 2) { pairs[0].newUuid = uuids[1]; pairs[1].newUuid = uuids[0]; }  // swap:0,1
    CUcheckpointLockArgs la{}; CUcheckpointCheckpointArgs ca{}; CUcheckpointRestoreArgs ra{}; CUcheckpointUnlockArgs ua{};
    ra.gpuPairs = pairs.data(); ra.gpuPairsCount = n;
    double ts[4]; int rcs[4];
    t = C::now(); rcs[0] = reinterpret_cast<cu::CheckpointProcessLock>(dlsym(h, "cuCheckpointProcessLock"))(pid, &la); ts[0] = s(t);
    t = C::now(); rcs[1] = reinterpret_cast<cu::CheckpointProcessCheckpoint>(dlsym(h, "cuCheckpointProcessCheckpoint"))(pid, &ca); ts[1] = s(t);
    t = C::now(); rcs[2] = reinterpret_cast<cu::CheckpointProcessRestore>(dlsym(h, "cuCheckpointProcessRestore"))(pid, &ra); ts[2] = s(t);
    t = C::now(); rcs[3] = reinterpret_cast<cu::CheckpointProcessUnlock>(dlsym(h, "cuCheckpointProcessUnlock"))(pid, &ua); ts[3] = s(t);
    std::printf("raw pid=%d init_rc=%d rc=%d,%d,%d,%d init=%.4f lock=%.4f checkpoint=%.4f restore=%.4f unlock=%.4f total=%.4f\n",
                pid, rc, rcs[0], rcs[1], rcs[2], rcs[3], init, ts[0], ts[1], ts[2], ts[3], s(t_all));
    return rcs[0] || rcs[1] || rcs[2] || rcs[3];
}
EOF
g++ -O2 -std=c++20 -I"$ROOT/src" -o "$WORK/holder" "$WORK/holder.cpp" -ldl || { say "FAIL: holder build"; exit 1; }
g++ -O2 -std=c++20 -I"$ROOT/src" -o "$WORK/rawctl" "$WORK/rawctl.cpp" -ldl || { say "FAIL: rawctl build"; exit 1; }

# ---- Helpers
declare -A PIDS FIFOS ITER
start_holder() {  # name GiB [preload]
    local name=$1 gib=$2 preload=${3:-}
    mkfifo "$WORK/$name.fifo"
    FIFOS[$name]=$WORK/$name.fifo
    ITER[$name]=0
    if [ -n "$preload" ]; then
        LD_PRELOAD=$preload "$WORK/holder" "$gib" "$WORK/$name.fifo" >"$OUT/holder-$name.log" 2>&1 &
    else
        "$WORK/holder" "$gib" "$WORK/$name.fifo" >"$OUT/holder-$name.log" 2>&1 &
    fi
    PIDS[$name]=$!
    for _ in $(seq 600); do grep -q '^ready' "$OUT/holder-$name.log" && return 0; sleep 0.1; done
    say "FAIL: holder $name did not start: $(tail -2 "$OUT/holder-$name.log")"; return 1
}
verify_holder() {  # name label -> PASS/FAIL line; prints ordinal 0's identity
    local name=$1 label=$2 it=${ITER[$1]}
    # A dead holder has no reader on its FIFO: never block on it.
    timeout 5 bash -c "echo verify >'${FIFOS[$name]}'" || { say "FAIL: $name $label: holder gone"; return; }
    for _ in $(seq 1200); do grep -q "^done $it\$" "$OUT/holder-$name.log" && break; sleep 0.05; done
    ITER[$name]=$((it + 1))
    local mem id
    mem=$(grep "^it=$it ctxdev" "$OUT/holder-$name.log")
    id=$(grep "^it=$it ord=0" "$OUT/holder-$name.log" | sed 's/^it=[0-9]* //')
    if echo "$mem" | grep -q 'memory intact'; then say "PASS: $name $label: memory intact; $id"
    else say "FAIL: $name $label: ${mem:-no answer}"; fi
}
gpudx_migrate() {  # name tag extra-args...
    local name=$1 tag=$2; shift 2
    local t0 t1 rc
    t0=$(now)
    "$BIN" migrate "${PIDS[$name]}" --device-map swap:0,1 --format json "$@" >"$OUT/gpudx-$tag.json" 2>"$OUT/gpudx-$tag.err"
    rc=$?
    t1=$(now)
    echo "$tag wall=$(python3 -c "print(f'{$t1-$t0:.4f}')") rc=$rc" >>"$WORK/gpudx-walls.txt"
    [ $rc -eq 0 ] && say "PASS: gpudx migrate $tag exit 0" || say "FAIL: gpudx migrate $tag exit $rc: $(head -c 600 "$OUT/gpudx-$tag.err")"
}
raw_migrate() {  # name tag
    local name=$1 tag=$2
    "$WORK/rawctl" "${PIDS[$name]}" >"$OUT/raw-$tag.txt" 2>&1 && say "PASS: raw swap $tag" || say "FAIL: raw swap $tag: $(cat "$OUT/raw-$tag.txt")"
}
cleanup() {
    for n in "${!PIDS[@]}"; do timeout 2 bash -c "echo quit >'${FIFOS[$n]}'" 2>/dev/null; done
    sleep 0.5
    for n in "${!PIDS[@]}"; do kill "${PIDS[$n]}" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# ---- Run
start_holder 1g 1 || exit 1
start_holder 16g 16 || exit 1
verify_holder 1g "before"
verify_holder 16g "before"
"$BIN" state "${PIDS[1g]}" "${PIDS[16g]}" >"$OUT/gpudx-state.txt" 2>&1; say "state: $(tr '\n' ' ' <"$OUT/gpudx-state.txt" | tail -c 200)"

# 1 GiB: three rounds, each: gpudx there and back, raw there and back.
for r in 1 2 3; do
    gpudx_migrate 1g "1g-r$r-there"; verify_holder 1g "after gpudx r$r there"
    gpudx_migrate 1g "1g-r$r-back"; verify_holder 1g "after gpudx r$r back"
    raw_migrate 1g "1g-r$r-there"; verify_holder 1g "after raw r$r there"
    raw_migrate 1g "1g-r$r-back"; verify_holder 1g "after raw r$r back"
done
# 16 GiB: one round.
gpudx_migrate 16g "16g-r1-there"; verify_holder 16g "after gpudx there"
"$BIN" migrate "${PIDS[16g]}" --device-map swap:0,1 >"$OUT/gpudx-16g-r1-back.txt" 2>&1 &&
    say "PASS: gpudx migrate 16g back (text output saved)" || say "FAIL: gpudx migrate 16g back"
verify_holder 16g "after gpudx back"
raw_migrate 16g "16g-r1-there"; verify_holder 16g "after raw there"
raw_migrate 16g "16g-r1-back"; verify_holder 16g "after raw back"

# Two processes in one migrate (lock both, checkpoint both, restore both, unlock both), there and back.
"$BIN" migrate "${PIDS[1g]}" "${PIDS[16g]}" --device-map swap:0,1 --format json >"$OUT/gpudx-both.json" 2>"$OUT/gpudx-both.err" &&
    say "PASS: gpudx migrate of two processes" || say "FAIL: gpudx migrate of two processes: $(head -c 400 "$OUT/gpudx-both.err")"
verify_holder 1g "after two-process migrate"; verify_holder 16g "after two-process migrate"
gpudx_migrate 1g "both-back-1g"; verify_holder 1g "back home"
"$BIN" migrate "${PIDS[16g]}" --device-map swap:0,1 >/dev/null 2>&1; verify_holder 16g "back home"

# Real driver errors.
"$BIN" checkpoint "${PIDS[1g]}" --action checkpoint --format json >"$OUT/gpudx-error-checkpoint-unlocked.json" 2>&1
rc=$?
name=$(python3 -c "import json;d=json.load(open('$OUT/gpudx-error-checkpoint-unlocked.json'));print(d['failure']['name'] if d['failure'] else 'none', d['final_states'][0]['state'])" 2>/dev/null)
[ $rc -eq 1 ] && say "PASS: checkpoint of an unlocked process refused by the driver: exit 1, $name" ||
    say "FAIL: checkpoint of an unlocked process: exit $rc, $name"
verify_holder 1g "after refused checkpoint"
"$BIN" migrate "${PIDS[1g]}" --device-map 0=1 >"$OUT/gpudx-error-badmap.txt" 2>&1
rc=$?
[ $rc -eq 64 ] && say "PASS: bad map exit 64: $(tail -1 "$OUT/gpudx-error-badmap.txt")" || say "FAIL: bad map exit $rc"
"$BIN" state "${PIDS[1g]}" | grep -q running && say "PASS: still running after the bad map" || say "FAIL: not running after bad map"

# With the shim, when the lead carried it: the process should see GPU1's bus id after the swap.
if [ -f "$ROOT/build-device/libgpudx_shim.so" ]; then
    start_holder shim 1 "$ROOT/build-device/libgpudx_shim.so" && {
        verify_holder shim "before (shim)"
        "$BIN" migrate "${PIDS[shim]}" --device-map swap:0,1 >"$OUT/gpudx-shim-there.txt" 2>&1
        say "shim migrate exit $?: $(grep -i -E 'identity|shim|verify' "$OUT/gpudx-shim-there.txt" | head -3 | tr '\n' ' ')"
        verify_holder shim "after swap (shim: cuBus should be GPU1's)"
        "$BIN" migrate "${PIDS[shim]}" --device-map swap:0,1 >/dev/null 2>&1
        verify_holder shim "back (shim)"
    }
else
    say "SKIP: shim check (build-device/libgpudx_shim.so not carried)"
fi
grep -h "shim is not loaded" "$OUT"/gpudx-16g-r1-back.txt >/dev/null && say "PASS: stale-address warning shown without the shim" ||
    say "FAIL: no stale-address warning without the shim"

# ---- Timing table: gpudx (its worker's timing of each driver call) vs raw, and end-to-end wall.
python3 - "$OUT" "$WORK/gpudx-walls.txt" <<'EOF' | tee -a "$SUMMARY"
import glob, json, os, re, statistics, sys
out, walls_file = sys.argv[1], sys.argv[2]
walls = {}
for line in open(walls_file):
    tag, wall, rc = line.split()
    walls[tag] = float(wall.split("=")[1])
steps = ["lock", "checkpoint", "restore", "unlock"]
def gpudx_runs(size):
    runs = []
    for f in sorted(glob.glob(f"{out}/gpudx-{size}-r*-*.json")):
        tag = os.path.basename(f)[6:-5]
        d = json.load(open(f))
        if not d.get("ok"): continue
        t = d["timings"][0]
        runs.append({**{s: t[f"{s}_s"] for s in steps}, "wall": walls.get(tag)})
    return runs
def raw_runs(size):
    runs = []
    for f in sorted(glob.glob(f"{out}/raw-{size}-r*-*.txt")):
        m = dict(re.findall(r"(\w+)=([\d.]+)", open(f).read()))
        if "total" in m: runs.append({**{s: float(m[s]) for s in steps}, "wall": float(m["total"])})
    return runs
print("\nper-step median seconds, gpudx (driver call timed in gpudx's worker) vs raw controller")
print(f"{'size':<5} {'step':<11} {'gpudx':>9} {'raw':>9} {'overhead':>9}  (n gpudx/raw)")
for size in ["1g", "16g"]:
    g, r = gpudx_runs(size), raw_runs(size)
    if not g or not r: print(f"{size}: no data"); continue
    for s in steps + ["wall"]:
        gv = [x[s] for x in g if x[s] is not None]; rv = [x[s] for x in r]
        gm, rm = statistics.median(gv), statistics.median(rv)
        over = (gm - rm) / rm * 100 if rm > 0.001 else float("nan")
        print(f"{size:<5} {s:<11} {gm:9.4f} {rm:9.4f} {over:8.1f}%  ({len(gv)}/{len(rv)})")
    gsum = statistics.median([x["checkpoint"] + x["restore"] for x in g]); rsum = statistics.median([x["checkpoint"] + x["restore"] for x in r])
    print(f"{size:<5} {'ckpt+rest':<11} {gsum:9.4f} {rsum:9.4f} {(gsum - rsum) / rsum * 100:8.1f}%  "
          f"{'PASS' if gsum <= rsum * 1.05 else 'FAIL'} (< 5 % target)")
print("'wall' is the whole command: gpudx migrate (fork, dlopen, cuInit, NVML, validation, 4 calls, verify)\n"
      "vs the raw controller (dlopen, cuInit, 4 calls). lock time varies 0-0.55 s run to run on this machine.")
EOF
echo "== summary"; cat "$SUMMARY"
