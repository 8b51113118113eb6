#!/usr/bin/env bash
# The Debian package: cpack builds it from the build tree; it is unpacked (dpkg-deb -x) into a scratch root,
# and the unpacked binary runs — version, the built-in Xid policy, a diagnosis of the h200x2 capture. The
# shim, the manual page, the Xid policy file and the examples must be in it, and it may depend on libc6 only.
# Usage: package.sh BUILD_DIR SOURCE_DIR WORK_DIR. Exit 77 (skip) without cpack/dpkg-deb unless
# GPUDX_REQUIRE_INTEGRATION=1.
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") work=$3
source "$src/tests/integration/lib.sh"
require_cmd cpack dpkg-deb
rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/out" > "$work/cpack.log" 2>&1 ||
  fail "cpack failed: $(tail -20 "$work/cpack.log")"
debs=("$work"/out/*.deb)
[[ ${#debs[@]} == 1 && -f ${debs[0]} ]] || fail "expected one .deb in $work/out: ${debs[*]}"
deb=${debs[0]}
version=$(sed -n 's/^project(gpudx VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ $(basename "$deb") == gpudx_${version}_*.deb ]] || fail "package file name $(basename "$deb")"
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

dpkg-deb -f "$deb" Package Version Maintainer Depends | tee "$work/control"
[[ $(dpkg-deb -f "$deb" Package) == gpudx ]] || fail "Package field"
depends=$(dpkg-deb -f "$deb" Depends)
# libstdc++ is static and the NVIDIA libraries are dlopen'ed: glibc is the only dependency.
for dep in ${depends//,/ }; do
  [[ $dep == libc6 || $dep == "(>="* || $dep == *")" ]] || fail "unexpected dependency $dep in: $depends"
done
[[ $depends == libc6* ]] || fail "Depends does not name libc6: '$depends'"

root=$work/root
dpkg-deb -x "$deb" "$root"
for f in usr/bin/gpudx usr/lib/gpudx/libgpudx_shim.so usr/share/man/man1/gpudx.1.gz usr/share/gpudx/xid-policy.toml \
         usr/share/doc/gpudx/README.md usr/share/doc/gpudx/docs/integration.md \
         usr/share/doc/gpudx/examples/slurm/prolog.sh usr/share/doc/gpudx/examples/slurm/epilog.sh \
         usr/share/doc/gpudx/examples/slurm/healthcheck.sh usr/share/doc/gpudx/examples/kubernetes/daemonset.yaml \
         usr/share/doc/gpudx/examples/kubernetes/npd-gpudx.json usr/share/doc/gpudx/examples/systemd/gpudx-boot.service \
         usr/share/doc/gpudx/examples/systemd/gpudx-check.timer; do
  [[ -f $root/$f ]] || fail "$f is not in the package"
done
[[ -x $root/usr/bin/gpudx && -x $root/usr/share/doc/gpudx/examples/slurm/prolog.sh ]] || fail "not executable"
gzip -t "$root/usr/share/man/man1/gpudx.1.gz" || fail "manual page is not valid gzip"
zcat "$root/usr/share/man/man1/gpudx.1.gz" | grep -q '^\.TH GPUDX 1' || fail "manual page has no .TH"
if command -v man >/dev/null; then
  warnings=$(man -l --warnings "$root/usr/share/man/man1/gpudx.1.gz" 2>&1 >/dev/null || true)
  [[ -z $warnings ]] || fail "man reports: $warnings"
fi
# Stripped, and no libstdc++ at run time.
if command -v ldd >/dev/null; then
  ! ldd "$root/usr/bin/gpudx" | grep -q 'libstdc++' || fail "the binary needs libstdc++: $(ldd "$root/usr/bin/gpudx")"
fi

bin=$root/usr/bin/gpudx
out=$("$bin" --version)
[[ $out == "gpudx $version" ]] || fail "--version printed '$out'"
# The Xid policy is compiled in: the unpacked binary needs no data directory to explain an Xid ...
"$bin" xid 79 | grep -qi "fallen off the bus" || fail "gpudx xid 79 from the package: $("$bin" xid 79 2>&1)"
# ... and the shipped file is a valid policy for --xid-policy.
"$bin" xid 79 --xid-policy "$root/usr/share/gpudx/xid-policy.toml" >/dev/null || fail "shipped xid-policy.toml rejected"
rc=0
"$bin" diagnose --root "$src/tests/fixtures/h200x2" --no-driver --expect-gpus 2 > "$work/diagnose.txt" || rc=$?
[[ $rc == 0 ]] || fail "the packaged binary's diagnosis of h200x2 exited $rc: $(cat "$work/diagnose.txt")"
echo "unpacked binary: $out; shim, manual page, Xid policy and examples present; Depends: $depends"
echo PASS
