#!/usr/bin/env bash
# make_corpus.sh OUT: seed corpora for the fuzz targets from what the tests already hold — the real
# 2xH200 capture (tests/fixtures/h200x2), every scenario built from it (tests/scenarios/*/setup.sh), the
# golden snapshots, the shipped policy and matrix. Each target gets OUT/<target>/; fuzz/corpus/<target>/
# holds the small hand-written seeds for inputs no fixture has (run.sh passes both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
out=$1
fixture=$src/tests/fixtures/h200x2
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'chmod -R u+rwX "$work" 2>/dev/null; rm -rf "$work"' EXIT

# seed TARGET FILE...: copies each regular file under a name made from its content (duplicates collapse).
seed() {
    local target=$1 f sum
    shift
    mkdir -p "$out/$target"
    for f in "$@"; do
        [[ -f $f && -r $f ]] || continue
        sum=$(sha1sum "$f" | cut -c1-16)
        cp "$f" "$out/$target/$sum"
    done
}

# The capture and every scenario tree built from it.
trees=("$fixture")
for setup in "$src"/tests/scenarios/*/setup.sh; do
    name=$(basename "$(dirname "$setup")")
    cp -r "$fixture" "$work/$name"
    chmod -R u+w "$work/$name"
    if (cd "$work/$name" && bash "$setup" >/dev/null 2>&1); then trees+=("$work/$name"); fi
done

for t in "${trees[@]}"; do
    seed kernel_log "$t/_commands/dmesg.txt"
    seed proc_modules "$t/proc/modules"
    seed proc_nvidia "$t/proc/driver/nvidia/version" "$t"/proc/driver/nvidia/gpus/*/information
    seed ldconfig_text "$t/_commands/ldconfig-p.txt" "$t/etc/ld.so.conf" "$t"/etc/ld.so.conf.d/*
    seed sysfs "$t/etc/os-release" "$t/proc/version"
    for dev in "$t"/sys/devices/pci0000:*/*/; do
        seed sysfs "$dev"uevent "$dev"current_link_speed "$dev"max_link_speed "$dev"class "$dev"vendor \
            "$dev"aer_dev_correctable "$dev"aer_dev_fatal "$dev"aer_dev_nonfatal
    done
done
# Single kernel-log lines: the capture's NVRM, Xid, AER and IOMMU lines one per file.
mkdir -p "$out/kernel_log_line"
grep -hE 'NVRM|Xid|AER|DMAR|IOMMU|Lockdown|fallen' "$fixture/_commands/dmesg.txt" "$work"/*/_commands/dmesg.txt 2>/dev/null |
    sort -u | head -200 | split -l 1 -a 3 - "$out/kernel_log_line/line"

seed snapshot_json "$src"/tests/golden/*.snapshot.json
seed fleet_snapshot "$src"/tests/golden/*.snapshot.json
seed xid_policy "$src/data/xid-policy.toml"
seed signatures "$src/data/signatures.toml"
seed kernel_log "$src"/tests/corpus/real/*.txt
seed matrix "$src/examples/matrix.toml"

# ld.so.cache in each layout glibc writes, built from the capture's `ldconfig -p` entries, and this
# machine's own cache when it is small enough to fuzz from.
mkdir -p "$out/ld_so_cache"
python3 - "$fixture/_commands/ldconfig-p.txt" "$out/ld_so_cache" <<'PY'
import re, struct, sys
entries = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*(\S+) \((.*)\) => (\S+)", line)
    if m and "x86-64" in m.group(2):
        entries.append((m.group(1), m.group(3)))
entries = entries[:40]

def new_table(libs):
    head = 48 + 24 * len(libs)
    strings, offs = b"", []
    for name, path in libs:
        k = head + len(strings); strings += name.encode() + b"\0"
        v = head + len(strings); strings += path.encode() + b"\0"
        offs.append((k, v))
    b = b"glibc-ld.so.cache1.1" + struct.pack("<IIB3xI", len(libs), len(strings), 2, 0) + b"\0" * 12
    for k, v in offs:
        b += struct.pack("<iIIIQ", 0x0303, k, v, 0, 0)
    return b + strings

def old_table(libs):
    strings, offs = b"", []
    for name, path in libs:
        k = len(strings); strings += name.encode() + b"\0"
        v = len(strings); strings += path.encode() + b"\0"
        offs.append((k, v))
    b = b"ld.so-1.7.0\0" + struct.pack("<I", len(libs))
    for k, v in offs:
        b += struct.pack("<iII", 0x0303, k, v)
    return b

open(sys.argv[2] + "/new", "wb").write(new_table(entries))
open(sys.argv[2] + "/new-small", "wb").write(new_table(entries[:3]))
old = old_table(entries[:3])
old += b"\0" * (-len(old) % 8)
open(sys.argv[2] + "/old-then-new", "wb").write(old + new_table(entries[:3]))
PY
if [[ -r /etc/ld.so.cache && $(stat -c %s /etc/ld.so.cache) -le 65536 ]]; then seed ld_so_cache /etc/ld.so.cache; fi
