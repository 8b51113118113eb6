#!/usr/bin/env bash
# device/shim.sh — on the real 2×H200 node: reproduce the stale bus-id bug of a CUDA checkpoint/restore
# that swaps the two GPUs, and check that libgpudx_shim.so corrects it.
#
# A small controller (built here with g++) calls cuCheckpointProcessLock / Checkpoint /
# Restore(gpuPairs {GPU0->GPU1, GPU1->GPU0}) / Unlock on the target PIDs. Targets:
#   (a) drv   a driver-API program (linked to libcuda.so.1; also cuGetProcAddress and NVML by bus id)
#   (b) rt    a CUDA-runtime program built with nvcc (static cudart): cudaDeviceGetPCIBusId,
#             cudaGetDeviceProperties pciBusID/pciDeviceID, cudaDeviceGetAttribute, cudaGetDriverEntryPoint
#   (c) nccl  two PyTorch ranks (torch.distributed, NCCL, one GPU each): all-reduce before; checkpoint/restore
#             both with the swap; then a NEW NCCL communicator and an all-reduce after
# each without the shim (the bug must show: a stale bus id; if it does not, that is reported as a failure
# of the reproduction) and with LD_PRELOAD=libgpudx_shim.so (every live path must report the new GPU's
# bus id; NCCL init + all-reduce must pass). Raw before/after lines go to $OUT/<target>-<variant>*.log,
# the verdicts to $OUT/summary.txt. Runs as root from the repository root; ~3-5 minutes.
# SHIM_CASES="nccl" runs only some cases (drv also runs rt); MIGRATE_WITH_GPUDX=1 moves the targets with
# `gpudx migrate PID... --device-map swap:0,1` (build-device/gpudx) instead of the small controller.
set -u
OUT=${OUT:-$PWD/out-shim}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpudx-shim-dev.XXXXXX)
exec > >(tee "$OUT/summary.txt") 2>&1
T0=$(date +%s)
FAILURES=0
pass() { echo "PASS: $*"; }
failed() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
note() { echo "NOTE: $*"; }

nvidia-smi --query-gpu=index,uuid,pci.bus_id,persistence_mode --format=csv,noheader | tee "$OUT/gpus.txt"
LIBCUDA=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
echo "libcuda: $LIBCUDA"

