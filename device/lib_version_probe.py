#!/usr/bin/env python3
"""Where a real driver library carries its own version in its bytes (for reading the version of a copy whose file
name does not say it). For each file: every NUL-bounded string that looks like a driver version, with the ELF
section it lies in and the bytes before it, and the time one pass over the file takes."""
import re, struct, sys, time

def sections(data):
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    out = []
    for h in hdrs:
        name = data[stroff + h[0]: data.index(b"\0", stroff + h[0])].decode()
        out.append((name, h[4], h[5]))
    return out

for path in sys.argv[1:]:
    data = open(path, "rb").read()
    t0 = time.perf_counter()
    hits = [(m.start(1), m.group(1).decode()) for m in re.finditer(rb"\x00(\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\x00", data)]
    dt = (time.perf_counter() - t0) * 1000
    secs = sections(data)
    print(f"== {path}: {len(data)} bytes, {len(hits)} version-like strings, scan {dt:.1f} ms (python re)")
    for name, off, size in secs:
        if name in (".rodata", ".data", ".dynstr", ".gnu.version_d", ".note.gnu.build-id", ".comment"):
            print(f"   section {name}: offset {off} size {size}")
    counts = {}
    for off, s in hits:
        counts.setdefault(s, []).append(off)
    for s, offs in sorted(counts.items(), key=lambda kv: -len(kv[1]))[:15]:
        sec = next((n for n, o, z in secs if o <= offs[0] < o + z), "?")
        before = data[max(0, offs[0] - 48):offs[0]].replace(b"\0", b"|")
        print(f"   {s!r}: {len(offs)}x, first at {offs[0]} in {sec}; before: {before!r}")
