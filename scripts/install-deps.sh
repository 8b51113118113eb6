#!/usr/bin/env bash
# Installs the Debian packages gpudx needs to build and test, only when one is missing.
# Everything comes from the distribution's archive through apt-get; nothing else is downloaded.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libtomlplusplus-dev libkmod-dev
  libgtest-dev libgmock-dev libbenchmark-dev pci.ids kmod python3 xz-utils strace
  libsqlite3-dev sqlite3  # the agent's event store (libsqlite3.a, linked statically); sqlite3: its tests' checks
  debian-archive-keyring  # scripts/fetch-sysroot.sh checks the Debian 11 packages of the portable build with it
)
# Any of these, in any order (.ci/run asks for all of them at once, so that one apt run installs everything):
for arg in "$@"; do
  case $arg in
    # tests/integration: a one-node Slurm cluster, node_exporter's textfile collector, the Prometheus server and
    # promtool (in prometheus), curl for its HTTP API, dpkg-deb for the package test, rpm for the .rpm's test.
    --with-integration) packages+=(slurmctld slurmd munge prometheus-node-exporter prometheus curl dpkg rpm) ;;
    # make release: rpmbuild (in rpm) for the .rpm, dpkg-shlibdeps (in dpkg-dev) for the .deb's libc6 version.
    --with-release) packages+=(rpm dpkg-dev binutils) ;;
    # make test-sanitize and make fuzz (one clang build): clang 16 compiles and brings the ASan runtime, clang
    # 14's libFuzzer runtime links the fuzz targets (fuzz/CMakeLists.txt says why).
    --with-fuzz) packages+=(clang-16 libclang-rt-16-dev libclang-rt-14-dev) ;;
    # tests/browser: Debian's headless-capable Chromium opens the HTML pages (docs/report.md).
    --with-browser) packages+=(chromium) ;;
    *) echo "install-deps.sh: unknown option $arg (--with-integration, --with-release, --with-fuzz, --with-browser)" >&2
       exit 64 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "gpudx: installing missing build dependencies: ${missing[*]}" >&2
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
