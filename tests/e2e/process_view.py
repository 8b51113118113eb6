#!/usr/bin/env python3
"""`gpudx diagnose --pid` and `gather --pid` on real processes of this machine (docs/process-view.md).

Each case starts process_target (which dlopens the stand-in libcuda through the loader, says "ready PID" and
waits for its stdin to close), reads it with gpudx, then ends it by closing its stdin: no sleeps, no timing.

  app_folder   the stand-in libcuda as libcuda.so.535.104.05 in an application folder on LD_LIBRARY_PATH: the
               findings name the folder, the file and the version, and the process (pid, command, user)
  copied       a copy of a libcuda made with `cp -L` (a regular file named libcuda.so.1, copied_libcuda.c) in an
               application folder: its version is read from its bytes, in the live view and in the replay of
               `gather --pid` laid into the 2xH200 capture (process.libcuda_version_mismatch against 580.159.04)
  namespace    the same started by `unshare -m` with the library on a tmpfs mounted only inside that mount
               namespace: gpudx reads it through /proc/PID/root (skipped when unshare is not permitted)
  uuid         CUDA_VISIBLE_DEVICES naming a UUID not on the node: `gather --pid` captures the process, its
               /proc tree is laid into the 2xH200 capture, and the replay judges it against that node's GPUs and
               kernel module (allocation.uuid_not_on_node, process.libcuda_version_mismatch); the capture keeps
               only the GPU-related variables of its environment
  gone         a process that has exited: reported gone, exit 3
  other_user   a root process read by `nobody` (setpriv/runuser): "run as its owner or root", exit 3, no crash
Exit 77: skipped (said why).
"""
import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
VERSION = "535.104.05"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Target:
    """process_target running until closed; .pid is the pid it reports (after any exec in a wrapper)."""

    def __init__(self, argv, env):
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready "):
            err = self.proc.stderr.read()
            self.proc.wait()
            raise RuntimeError(f"target did not start: {line!r} {err}")
        self.pid = int(line.split()[1])

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def app_folder(work, standin):
    """An application folder holding the stand-in as libcuda.so.<VERSION> with libcuda.so.1 linking to it."""
    os.makedirs(work, exist_ok=True)
    real = os.path.join(work, f"libcuda.so.{VERSION}")
    shutil.copy(standin, real)
    link = os.path.join(work, "libcuda.so.1")
    if not os.path.lexists(link):
        os.symlink(f"libcuda.so.{VERSION}", link)
    return work


def gpudx_json(gpudx, args, runner=()):
    r = subprocess.run(list(runner) + [gpudx, "diagnose", "--no-driver", "--format", "json"] + args,
                       capture_output=True, text=True, timeout=120)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        fail(f"not JSON (exit {r.returncode}): {r.stdout[:2000]} {r.stderr[:2000]}")
    return r.returncode, doc


def node_exit(gpudx):
    """The exit code of the node's own diagnosis here: a process's findings add to it, never lower it."""
    return subprocess.run([gpudx, "diagnose", "--no-driver"], capture_output=True, timeout=120).returncode


def expected_exit(gpudx, for_the_process):
    """1 when the node itself has an error, else what the process's findings make it."""
    return 1 if node_exit(gpudx) == 1 else for_the_process


def findings(doc, rule, pid):
    return [f for f in doc["findings"] if f["id"] == rule and f.get("process", {}).get("pid") == pid]