# ---- the shim ----
SHIM=$PWD/build-device/libgpudx_shim.so
if [[ ! -f $SHIM ]]; then
  SHIM=$W/libgpudx_shim.so
  for std in c++23 c++20 c++17; do
    g++ -std=$std -O2 -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden -fno-exceptions -Isrc \
      src/shim/*.cpp -o "$SHIM" -ldl -lpthread -static-libstdc++ -static-libgcc -Wl,--no-undefined 2>"$W/shim-build.err" && break
  done
  [[ -f $SHIM ]] || { cat "$W/shim-build.err"; failed "could not build the shim"; exit 1; }
fi
echo "shim: $SHIM"; nm -D --defined-only "$SHIM" | awk '{print "  exports " $3}'
GPUDX=$PWD/build-device/gpudx
[[ -x $GPUDX ]] || GPUDX=""

# ---- controller ----
cat > "$W/ctl.cpp" <<'EOF'
// ctl PID...: lock all, checkpoint all, restore all with GPU0<->GPU1 swapped, unlock all.
#include <dlfcn.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
typedef int CUresult;
struct CUuuid { unsigned char b[16]; };
struct LockArgs { unsigned timeoutMs, r0; unsigned long long r1[7]; };
struct Args64 { unsigned long long r[8]; };
struct Pair { CUuuid o, n; };
struct RestoreArgs { Pair* pairs; unsigned count; char reserved[52 - sizeof(Pair*)]; unsigned long long r1; };
static_assert(sizeof(RestoreArgs) == 64, "layout");
static void* h;
template <class F> F sym(const char* n) { void* p = dlsym(h, n); if (!p) { printf("missing %s\n", n); exit(3); } return (F)p; }
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static void uuid_text(const CUuuid& u, char* out) {
  sprintf(out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u.b[0], u.b[1], u.b[2], u.b[3],
          u.b[4], u.b[5], u.b[6], u.b[7], u.b[8], u.b[9], u.b[10], u.b[11], u.b[12], u.b[13], u.b[14], u.b[15]);
}
int main(int argc, char** argv) {
  h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) { printf("dlopen libcuda: %s\n", dlerror()); return 3; }
  auto init = sym<CUresult (*)(unsigned)>("cuInit");
  auto get = sym<CUresult (*)(int*, int)>("cuDeviceGet");
  auto uuid = sym<CUresult (*)(CUuuid*, int)>("cuDeviceGetUuid_v2");
  auto lock = sym<CUresult (*)(int, LockArgs*)>("cuCheckpointProcessLock");
  auto ckpt = sym<CUresult (*)(int, Args64*)>("cuCheckpointProcessCheckpoint");
  auto restore = sym<CUresult (*)(int, RestoreArgs*)>("cuCheckpointProcessRestore");
  auto unlock = sym<CUresult (*)(int, Args64*)>("cuCheckpointProcessUnlock");
  auto state = sym<CUresult (*)(int, int*)>("cuCheckpointProcessGetState");
  double t = now();
  CUresult rc = init(0);
  printf("cuInit rc=%d %.3f s\n", rc, now() - t);
  CUuuid u[2];
  for (int d = 0; d < 2; ++d) { int dev = 0; get(&dev, d); uuid(&u[d], dev); char s[48]; uuid_text(u[d], s); printf("ctl ordinal %d %s\n", d, s); }
  Pair pairs[2] = {{u[0], u[1]}, {u[1], u[0]}};
  std::vector<int> pids;
  for (int i = 1; i < argc; ++i) pids.push_back(atoi(argv[i]));
  int bad = 0;
  auto step = [&](const char* name, auto fn) {
    for (int pid : pids) { double t0 = now(); CUresult r = fn(pid); int st = -1; state(pid, &st);
      printf("%s pid=%d rc=%d state=%d %.3f s\n", name, pid, r, st, now() - t0); fflush(stdout); bad |= r != 0; }
  };
  step("lock", [&](int pid) { LockArgs a; memset(&a, 0, sizeof a); a.timeoutMs = 20000; return lock(pid, &a); });
  if (bad) return 1;
  step("checkpoint", [&](int pid) { Args64 a; memset(&a, 0, sizeof a); return ckpt(pid, &a); });
  step("restore", [&](int pid) { RestoreArgs a; memset(&a, 0, sizeof a); a.pairs = pairs; a.count = 2; return restore(pid, &a); });
  step("unlock", [&](int pid) { Args64 a; memset(&a, 0, sizeof a); return unlock(pid, &a); });
  return bad ? 1 : 0;
}
EOF
g++ -O2 -std=c++17 -o "$W/ctl" "$W/ctl.cpp" -ldl || { failed "controller build"; exit 1; }

# ---- (a) driver-API target ----
cat > "$W/drv.cpp" <<'EOF'
// drv GOFILE: context + 256 MiB on ordinal 0; identity of both ordinals before and after the restore.
#include <dlfcn.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
extern "C" {
int cuInit(unsigned); int cuDeviceGetCount(int*); int cuDeviceGetPCIBusId(char*, int, int);
int cuDeviceGetAttribute(int*, int, int); int cuDeviceGetUuid_v2(unsigned char*, int);
int cuDeviceGetByPCIBusId(int*, const char*);
int cuDevicePrimaryCtxRetain(void**, int); int cuCtxSetCurrent(void*);
int cuMemAlloc_v2(unsigned long long*, size_t); int cuMemsetD8_v2(unsigned long long, unsigned char, size_t);
int cuMemcpyDtoH_v2(void*, unsigned long long, size_t); int cuCtxSynchronize();
int cuGetProcAddress_v2(const char*, void**, int, unsigned long long, int*);
}
typedef int (*BusFn)(char*, int, int);
typedef int (*NvmlByBus)(const char*, void**);
typedef int (*NvmlUuid)(void*, char*, unsigned);
static NvmlByBus nvml_by_bus; static NvmlUuid nvml_uuid;
static void uuid_text(int d, char* out) {
  unsigned char u[16] = {}; cuDeviceGetUuid_v2(u, d);
  sprintf(out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4], u[5],
          u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}
static void report(const char* phase) {
  int n = 0; cuDeviceGetCount(&n);
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  void* gp2 = dlsym(h, "cuGetProcAddress_v2");
  typedef int (*GP2)(const char*, void**, int, unsigned long long, int*);
  void* self = nullptr; int st = 0; ((GP2)gp2)("cuGetProcAddress", &self, 12000, 0, &st);
  void* viaproc = nullptr; ((GP2)self)("cuDeviceGetPCIBusId", &viaproc, 12000, 0, &st);
  for (int d = 0; d < n; ++d) {
    char bus[32] = {}, bus2[32] = {}, uuid[64], nv[96] = "-";
    cuDeviceGetPCIBusId(bus, sizeof bus, d);
    ((BusFn)viaproc)(bus2, sizeof bus2, d);
    int dom = -1, b = -1, dev = -1, back = -1; cuDeviceGetAttribute(&dom, 50, d); cuDeviceGetAttribute(&b, 33, d);
    cuDeviceGetAttribute(&dev, 34, d); cuDeviceGetByPCIBusId(&back, bus);
    uuid_text(d, uuid);
    char nvbus[32]; snprintf(nvbus, sizeof nvbus, "0000%s", bus);
    void* hd = nullptr; int rc = nvml_by_bus(nvbus, &hd);
    if (rc == 0) nvml_uuid(hd, nv, sizeof nv);
    printf("%s ord=%d cuBus=%s getprocBus=%s attr=%d:%d:%d byBus->%d cuUuid=%s | nvmlByBus(rc=%d)->%s %s\n", phase, d, bus, bus2,
           dom, b, dev, back, uuid, rc, nv, strcmp(nv, uuid) == 0 && strcmp(bus, bus2) == 0 ? "CONSISTENT" : "MISMATCH");
  }
  fflush(stdout);
}
int main(int argc, char** argv) {
  cuInit(0);
  void* nh = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  ((int (*)())dlsym(nh, "nvmlInit_v2"))();
  nvml_by_bus = (NvmlByBus)dlsym(nh, "nvmlDeviceGetHandleByPciBusId_v2");  // NCCL's way
  nvml_uuid = (NvmlUuid)dlsym(nh, "nvmlDeviceGetUUID");
  void* ctx; cuDevicePrimaryCtxRetain(&ctx, 0); cuCtxSetCurrent(ctx);
  unsigned long long p; size_t bytes = 256u << 20; cuMemAlloc_v2(&p, bytes); cuMemsetD8_v2(p, 0x5a, bytes); cuCtxSynchronize();
  report("before");
  printf("READY %d\n", getpid()); fflush(stdout);
  while (access(argv[1], F_OK) != 0) usleep(20000);
  report("after");
  unsigned char buf[4096]; cuMemcpyDtoH_v2(buf, p + bytes - sizeof buf, sizeof buf);
  bool intact = true; for (unsigned char c : buf) intact &= c == 0x5a;
  printf("after memory %s\n", intact ? "intact" : "CORRUPT");
  int v; auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000000; ++i) cuDeviceGetAttribute(&v, 34, 0);
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000000; ++i) cuDeviceGetAttribute(&v, 16, 0);
  auto t2 = std::chrono::steady_clock::now();
  printf("timing cuDeviceGetAttribute(PCI_DEVICE_ID) %.1f ns/call, (MULTIPROCESSOR_COUNT) %.1f ns/call\n",
         std::chrono::duration<double, std::nano>(t1 - t0).count() / 1e6, std::chrono::duration<double, std::nano>(t2 - t1).count() / 1e6);
  sleep(atoi(argc > 2 ? argv[2] : "0"));
  return 0;
}
EOF
g++ -O2 -std=c++17 -o "$W/drv" "$W/drv.cpp" "$LIBCUDA" -ldl || failed "drv build"

# ---- (b) CUDA-runtime target (nvcc, static cudart) ----
cat > "$W/rt.cu" <<'EOF'
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
typedef int (*NvmlByBus)(const char*, void**);
typedef int (*NvmlUuid)(void*, char*, unsigned);
static NvmlByBus nvml_by_bus; static NvmlUuid nvml_uuid;
static void live_uuid(int d, char* out) {
  CUuuid u; memset(&u, 0, sizeof u); cuDeviceGetUuid_v2(&u, d); const unsigned char* b = (const unsigned char*)u.bytes;
  sprintf(out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
          b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
static void report(const char* phase) {
  int n = 0; cudaGetDeviceCount(&n);
  for (int d = 0; d < n; ++d) {
    char bus[32] = {}, uuid[64], nv[96] = "-", ep[32] = "-";
    cudaDeviceGetPCIBusId(bus, sizeof bus, d);
    cudaDeviceProp p; cudaGetDeviceProperties(&p, d);
    int attr = -1; cudaDeviceGetAttribute(&attr, cudaDevAttrPciDeviceId, d);
    void* fn = nullptr;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult q; cudaGetDriverEntryPointByVersion("cuDeviceGetPCIBusId", &fn, 12000, cudaEnableDefault, &q);
#endif
    if (fn) ((CUresult (*)(char*, int, CUdevice))fn)(ep, sizeof ep, d);
    live_uuid(d, uuid);
    char nvbus[40]; snprintf(nvbus, sizeof nvbus, "0000%s", bus);
    void* hd = nullptr; int rc = nvml_by_bus(nvbus, &hd);
    if (rc == 0) nvml_uuid(hd, nv, sizeof nv);
    printf("%s ord=%d cudaBus=%s entryPointBus=%s attrDev=%d props(cached)=%04x:%02x:%02x uuid=%s | nvmlByBus(rc=%d)->%s %s\n", phase, d,
           bus, ep, attr, p.pciDomainID, p.pciBusID, p.pciDeviceID, uuid, rc, nv,
           strcmp(nv, uuid) == 0 && (!fn || strcmp(ep, bus) == 0) ? "CONSISTENT" : "MISMATCH");
  }
  fflush(stdout);
}
int main(int argc, char** argv) {
  void* nh = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  ((int (*)())dlsym(nh, "nvmlInit_v2"))();
  nvml_by_bus = (NvmlByBus)dlsym(nh, "nvmlDeviceGetHandleByPciBusId_v2");
  nvml_uuid = (NvmlUuid)dlsym(nh, "nvmlDeviceGetUUID");
  cudaSetDevice(0);
  void* p; cudaMalloc(&p, 64 << 20); cudaMemset(p, 0x5a, 64 << 20); cudaDeviceSynchronize();
  report("before");
  printf("READY %d\n", getpid()); fflush(stdout);
  while (access(argv[1], F_OK) != 0) usleep(20000);
  report("after");
  unsigned char c = 0; cudaMemcpy(&c, (char*)p + 12345, 1, cudaMemcpyDeviceToHost);
  printf("after memory %s\n", c == 0x5a ? "intact" : "CORRUPT");
  return 0;
}
EOF
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
HAVE_RT=0
if [[ -n $NVCC ]]; then
  "$NVCC" --version | tail -2
  "$NVCC" -O2 -o "$W/rt" "$W/rt.cu" -lcuda -ldl 2>"$W/rt-build.err" && HAVE_RT=1 || { cat "$W/rt-build.err"; failed "rt build"; }
else
  failed "nvcc not found"
fi

# ---- (c) PyTorch + NCCL job ----
cat > "$W/job.py" <<'EOF'
import ctypes, os, sys, time, datetime
import torch, torch.distributed as dist
rank, go, tag = int(sys.argv[1]), sys.argv[2], sys.argv[3]
libcuda = ctypes.CDLL("libcuda.so.1")
def live(d):
    bus = ctypes.create_string_buffer(32); libcuda.cuDeviceGetPCIBusId(bus, 32, d)
    u = (ctypes.c_ubyte * 16)(); libcuda.cuDeviceGetUuid_v2(u, d)
    h = bytes(u).hex(); uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return bus.value.decode(), uuid
def report(phase):
    d = torch.cuda.current_device()
    bus, uuid = live(d)
    p = torch.cuda.get_device_properties(d)
    cached = f"{getattr(p, 'pci_domain_id', -1):04x}:{getattr(p, 'pci_bus_id', -1):02x}:{getattr(p, 'pci_device_id', -1):02x}"
    print(f"{phase} rank={rank} ord={d} cuBus={bus} uuid={uuid} torchProps(cached)={cached} torchUuid(cached)=GPU-{p.uuid}", flush=True)
def allreduce(phase, init_file):
    t = time.time()
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", rank))
    x = torch.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(x); torch.cuda.synchronize()
    ok = bool((x == 3.0).all())
    print(f"{phase} rank={rank} nccl_init+allreduce {'OK' if ok else 'WRONG'} value={x[0].item()} {time.time()-t:.2f} s", flush=True)
    dist.destroy_process_group()
torch.cuda.set_device(rank)
keep = torch.full((64 << 20,), 7, dtype=torch.uint8, device="cuda")
report("before")
allreduce("before", f"{go}.store1")
print(f"READY {os.getpid()}", flush=True)
while not os.path.exists(go): time.sleep(0.02)
report("after")
try:
    allreduce("after", f"{go}.store2")
except Exception as e:
    print(f"after rank={rank} nccl_init+allreduce FAILED {type(e).__name__}: {e}", flush=True)
print(f"after rank={rank} memory {'intact' if bool((keep == 7).all()) else 'CORRUPT'}", flush=True)
EOF

# ---- running a scenario ----
# run_case NAME PRELOAD(0/1) NTARGETS CMD... ; the command gets GOFILE appended (and RANK for nccl).
run_case() {
  local name=$1 preload=$2; shift 2
  local go=$W/go.$name
  rm -f "$go" "$go".store*
  local env_pre=()
  [[ $preload == 1 ]] && env_pre=(env LD_PRELOAD="$SHIM" GPUDX_SHIM_LOG="$OUT/$name.shimlog")
  local pids=() logs=()
  if [[ $1 == nccl ]]; then
    for r in 0 1; do
      "${env_pre[@]}" python3 "$W/job.py" $r "$go" "$name" >"$OUT/$name-rank$r.log" 2>&1 &
      pids+=($!); logs+=("$OUT/$name-rank$r.log")
    done
  else
    "${env_pre[@]}" "$@" "$go" 6 >"$OUT/$name.log" 2>&1 &
    pids+=($!); logs+=("$OUT/$name.log")
  fi
  local targets=()
  for log in "${logs[@]}"; do
    for _ in $(seq 1 900); do grep -q '^READY' "$log" && break; sleep 0.1; done
    local pid; pid=$(awk '/^READY/{print $2}' "$log")
    [[ -n $pid ]] || { failed "$name: target never became ready"; cat "$log"; kill "${pids[@]}" 2>/dev/null; return 1; }
    targets+=("$pid")
  done
  if [[ ${MIGRATE_WITH_GPUDX:-0} == 1 && -n $GPUDX ]]; then
    # The whole job through gpudx: every rank locked before any is checkpointed, then restored, unlocked.
    "$GPUDX" migrate "${targets[@]}" --device-map swap:0,1 >"$OUT/$name.ctl.log" 2>&1 ||
      { failed "$name: gpudx migrate failed"; cat "$OUT/$name.ctl.log"; }
  else
    "$W/ctl" "${targets[@]}" >"$OUT/$name.ctl.log" 2>&1 || { failed "$name: checkpoint/restore failed"; cat "$OUT/$name.ctl.log"; }
  fi
  touch "$go"
  # verify while the drv target lingers after its report
  if [[ -n $GPUDX && $name == drv-* ]]; then
    sleep 2; "$GPUDX" verify "${targets[0]}" >"$OUT/$name.verify.txt" 2>&1; echo "verify exit $?" >>"$OUT/$name.verify.txt"
  fi
  for p in "${pids[@]}"; do timeout 120 tail --pid="$p" -f /dev/null; done
  wait "${pids[@]}" 2>/dev/null
  echo "---- $name"; cat "$OUT/$name.ctl.log"; cat "${logs[@]}" | grep -E '^(before|after|timing)'
}

# Judges the "after" lines. Without the shim at least one live line must be MISMATCH (the bug shows);
# with it every live line must be CONSISTENT.
judge() {
  local name=$1 preload=$2; shift 2
  local after; after=$(cat "$@" | grep '^after ord=')
  if [[ -z $after ]]; then failed "$name: no after lines"; return; fi
  if [[ $preload == 0 ]]; then
    grep -q MISMATCH <<<"$after" && pass "$name: the stale bus id shows without the shim" ||
      failed "$name: the bug did not reproduce (no MISMATCH after the swap restore)"
  else
    grep -q MISMATCH <<<"$after" && failed "$name: a path still reports a stale bus id with the shim" ||
      pass "$name: every live path reports the new GPU's bus id with the shim"
  fi
  cat "$@" | grep -q 'memory CORRUPT' && failed "$name: device memory corrupted"
}

# SHIM_CASES picks the cases (default all): drv, rt, nccl.
CASES=" ${SHIM_CASES:-drv rt nccl} "
for v in 0 1; do
  label=$([[ $v == 1 ]] && echo shim || echo noshim)
  [[ $CASES == *" drv "* ]] || continue
  run_case drv-$label $v "$W/drv"; judge drv-$label $v "$OUT/drv-$label.log"
  if [[ $HAVE_RT == 1 ]]; then
    run_case rt-$label $v "$W/rt"; judge rt-$label $v "$OUT/rt-$label.log"
  fi
done

# NCCL: rank 0's cuBus after the restore must be GPU1's address with the shim, GPU0's without.
BUS0=$(awk -F', ' 'NR==1{print $3}' "$OUT/gpus.txt" | sed 's/^0000//')
BUS1=$(awk -F', ' 'NR==2{print $3}' "$OUT/gpus.txt" | sed 's/^0000//')
for v in 0 1; do
  label=$([[ $v == 1 ]] && echo shim || echo noshim)
  [[ $CASES == *" nccl "* ]] || continue
  run_case nccl-$label $v nccl
  r0=$(grep '^after rank=0 ord' "$OUT/nccl-$label-rank0.log" | sed 's/.*cuBus=\([^ ]*\).*/\1/')
  want=$([[ $v == 1 ]] && echo "$BUS1" || echo "$BUS0")
  [[ ${r0^^} == "${want^^}" ]] && pass "nccl-$label: rank 0 reports $r0 after the swap (want $want)" ||
    failed "nccl-$label: rank 0 reports ${r0:-nothing} after the swap, want $want"
  n_ok=$(cat "$OUT"/nccl-$label-rank*.log | grep -c '^after rank=.*nccl_init+allreduce OK')
  if [[ $v == 1 ]]; then
    [[ $n_ok == 2 ]] && pass "nccl-shim: new communicator + all-reduce passed on both ranks" ||
      failed "nccl-shim: new communicator + all-reduce passed on $n_ok of 2 ranks"
  else
    note "nccl-noshim: new communicator + all-reduce passed on $n_ok of 2 ranks (on one node both bus ids exist)"
  fi
  (( $(date +%s) - T0 > 330 )) && { note "time budget reached"; break; }
done

echo "---- shim logs"; cat "$OUT"/*.shimlog 2>/dev/null | head -40
echo "---- gpudx verify"; cat "$OUT"/*.verify.txt 2>/dev/null
echo "elapsed $(( $(date +%s) - T0 )) s; failures: $FAILURES"
rm -rf "$W"
exit $((FAILURES > 0))
