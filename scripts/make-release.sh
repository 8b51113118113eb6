#!/usr/bin/env bash
# `make release`: dist/ from a finished build (docs/release.md).
#
#   dist/gpudx, dist/libgpudx_shim.so     stripped; each with its debug information beside it
#   dist/gpudx.debug, ...shim.so.debug    (objcopy --only-keep-debug, found by gdb through .gnu_debuglink)
#   dist/gpudx.1, dist/examples/          the manual page; Slurm, Kubernetes and systemd examples
#   dist/gpudx-VERSION-linux-x86_64.tar.gz   all of the above in one folder
#   dist/gpudx_VERSION_amd64.deb, dist/gpudx-VERSION-1.x86_64.rpm   the packages (cpack)
#   dist/SHA256SUMS
#
# Usage: make-release.sh BUILD_DIR DIST_DIR. Fails when the stripped gpudx is larger than 8 MB, or when the
# build is not the portable one (it would need this machine's glibc).
set -euo pipefail
build=$(realpath "$1") dist=$2
src=$(realpath "$(dirname "$0")/..")
max_bytes=$((8 * 1024 * 1024))
grep -q '^GPUDX_SYSROOT:' "$build/CMakeCache.txt" ||
  { echo "gpudx: $build is not a portable build (configure it with make; docs/release.md)" >&2; exit 1; }
version=$("$build/gpudx" --version | awk '{print $2}')
rm -rf "$dist" && mkdir -p "$dist"
dist=$(realpath "$dist")

for file in gpudx libgpudx_shim.so; do
  objcopy --only-keep-debug --compress-debug-sections=zlib "$build/$file" "$dist/$file.debug"
  strip --strip-unneeded -o "$dist/$file" "$build/$file"
  objcopy --add-gnu-debuglink="$dist/$file.debug" "$dist/$file"
done
chmod 0644 "$dist"/*.debug "$dist/libgpudx_shim.so"
bash "$src/tests/portability/glibc_symbols.sh" "$dist/gpudx" "$dist/libgpudx_shim.so"
size=$(stat -c %s "$dist/gpudx")
echo "gpudx stripped: $size bytes (limit $max_bytes)"
((size <= max_bytes)) || { echo "gpudx: the stripped binary is larger than 8 MB" >&2; exit 1; }

cp "$src/docs/gpudx.1" "$dist/gpudx.1"
mkdir -p "$dist/examples"
cp -r "$src/examples/." "$dist/examples/"
cp -r "$src/deploy/." "$dist/examples/"
cp "$src/data/xid-policy.toml" "$src/README.md" "$dist/"

folder=gpudx-$version-linux-x86_64
tar -C "$dist" --transform "s,^\.,$folder," --owner=0 --group=0 --sort=name -czf "$dist.tar.gz.tmp" .
mv "$dist.tar.gz.tmp" "$dist/$folder.tar.gz"

cpack --config "$build/CPackConfig.cmake" -G "DEB;RPM" -B "$build/release-packages" > "$build/release-cpack.log" 2>&1 ||
  { tail -30 "$build/release-cpack.log" >&2; exit 1; }
cp "$build"/release-packages/*.deb "$build"/release-packages/*.rpm "$dist/"
(cd "$dist" && sha256sum -- *.tar.gz *.deb *.rpm gpudx libgpudx_shim.so > SHA256SUMS)
ls -l "$dist"