def base_env(**extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update(extra)
    return env


def case_app_folder(a, work):
    lib = app_folder(os.path.join(work, "app", "lib"), a.standin)
    t = Target([a.target, "libcuda.so.1"], base_env(LD_LIBRARY_PATH=lib))
    try:
        code, doc = gpudx_json(a.gpudx, ["--pid", str(t.pid)])
    finally:
        t.close()
    view = doc["processes"][0]
    check(view["state"] == "read", f"process not read: {view}")
    mapped = [m for m in view["mapped"] if m["soname"] == "libcuda.so.1"]
    check(len(mapped) == 1 and mapped[0]["path"] == os.path.join(lib, f"libcuda.so.{VERSION}")
          and mapped[0]["version"] == VERSION, f"mapped libcuda: {view['mapped']}")
    # On a node whose NVIDIA module is loaded, the stand-in's version is not the module's: the mismatch error
    # names the copy instead (it supersedes "not the host's").
    not_hosts = (findings(doc, "process.library_not_hosts", t.pid)
                 or findings(doc, "process.libcuda_version_mismatch", t.pid))
    check(len(not_hosts) == 1, f"no process.library_not_hosts for pid {t.pid}: {[f['id'] for f in doc['findings']]}")
    msg = not_hosts[0]["message"]
    check(lib in msg and f"libcuda.so.{VERSION}" in msg and VERSION in msg, f"names folder, file, version: {msg}")
    stray = findings(doc, "libs.stray_libcuda", t.pid)
    check(len(stray) == 1 and lib in stray[0]["message"] and VERSION in stray[0]["message"],
          f"its loader view: {stray}")
    p = not_hosts[0]["process"]
    # comm holds the first 15 bytes of the command's name.
    check(p["command"] == "gpudx_process_target"[:15] and p["user"] == pwd.getpwuid(os.getuid()).pw_name,
          f"process named: {p}")
    # Warnings only, unless the node's loaded module makes the copy a version mismatch (an error).
    mismatch = bool(findings(doc, "process.libcuda_version_mismatch", t.pid))
    want = 1 if mismatch else expected_exit(a.gpudx, 2)
    check(code == want, f"warnings only for the process: exit {code}, expected {want}")
    print(f"app_folder: pid {t.pid}: {msg}")


def case_copied(a, work):
    lib = os.path.join(work, "app", "lib")
    os.makedirs(lib)
    shutil.copy(a.copied_libcuda, os.path.join(lib, "libcuda.so.1"))
    t = Target([a.target, "libcuda.so.1"], base_env(LD_LIBRARY_PATH=lib))
    capture = os.path.join(work, "capture")
    try:
        code, doc = gpudx_json(a.gpudx, ["--pid", str(t.pid)])
        r = subprocess.run([a.gpudx, "gather", "--no-driver", "--no-commands", "--dir", "--pid", str(t.pid), capture],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"gather --pid: exit {r.returncode}: {r.stderr}")
    finally:
        t.close()
    path = os.path.join(lib, "libcuda.so.1")
    view = doc["processes"][0]
    mapped = [m for m in view["mapped"] if m["soname"] == "libcuda.so.1"]
    check(len(mapped) == 1 and mapped[0]["path"] == path and mapped[0]["version"] == VERSION
          and mapped[0]["version_from"] == "contents", f"mapped libcuda, version from its bytes: {view['mapped']}")
    found = (findings(doc, "process.library_not_hosts", t.pid)
             or findings(doc, "process.libcuda_version_mismatch", t.pid))
    check(len(found) == 1 and path in found[0]["message"] and f"{VERSION} by its contents" in found[0]["message"],
          f"names the file and the version its bytes carry: {found}")
    stray = findings(doc, "libs.stray_libcuda", t.pid)
    check(len(stray) == 1 and VERSION in stray[0]["message"], f"its loader view: {stray}")
    # The capture keeps the version string, not the library: a few bytes at the library's path.
    kept = os.path.join(capture, path.lstrip("/"))
    check(os.path.getsize(kept) < 64, f"the capture keeps only the version of {path}: {os.path.getsize(kept)} bytes")
    code, doc = gpudx_json(a.gpudx, ["--root", capture, "--pid", str(t.pid)])
    mapped = [m for m in doc["processes"][0]["mapped"] if m["soname"] == "libcuda.so.1"]
    check(mapped and mapped[0]["version"] == VERSION and mapped[0]["version_from"] == "contents",
          f"replayed from the capture: {mapped}")
    # Laid into the 2xH200 node (its /proc entries and the application folder it loaded from).
    node = os.path.join(work, "node")
    overlay(capture, a.fixture, node, t.pid)
    os.makedirs(os.path.join(node, lib.lstrip("/")))
    shutil.copy(kept, os.path.join(node, path.lstrip("/")))
    code, doc = gpudx_json(a.gpudx, ["--root", node, "--pid", str(t.pid)])
    mismatch = findings(doc, "process.libcuda_version_mismatch", t.pid)
    check(len(mismatch) == 1 and VERSION in mismatch[0]["message"] and "580.159.04" in mismatch[0]["message"]
          and path in mismatch[0]["message"], f"replayed on the 2xH200 node: {[f['id'] for f in doc['findings']]}")
    check(code == 1, f"an error, exit 1: exit {code}")
    print(f"copied: pid {t.pid}: {found[0]['message']}\ncopied (replay): {mismatch[0]['message']}")


def case_namespace(a, work):
    lib = os.path.join(work, "ns-app")
    os.makedirs(lib, exist_ok=True)
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"skipped: unshare -m is not permitted here: {probe.stderr.strip()}")
        sys.exit(SKIP)
    script = ('mount -t tmpfs gpudx-test "$1" && cp "$2" "$1/libcuda.so.%s" && ln -s libcuda.so.%s "$1/libcuda.so.1" '
              '&& LD_LIBRARY_PATH="$1" exec "$3" libcuda.so.1' % (VERSION, VERSION))
    t = Target(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", lib, a.standin, a.target],
               base_env())
    try:
        check(not os.path.exists(os.path.join(lib, "libcuda.so.1")), "the library must exist only in the namespace")
        code, doc = gpudx_json(a.gpudx, ["--pid", str(t.pid)])
    finally:
        t.close()
    view = doc["processes"][0]
    check(view["state"] == "read", f"process not read: {view}")
    check(view["own_mount_namespace"] is True, f"own mount namespace: {view['own_mount_namespace']}")
    libcuda = [l for l in view["libraries"]["libraries"] if l["soname"] == "libcuda.so.1"][0]
    chosen = libcuda["chosen"]
    check(chosen and chosen["path"] == os.path.join(lib, "libcuda.so.1") and chosen["version"] == VERSION,
          f"its loader's pick, read through /proc/PID/root: {libcuda}")
    not_hosts = (findings(doc, "process.library_not_hosts", t.pid)
                 or findings(doc, "process.libcuda_version_mismatch", t.pid))
    check(len(not_hosts) == 1 and VERSION in not_hosts[0]["message"], f"finding: {not_hosts}")
    print(f"namespace: pid {t.pid}: {chosen['path']} {chosen['version']} (read through /proc/{t.pid}/root)")


