#!/usr/bin/env bash
# Every dynamic symbol version a file needs from glibc is GLIBC_2.28 or older, and glibc is all it needs:
# what lets the release load on RHEL 8 (docs/release.md). Reads the version needs (readelf -V) and names the
# symbols behind a newer one (readelf --dyn-syms).
# Usage: glibc_symbols.sh FILE...
set -euo pipefail
ceiling=2.28
allowed_needed=" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2 "
newer() { [[ $(printf '%s\n%s\n' "$ceiling" "$1" | sort -V | tail -1) != "$ceiling" ]]; }
failures=0
for file in "$@"; do
  [[ -f $file ]] || { echo "FAIL: $file does not exist"; failures=$((failures + 1)); continue; }
  versions=$(readelf -V -W "$file" | grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: GLIBC_//' | sort -uV)
  for version in $versions; do
    newer "$version" || continue
    symbols=$(readelf --dyn-syms -W "$file" | awk -v v="@GLIBC_$version" 'index($8, v) { print $8 }' | sort -u | paste -sd' ')
    echo "FAIL: $file needs GLIBC_$version (above $ceiling): ${symbols:-(a version need without symbols)}"
    failures=$((failures + 1))
  done
  highest=$(tail -1 <<< "$versions")
  while read -r needed; do
    [[ $allowed_needed == *" $needed "* ]] || { echo "FAIL: $file needs $needed, which is not part of glibc"; failures=$((failures + 1)); }
  done < <(readelf -d -W "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  echo "$file: highest glibc version needed GLIBC_$highest; needs $(readelf -d -W "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')"
done
[[ $failures == 0 ]] && echo PASS
exit $((failures > 0))
