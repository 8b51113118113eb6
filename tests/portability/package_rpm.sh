#!/usr/bin/env bash
# The RPM: cpack builds it from the build tree, and rpm itself reads it back (rpm -qip, -qlp, -qp
# --requires): name and version, the files it installs, and requirements that name glibc's libraries only.
# Usage: package_rpm.sh BUILD_DIR SOURCE_DIR WORK_DIR. Exit 77 (skip) without cpack/rpm/rpmbuild unless
# GPUDX_REQUIRE_INTEGRATION=1.
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") work=$3
source "$src/tests/integration/lib.sh"
require_cmd cpack rpm rpmbuild
rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")

cpack --config "$build/CPackConfig.cmake" -G RPM -B "$work/out" > "$work/cpack.log" 2>&1 ||
  fail "cpack failed: $(tail -20 "$work/cpack.log")"
rpms=("$work"/out/*.rpm)
[[ ${#rpms[@]} == 1 && -f ${rpms[0]} ]] || fail "expected one .rpm in $work/out: ${rpms[*]}"
pkg=${rpms[0]}
version=$(sed -n 's/^project(gpudx VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ $(basename "$pkg") == "gpudx-$version-1.x86_64.rpm" ]] || fail "package file name $(basename "$pkg")"

rpm -qip "$pkg" | tee "$work/info"
[[ $(rpm -qp --queryformat '%{NAME} %{VERSION} %{ARCH}' "$pkg") == "gpudx $version x86_64" ]] ||
  fail "name, version, arch: $(rpm -qp --queryformat '%{NAME} %{VERSION} %{ARCH}' "$pkg")"

rpm -qlp "$pkg" > "$work/files"
for f in /usr/bin/gpudx /usr/lib/gpudx/libgpudx_shim.so /usr/share/man/man1/gpudx.1.gz /usr/share/gpudx/xid-policy.toml \
         /usr/share/doc/gpudx/README.md /usr/share/doc/gpudx/examples/slurm/prolog.sh \
         /usr/share/doc/gpudx/examples/systemd/gpudx-boot.service; do
  grep -qx "$f" "$work/files" || fail "$f is not in the package: $(cat "$work/files")"
done
# Folders of the distribution's filesystem package must not be claimed (they would conflict on install).
for d in /usr /usr/bin /usr/lib /usr/share /usr/share/man /usr/share/man/man1 /usr/share/doc; do
  ! grep -qx "$d" "$work/files" || fail "the package claims the system folder $d"
done

# Requirements: glibc's libraries (with their symbol versions) and rpmlib's own features, nothing else.
rpm -qp --requires "$pkg" | sort -u | tee "$work/requires"
while read -r req; do
  case $req in
    libc.so.6*|libm.so.6*|libpthread.so.0*|libdl.so.2*|librt.so.1*|ld-linux-x86-64.so.2*|rtld\(GNU_HASH\)) ;;
    rpmlib\(*|/bin/sh) ;;
    *) fail "requirement beyond glibc: $req" ;;
  esac
  if [[ $req =~ GLIBC_([0-9]+\.[0-9]+) ]] && [[ $(printf '2.28\n%s\n' "${BASH_REMATCH[1]}" | sort -V | tail -1) != 2.28 ]]; then
    fail "requires a glibc newer than 2.28: $req"
  fi
done < "$work/requires"
grep -q '^libc.so.6' "$work/requires" || fail "the package does not require glibc: $(cat "$work/requires")"
echo PASS
