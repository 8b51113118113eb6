#!/usr/bin/env python3
"""no_writes.py GPUDX STANDINS_DIR SCENARIO: gpudx snapshot, diagnose and ids on this machine under strace
(children followed) must never open anything under /sys or /dev for writing, nor create, remove, rename,
truncate or change the mode of anything there (docs/reliability.md). Exits 77 (skipped) without strace or
when ptrace is not permitted.

The runs use --no-driver, and the stand-in driver libraries: the real NVML opens /dev/nvidiactl read-write
by design, which is the driver's doing, not gpudx's."""
import os, re, shutil, subprocess, sys, tempfile

SYSCALLS = ("open,openat,openat2,creat,mkdir,mkdirat,unlink,unlinkat,rmdir,rename,renameat,renameat2,truncate,"
            "chmod,fchmodat,chown,fchownat,lchown,mknod,mknodat,symlink,symlinkat,link,linkat")
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
PROTECTED = ("/sys/", "/dev/", "/proc/sys/")
# The driver probe children point their stdio at /dev/null: writing there changes nothing.
HARMLESS = ("/dev/null",)


def main():
    gpudx, standins, scenario = sys.argv[1:4]
    strace = shutil.which("strace")
    if not strace:
        print("strace not installed: see the code-level audit in docs/reliability.md")
        return 77
    probe = subprocess.run([strace, "-f", "-o", os.devnull, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("strace cannot trace here (ptrace not permitted):", probe.stderr.strip())
        return 77
    runs = [
        ["snapshot", "--no-driver"],
        ["diagnose", "--no-driver", "--format", "json"],
        ["ids", "--no-driver", "--format", "json"],
        ["snapshot", "--driver-lib-dir", standins],
        ["diagnose", "--driver-lib-dir", standins, "--all-devices"],
        ["ids", "--driver-lib-dir", standins],
        ["xid", "79"],
    ]
    env = dict(os.environ, GPUDX_STANDIN_SCENARIO=scenario)
    # LeakSanitizer cannot run under ptrace: in a sanitizer build the leak check is left to the other tests.
    env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "detect_leaks=0") if x)
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, args in enumerate(runs):
            log = os.path.join(tmp, f"trace{i}")
            p = subprocess.run([strace, "-f", "-qq", "-e", "trace=" + SYSCALLS, "-e", "signal=none", "-o", log,
                                gpudx] + args, capture_output=True, text=True, env=env, timeout=120)
            if p.returncode not in (0, 1, 2, 3):
                bad.append(f"gpudx {' '.join(args)} exited {p.returncode}: {p.stderr[:400]}")
            calls = 0
            for line in open(log, errors="replace"):
                calls += 1
                m = re.search(r'(\w+)\((?:[^"]*?)"([^"]*)"(.*)$', line)
                if not m:
                    continue
                call, path, rest = m.groups()
                if not path.startswith(PROTECTED) or path in HARMLESS:
                    continue
                if call.startswith("open") or call == "creat":
                    if call == "creat" or any(f in rest for f in WRITE_FLAGS):
                        bad.append(f"gpudx {' '.join(args)}: {line.strip()}")
                else:
                    bad.append(f"gpudx {' '.join(args)}: {line.strip()}")
            print(f"gpudx {' '.join(args)}: exit {p.returncode}, {calls} traced calls")
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
