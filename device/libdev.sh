#!/usr/bin/env bash
# Checks the libraries / devices / environment collectors of gpudx against the real 2×H200 node.
# Run from the repo root as root; uses build-device/gpudx when carried, else builds it. Results in $OUT/libdev/.
#  1. parse_ld_so_cache on the real /etc/ld.so.cache vs `ldconfig -p` (the unit test AgreesWithLdconfigOnThisMachine)
#  2. gpudx snapshot's libraries layer vs `ldconfig -p | grep libcuda` and `readlink -f` of each copy
#     (expect two libcuda.so.1 copies: /usr/local/nvidia/lib64 chosen, /lib second; versions 580.159.04)
#  3. device nodes vs `ls -l /dev/nvidia*`, and the holders scan while a CUDA process holds GPU 1
#     (expect a devices.holder finding for that pid naming GPU-40cd403d-... at 0000:00:07.0)
#  4. CUDA_VISIBLE_DEVICES=1,0 diagnose: allocation.visible_by_index + index_without_pci_order
set -uo pipefail
OUT=${OUT:-/tmp/out}; R="$OUT/libdev"; mkdir -p "$R"
GPUDX=build-device/gpudx
if [ ! -x "$GPUDX" ]; then
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$R/cmake.log" 2>&1 &&
    ninja -C build-device gpudx gpudx_unit_tests >"$R/build.log" 2>&1 || { echo "build failed"; tail -50 "$R/build.log"; }
fi
[ -x build-device/gpudx_unit_tests ] || [ -x build-device/tests/gpudx_unit_tests ] && \
  $(ls build-device/gpudx_unit_tests build-device/tests/gpudx_unit_tests 2>/dev/null | head -1) \
    --gtest_filter='LdSoCache.*:LdconfigP.*:Libraries.*:Devices.*:Environment.*' >"$R/unit.txt" 2>&1
ldconfig -p >"$R/ldconfig-p.txt" 2>&1
for p in $(ldconfig -p | grep -E 'lib(cuda|nvidia-ml|cudart)\.so' | awk '{print $NF}'); do
  echo "$p -> $(readlink -f "$p")"; done >"$R/readlink.txt"
ls -l /dev/nvidia* /dev/nvidia-caps/ /dev/kfd /dev/dri/render* >"$R/ls-dev.txt" 2>&1
"$GPUDX" snapshot >"$R/snapshot.json" 2>"$R/snapshot.err"
python3 - "$R/snapshot.json" >"$R/summary.txt" 2>&1 <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for lib in s["libraries"]["libraries"]:
    c = lib["chosen"] or {}
    print(lib["soname"], "->", c.get("path"), c.get("real_path"), c.get("version"), "|", lib["reason"])
    for cp in lib["copies"]:
        print("   copy", cp["path"], cp["real_path"], cp["version"], cp["found_by"])
print("cache:", s["libraries"]["ld_so_cache_format"], s["libraries"]["ld_so_cache_source"])
for n in s["devices"]["nodes"]: print("node", n)
print("holders", s["devices"]["holders"])
print("container", s["environment"]["container"])
print([c for c in s["collectors"] if c["name"] in ("libraries", "devices", "environment")])
PY
# A process holding GPU 1 while we look.
python3 -c 'import torch,time; torch.zeros(1,device="cuda:1"); time.sleep(25)' >"$R/holder.log" 2>&1 &
HOLDER=$!; sleep 12
"$GPUDX" diagnose --format json >"$R/diagnose-holder.json" 2>&1
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
CUDA_VISIBLE_DEVICES=1,0 "$GPUDX" diagnose --format json >"$R/diagnose-by-index.json" 2>&1
echo "done; see $R"
