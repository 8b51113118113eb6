#!/usr/bin/env bash
# The portable build's sysroot: Debian 11's glibc 2.31 (libc6, libc6-dev) and Linux 5.10 UAPI headers
# (linux-libc-dev), downloaded with apt-get from a private package list and unpacked with dpkg-deb into DIR.
# Nothing is installed on the system and no apt state outside DIR is touched; it runs as any user on a
# Debian or Ubuntu machine with network access and debian-archive-keyring. The same unpacked libc6 is the old
# glibc the portability tests run the binaries under (tests/portability, docs/release.md).
#
# Usage: fetch-sysroot.sh DIR. Does nothing when DIR already holds a complete sysroot.
set -euo pipefail
[[ $# == 1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
stamp=$dir/.gpudx-sysroot
[[ -f $stamp ]] && exit 0

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if [[ ! -r $keyring ]]; then
  echo "gpudx: $keyring is missing (apt-get install debian-archive-keyring)" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$dir"
dir=$(realpath "$dir")
apt=$dir/.apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
echo "deb [signed-by=$keyring] http://deb.debian.org/debian bullseye main" > "$apt/sources.list"
: > "$apt/status"
# An empty dpkg status: candidates come from bullseye alone, not from what this machine has installed.
opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "Dir::State::status=$apt/status"
      -o APT::Architecture=amd64 -o "APT::Sandbox::User=$(id -un)" -o Debug::NoLocking=1)
echo "gpudx: fetching Debian 11 glibc into $dir" >&2
apt-get "${opts[@]}" update -qq
(cd "$apt/debs" && apt-get "${opts[@]}" download -qq libc6 libc6-dev linux-libc-dev)
for deb in "$apt"/debs/*.deb; do
  dpkg-deb -x "$deb" "$dir"
  dpkg-deb -f "$deb" Package Version | paste -sd' ' >> "$dir/.packages"
done

# The packages' absolute links (libpthread.so -> /lib/x86_64-linux-gnu/libpthread.so.0) would reach this
# machine's newer glibc: each is made relative, inside the sysroot.
while IFS= read -r link; do
  target=$(readlink "$link")
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dir$target")" "$link"
done < <(find "$dir" -type l -lname '/*')

loader=$dir/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
[[ -e $dir/usr/lib/x86_64-linux-gnu/libc.so && -e $loader && -e $dir/usr/include/linux/close_range.h ]] ||
  { echo "gpudx: the unpacked sysroot in $dir is incomplete" >&2; exit 1; }
rm -rf "$apt"
mv "$dir/.packages" "$stamp"
cat "$stamp" >&2
