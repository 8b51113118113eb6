#!/usr/bin/env bash
# Builds gpudx on the GPU machine (headers carried in .device-carry/include) and runs the named device
# scripts, each with its own output folder, packed into $OUT/<name>.tar.gz.
set -u
start=$(date +%s)
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUDX_BUILD_TESTS=OFF \
  -DGPUDX_HEADERS_DIR=$PWD/.device-carry/include > $OUT/build.log 2>&1 &&
  ninja -C build-device -j16 gpudx gpudx_shim >> $OUT/build.log 2>&1
echo "build rc=$? in $(( $(date +%s) - start )) s" | tee -a $OUT/build.log
grep -E "error" $OUT/build.log | head -20
for name in "$@"; do
  mkdir -p /tmp/out-$name
  echo "== $name"
  OUT=/tmp/out-$name timeout ${LIMIT:-280} bash device/$name.sh > /tmp/out-$name/console.log 2>&1
  echo "$name rc=$?"
  tail -25 /tmp/out-$name/console.log
  tar -C /tmp -czf $OUT/$name.tar.gz out-$name
done