def overlay(capture, fixture, dest, pid):
    """The 2xH200 capture with the captured process's /proc entries laid in (its own and what it links to)."""
    shutil.copytree(fixture, dest, symlinks=True)
    for name in os.listdir(os.path.join(capture, "proc")):
        src = os.path.join(capture, "proc", name)
        dst = os.path.join(dest, "proc", name)
        if os.path.lexists(dst):
            continue
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True)


def case_uuid(a, work):
    lib = app_folder(os.path.join(work, "uuid-app"), a.standin)
    bogus = "GPU-deadbeef-0000-4000-8000-000000000000"
    t = Target([a.target, "libcuda.so.1"],
               base_env(LD_LIBRARY_PATH=lib, CUDA_VISIBLE_DEVICES=bogus, SECRET_TOKEN="not-for-the-capture"))
    capture = os.path.join(work, "capture")
    try:
        r = subprocess.run([a.gpudx, "gather", "--no-driver", "--no-commands", "--dir", "--pid", str(t.pid), capture],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"gather --pid: exit {r.returncode}: {r.stderr}")
    finally:
        t.close()
    with open(os.path.join(capture, "proc", str(t.pid), "environ"), "rb") as f:
        environ = f.read()
    check(b"SECRET_TOKEN" not in environ and bogus.encode() in environ, f"captured environment: {environ!r}")
    # The capture replays by itself, after the process is gone.
    code, doc = gpudx_json(a.gpudx, ["--root", capture, "--pid", str(t.pid)])
    check(doc["processes"][0]["state"] == "read", f"replayed view: {doc['processes'][0]}")
    check(len(findings(doc, "process.library_not_hosts", t.pid) or
              findings(doc, "process.libcuda_version_mismatch", t.pid)) == 1, "replay: the mapped libcuda")
    # Laid into a node with GPUs and a kernel module: its environment and its mapping judged against them.
    node = os.path.join(work, "node")
    overlay(capture, a.fixture, node, t.pid)
    code, doc = gpudx_json(a.gpudx, ["--root", node, "--pid", str(t.pid)])
    uuid = findings(doc, "allocation.uuid_not_on_node", t.pid)
    check(len(uuid) == 1 and bogus in uuid[0]["message"], f"uuid_not_on_node: {[f['id'] for f in doc['findings']]}")
    mismatch = findings(doc, "process.libcuda_version_mismatch", t.pid)
    check(len(mismatch) == 1, f"mismatch: {[f['id'] for f in doc['findings']]}")
    m = mismatch[0]
    check(VERSION in m["message"] and "580.159.04" in m["message"] and lib in m["message"], f"both versions: {m}")
    sources = [e["source"] for e in m["evidence"]]
    check(f"/proc/{t.pid}/maps" in sources and "/proc/driver/nvidia/version" in sources, f"both paths: {sources}")
    check(m["severity"] == "error" and code == 1, f"an error, exit 1: {m['severity']} exit {code}")
    print(f"uuid: {uuid[0]['message']}\nuuid: {m['message']}")


