#!/usr/bin/env bash
# The end-of-session run on the GPU machine: build everything, re-gather tests/fixtures/h200x2-gathered with
# the fresh binary (its tarball comes back in $OUT), run the whole ctest suite, then a two-rank NCCL job
# moved by `gpudx migrate` with the shim (device/shim.sh), and the snapshot speed table (device/speed.sh).
set -u
start=$(date +%s)
cmake -S . -B build-ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUDX_HEADERS_DIR=$PWD/.device-carry/include \
  -DGPUDX_GTEST_SOURCE=$PWD/.device-carry/googletest > $OUT/ci-build.log 2>&1
ninja -C build-ci -k 0 -j32 >> $OUT/ci-build.log 2>&1
echo "build rc=$? in $(( $(date +%s) - start )) s"
grep -E "error:|FAILED" $OUT/ci-build.log | head -20
mkdir -p build-device && cp build-ci/gpudx build-ci/libgpudx_shim.so build-device/ 2>/dev/null
rm -rf tests/fixtures/h200x2-gathered
build-device/gpudx gather --dir tests/fixtures/h200x2-gathered 2>&1 | tail -4
tar -czf $OUT/h200x2-gathered.tar.gz -C tests/fixtures h200x2-gathered
(cd build-ci && LD_LIBRARY_PATH=$PWD/../.device-carry/lib timeout 300 ctest -j16 --timeout 120 --output-on-failure > $OUT/ctest.log 2>&1)
echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|Skipped" $OUT/ctest.log | head -40
SHIM_CASES=nccl MIGRATE_WITH_GPUDX=1 OUT=$OUT/shim timeout 200 bash device/shim.sh > /dev/null 2>&1
grep -E "PASS|FAIL|NOTE" $OUT/shim/summary.txt
OUT=$OUT/speed timeout 120 bash device/speed.sh > /dev/null 2>&1; cat $OUT/speed/summary.txt