def case_gone(a, work):
    t = Target([a.target], base_env())
    pid = t.pid
    t.close()
    r = subprocess.run([a.gpudx, "diagnose", "--no-driver", "--pid", str(pid)], capture_output=True, text=True,
                       timeout=120)
    want = expected_exit(a.gpudx, 3)
    check(r.returncode == want, f"exit {r.returncode}, expected {want} (3: could not evaluate): {r.stdout[-2000:]}")
    check("process.gone" in r.stdout and f"pid {pid}" in r.stdout, f"reported gone: {r.stdout[-2000:]}")
    print(f"gone: pid {pid}: exit {r.returncode}")


def case_other_user(a, work):
    if os.getuid() != 0:
        print("skipped: not root, so no process of another user can be started here")
        sys.exit(SKIP)
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        print("skipped: no user nobody")
        sys.exit(SKIP)
    if shutil.which("setpriv"):
        runner = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    elif shutil.which("runuser"):
        runner = ["runuser", "-u", "nobody", "--"]
    else:
        print("skipped: neither setpriv nor runuser")
        sys.exit(SKIP)
    # The checkout may sit where nobody cannot read: a private copy of the binary it may run.
    private = tempfile.mkdtemp(prefix="gpudx-pid-")
    try:
        os.chmod(private, 0o755)
        binary = os.path.join(private, "gpudx")
        shutil.copy(a.gpudx, binary)
        os.chmod(binary, 0o755)
        t = Target([a.target], base_env())
        try:
            r = subprocess.run(runner + [binary, "diagnose", "--no-driver", "--pid", str(t.pid)],
                               capture_output=True, text=True, timeout=120, cwd=private)
        finally:
            t.close()
        node = subprocess.run(runner + [binary, "diagnose", "--no-driver"], capture_output=True, timeout=120,
                              cwd=private)
    finally:
        shutil.rmtree(private)
    out = r.stdout + r.stderr
    want = 1 if node.returncode == 1 else 3
    check(r.returncode == want, f"exit {r.returncode}, expected {want} (3: could not evaluate): {out[-2000:]}")
    check("process.denied" in out and "run as its owner" in out, f"says how to read it: {out[-2000:]}")
    check("terminate" not in out and "Segmentation" not in out, "no crash")
    line = [l for l in out.splitlines() if "run as its owner" in l][0]
    print(f"other_user: {line.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["app_folder", "copied", "namespace", "uuid", "gone", "other_user"])
    ap.add_argument("--gpudx", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--standin", required=True, help="the stand-in libcuda.so.1")
    ap.add_argument("--copied-libcuda", required=True, help="copied_libcuda.c built as a shared library")
    ap.add_argument("--fixture", required=True, help="tests/fixtures/h200x2")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    work = os.path.join(a.work, a.case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    globals()["case_" + a.case](a, work)


if __name__ == "__main__":
    main()
