#!/usr/bin/env python3
"""gpudx's HTML pages in a real browser (docs/report.md): headless Chromium opens each page made from the goldens
(the 2xH200 capture, every scenario's snapshot, an acceptance record with a GPU-to-GPU matrix, hostile names, an
older snapshot, a saved diagnosis, a fleet of 10,000 generated snapshots and an empty one), or the agent's / (case
agent), and checks that the console stays silent, that no request leaves the file, that there is no script in the
DOM, that every GPU (UUID and PCI address) and every error finding is in it, and that no task of the renderer runs
past a second. Each page's screenshot is kept under WORK/screens; GPUDX_UPDATE_SCREENSHOTS=1 copies those the
documentation shows into docs/report/.

Usage: browser_pages.py pages|agent GPUDX SOURCE_DIR WORK_DIR [GEN_FLEET]
Exit 77 (skip) without Chromium, unless GPUDX_REQUIRE_INTEGRATION=1 (then it fails)."""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402

case, gpudx, src, work = sys.argv[1:5]
gen_fleet = sys.argv[5] if len(sys.argv) > 5 else None
LONG_TASK_MS = 1000
DOC_SHOTS = {"h200x2": "node-h200x2.png", "accept-8gpu": "accept-8gpu.png", "fleet-10000": "fleet-10000.png",
             "agent": "agent.png", "scenario-gpu-missing": "node-gpu-missing.png",
             "h200x2-events": "accept-events-h200x2.png"}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def skip_or_fail(msg):
    if os.environ.get("GPUDX_REQUIRE_INTEGRATION") == "1":
        print(f"FAIL: {msg} (GPUDX_REQUIRE_INTEGRATION=1: a missing prerequisite is a failure)", file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: {msg}", file=sys.stderr)
    sys.exit(77)


def run(*args, ok=(0, 1, 2, 3)):
    p = subprocess.run([gpudx, *args], capture_output=True, text=True)
    if p.returncode not in ok:
        fail(f"gpudx {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()[:400]}")
    return p


def dom_text(s):
    """A string as the DOM serialises it in a text node or an attribute (the page escapes both alike)."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def safe_prefix(s):
    """The part of a name made of characters that reach the page unchanged (a hostile UUID keeps its head)."""
    m = re.match(r"[A-Za-z0-9:._-]+", s)
    return m.group(0) if m else ""


def expect_node(snapshot, diagnosis):
    """What the node page must hold: every GPU's UUID and address, every error finding's id."""
    strings = set(snapshot.get("pcie", {}).get("gpus", []))
    for g in snapshot.get("module", {}).get("nvidia_gpus", []):
        strings.add(g.get("address", ""))
        strings.add(safe_prefix(g.get("uuid", "")))
    errors = sorted({f["id"] for f in diagnosis.get("findings", []) if f.get("severity") == "error"})
    return {s for s in strings if s}, errors


def check(browser, name, url, strings=(), errors=(), allowed=None, max_bytes=None, also=(), start=None):
    shot = os.path.join(work, "screens", name + ".png")
    r = cdp.open_page(browser, url, screenshot=shot, start=start, max_height=1800)
    dom = r["dom"]
    problems = []
    if r["console"]:
        problems.append("console: " + " | ".join(r["console"])[:600])
    allowed = allowed or {url}
    left = [u for u in r["requests"] if u not in allowed and not u.startswith("data:")]
    if left:
        problems.append(f"requests beyond the page: {left[:5]}")
    if r["scripts"]:
        problems.append(f"{r['scripts']} script element(s) in the DOM")
    for s in strings:
        if dom_text(s) not in dom:
            problems.append(f"not in the DOM: {s}")
    for e in errors:
        if f'data-finding="{e}"' not in dom:
            problems.append(f"error finding not in the DOM: {e}")
    for s in also:
        if s not in dom:
            problems.append(f"not in the DOM: {s}")
    if r["longest_task_ms"] < 0 or r["longest_task_ms"] > LONG_TASK_MS:
        problems.append(f"longest renderer task {r['longest_task_ms']:.0f} ms (limit {LONG_TASK_MS})")
    if max_bytes and len(dom.encode()) > max_bytes:
        problems.append(f"DOM of {len(dom.encode())} bytes (limit {max_bytes})")
    for p in problems:
        fail(f"{name}: {p}")
    print(f"{'ok  ' if not problems else 'FAIL'} {name}: {len(strings)} names, {len(errors)} error findings, DOM "
          f"{len(dom) // 1024} KiB, load {r['load_s']:.2f} s, longest task {r['longest_task_ms']:.0f} ms, "
          f"screenshot {os.path.relpath(shot, work)}")
    return r


def pages(browser):
    golden = os.path.join(src, "tests", "golden")
    accept_real = os.path.join(src, "docs", "device-runs", "2026-11-30-h200x2-session2", "accept", "accept.json")

    # The real 2xH200 capture, with its acceptance record and a day of the agent's events.
    root = os.path.join(src, "tests", "fixtures", "h200x2")
    snap = json.loads(run("snapshot", "--root", root, "--no-driver").stdout)
    diag = json.loads(run("diagnose", "--root", root, "--no-driver", "--format", "json").stdout)
    gpus = snap["module"]["nvidia_gpus"]
    t0 = 1764633600000
    events = {"events": [
        {"id": 1, "time_ms": t0, "kind": "agent", "message": "agent started"},
        {"id": 2, "time_ms": t0 + 3600e3, "kind": "appeared", "finding": "kernel_log.xid", "layer": "kernel_log",
         "severity": "error", "gpu": {"uuid": gpus[1]["uuid"], "pci": gpus[1]["address"]},
         "message": "Xid 79 on the GPU: fallen off the bus"},
        {"id": 3, "time_ms": t0 + 3601e3, "kind": "drained", "finding": "kernel_log.xid",
         "message": "drained: gpudx: kernel_log.xid"},
        {"id": 4, "time_ms": t0 + 7200e3, "kind": "appeared", "finding": "pcie.aer_correctable", "layer": "pcie",
         "severity": "warning", "gpu": {"uuid": gpus[0]["uuid"], "pci": gpus[0]["address"]},
         "message": "AER correctable errors grew by 12"},
        {"id": 5, "time_ms": t0 + 20000e3, "kind": "cleared", "finding": "kernel_log.xid", "layer": "kernel_log",
         "severity": "error", "gpu": {"uuid": gpus[1]["uuid"], "pci": gpus[1]["address"]}, "message": "cleared"},
        {"id": 6, "time_ms": t0 + 20001e3, "kind": "resumed", "message": "resumed: healthy again"}]}
    for e in events["events"]:
        e["time_ms"] = int(e["time_ms"])
    with open(os.path.join(work, "events.json"), "w") as f:
        json.dump(events, f)
    out = os.path.join(work, "h200x2.html")
    run("report", "--root", root, "--no-driver", "--accept", accept_real, "--events",
        os.path.join(work, "events.json"), "-o", out)
    strings, errors = expect_node(snap, diag)
    check(browser, "h200x2", "file://" + out, strings, errors,
          also=['id="topology"', 'id="accept"', "Xid 79 on the GPU", "failure boundary" if diag["boundary"] else ""])
    check(browser, "h200x2-events", "file://" + out, strings, errors, start="#accept")

    # Every scenario's snapshot.
    for path in sorted(glob.glob(os.path.join(golden, "*.snapshot.json"))):
        name = os.path.basename(path)[: -len(".snapshot.json")]
        out = os.path.join(work, "scenarios", name + ".html")
        run("report", "--from", path, "-o", out)
        snap = json.load(open(path))
        diag = json.loads(run("diagnose", "--from", path, "--format", "json").stdout)
        strings, errors = expect_node(snap, diag)
        check(browser, "scenario-" + name, "file://" + out, strings, errors)

    # An acceptance record of 8 GPUs with every pair copied (one pair failing, one GPU slow), beside a node whose
    # host name and a process name carry a script.
    accept = json.load(open(accept_real))
    accept["gpus"], accept["tests"] = [], []
    accept["thresholds"]["min_d2d_gbps"] = 3000.0
    accept["thresholds"]["min_p2p_gbps"] = 300.0
    uuids = [f"GPU-{i:08x}-1111-2222-3333-444444444444" for i in range(1, 9)]
    pcis = [f"0000:{0x18 + 0x10 * i:02x}:00.0" for i in range(8)]
    for i in range(8):
        accept["gpus"].append({"ordinal": i, "uuid": uuids[i], "pci": pcis[i], "name": "NVIDIA H200",
                               "total_memory": 150 << 30, "sm_count": 132, "cc_major": 9, "cc_minor": 0})
        for test, fig, value in (("gpu.d2d", "d2d_gbps", 2100.0 if i == 5 else 4300.0 - i),
                                 ("gpu.h2d", "h2d_gbps", 52.0 + i / 10), ("gpu.d2h", "d2h_gbps", 54.0 - i / 10)):
            accept["tests"].append({"id": test, "subjects": [uuids[i]], "pci": [pcis[i]], "required": True,
                                    "status": "fail" if value < 3000 and test == "gpu.d2d" else "pass",
                                    "reason": "below the floor" if value < 3000 and test == "gpu.d2d" else "",
                                    "figures": {fig: value}, "thresholds": {}, "details": {}, "duration_ms": 10.0})
        accept["tests"].append({"id": "gpu.memory", "subjects": [uuids[i]], "pci": [pcis[i]], "required": True,
                                "status": "pass", "reason": "", "figures": {"tested_gib": 128.1, "errors": 0,
                                "patterns": 3, "read_gbps": 3900.0, "write_gbps": 4200.0}, "thresholds": {},
                                "details": {}, "duration_ms": 300.0})
    for a in range(8):
        for b in range(a + 1, 8):
            slow = (a, b) == (2, 6)
            accept["tests"].append({"id": "pair.copy", "subjects": [uuids[a], uuids[b]], "pci": [pcis[a], pcis[b]],
                                    "required": True, "status": "fail" if slow else "pass",
                                    "reason": "below the floor" if slow else "",
                                    "figures": {"a_to_b_gbps": 98.5 if slow else 390.0 + a,
                                                "b_to_a_gbps": 96.5 if slow else 391.0 + b},
                                    "thresholds": {}, "details": {"link": "nvlink"}, "duration_ms": 30.0})
    accept["verdict"], accept["exit_code"] = "fail", 1
    accept_path = os.path.join(work, "accept-8gpu.json")
    json.dump(accept, open(accept_path, "w"))
    # The hostile-strings scenario: a stuck process holds a GPU, its name (and now the host's) a script.
    hostile = json.load(open(os.path.join(golden, "hostile-strings.snapshot.json")))
    hostile["host"]["hostname"] = "<script>alert('host')</script>node<b>7</b>"
    assert hostile["devices"]["holders"], "the hostile-strings scenario lost its process"
    for h in hostile["devices"]["holders"]:
        h["name"] = "<script>alert(1)</script>"
    hostile_path = os.path.join(work, "hostile.snapshot.json")
    json.dump(hostile, open(hostile_path, "w"))
    # An earlier run of the same GPUs, all at full speed: the slow GPU's drop from it is said on the page.
    for t in accept["tests"]:
        if t["id"] == "gpu.d2d":
            t["figures"]["d2d_gbps"] = 4310.0
            t["status"] = "pass"
    accept["started_at"] = "2026-11-01T08:00:00Z"
    reference_path = os.path.join(work, "accept-8gpu-reference.json")
    json.dump(accept, open(reference_path, "w"))
    out = os.path.join(work, "accept-8gpu.html")
    run("report", "--from", hostile_path, "--accept", accept_path, "--accept-reference", reference_path, "-o", out)
    diag = json.loads(run("diagnose", "--from", hostile_path, "--format", "json").stdout)
    strings, errors = expect_node(hostile, diag)
    if not any("alert(1)" in json.dumps(f) for f in diag["findings"]):
        fail("hostile: no finding names the process, so its name is not on the page")
    r = check(browser, "accept-8gpu", "file://" + out, set(uuids) | set(pcis) | strings, errors, start="#accept",
              also=["&lt;script&gt;alert('host')&lt;/script&gt;node&lt;b&gt;7&lt;/b&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;", "51% below the reference run", ">98.5<", ">96.5<",
                    "GPU to GPU copy rates"])
    if "<b>7" in r["dom"]:
        fail("accept-8gpu: the host name's markup reached the DOM as markup")

    # A snapshot of an older gpudx: the fields it lacks are listed, the rest drawn.
    old = json.load(open(os.path.join(golden, "h200x2.snapshot.json")))
    for d in old["pcie"]["devices"]:
        d.pop("slot", None)
        d.pop("iommu_group", None)
    old.pop("environment", None)
    old_path = os.path.join(work, "older.snapshot.json")
    json.dump(old, open(old_path, "w"))
    out = os.path.join(work, "older.html")
    run("report", "--from", old_path, "-o", out)
    check(browser, "older-snapshot", "file://" + out, set(old["pcie"]["gpus"]),
          also=['id="missing"', "pcie.devices[].slot", "pcie.devices[].iommu_group", "<code>environment</code>"])

    # A saved diagnosis: findings and layers, and what it cannot hold said.
    saved = os.path.join(work, "gpu-missing.diagnose.json")
    with open(saved, "w") as f:
        f.write(run("diagnose", "--from", os.path.join(golden, "gpu-missing.snapshot.json"), "--format", "json").stdout)
    out = os.path.join(work, "saved-diagnosis.html")
    run("report", "--from", saved, "-o", out)
    diag = json.load(open(saved))
    check(browser, "saved-diagnosis", "file://" + out, errors=expect_node({}, diag)[1],
          also=["a saved diagnosis holds none of them"])

    # The fleet: 10,000 generated snapshots, and an empty one.
    if gen_fleet:
        fleet = os.path.join(work, "fleet")
        if not os.path.exists(os.path.join(fleet, "manifest.json")):
            shutil.rmtree(fleet, ignore_errors=True)
            subprocess.run([gen_fleet, "--seed", "42", "--count", "10000", "--bad", "4", "--out", fleet], check=True,
                           stdout=subprocess.DEVNULL)
        out = os.path.join(work, "fleet-10000.html")
        started = time.monotonic()
        run("fleet", "report", "-q", "--matrix", os.path.join(src, "examples", "matrix.toml"), "--format", "html",
            "-o", out, os.path.join(fleet, "nodes"))
        took = time.monotonic() - started
        size = os.path.getsize(out)
        print(f"fleet page: 10,000 snapshots in {took:.2f} s, {size / 1e6:.2f} MB")
        if size > 5_000_000:
            fail(f"fleet-10000: the page is {size} bytes (limit 5 MB)")
        report = json.loads(run("fleet", "report", "-q", "--matrix", os.path.join(src, "examples", "matrix.toml"),
                                "--format", "json", os.path.join(fleet, "nodes")).stdout)
        classes = {c["name"] for c in report.get("classes", [])}
        r = check(browser, "fleet-10000", "file://" + out, classes, max_bytes=5_000_000,
                  also=["10000 node(s)", 'id="heatmap"', 'id="versions"', 'id="shared"'])
        rows = r["dom"].count("<tr")
        if rows > 5000:
            fail(f"fleet-10000: {rows} table rows at once")
        empty = os.path.join(work, "fleet-empty")
        os.makedirs(empty, exist_ok=True)
        with open(os.path.join(empty, "broken.json"), "w") as f:
            f.write("{ not json")
        out = os.path.join(work, "fleet-empty.html")
        run("fleet", "report", "-q", "--matrix", os.path.join(src, "examples", "matrix.toml"), "--format", "html",
            "-o", out, empty)
        check(browser, "fleet-empty", "file://" + out, also=["The fleet is empty", "broken.json"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent(browser):
    root = os.path.join(work, "agent-root")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(src, "tests", "fixtures", "h200x1-gathered"), root, symlinks=True)
    log = os.path.join(work, "agent-kern.log")
    shutil.copy(os.path.join(root, "_commands", "dmesg.txt"), log)
    state = os.path.join(work, "agent-state")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    err = open(os.path.join(work, "agent.err"), "w")
    proc = subprocess.Popen([gpudx, "agent", "--root", root, "--kernel-log", log, "--listen", f"127.0.0.1:{port}",
                             "--state-dir", state, "--no-driver", "--interval", "3600"], stdout=err, stderr=err)
    try:
        def get(path):
            with urllib.request.urlopen(url + path, timeout=10) as r:
                return r.status, dict(r.headers), r.read().decode()

        def wait(what, cond):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"the agent exited (code {proc.returncode}) waiting for {what}")
                try:
                    if cond():
                        return
                except OSError:
                    pass
                time.sleep(0.1)
            raise RuntimeError(f"gave up waiting for {what}")

        wait("the first diagnosis", lambda: json.loads(get("/v1/status?format=json")[2]).get("verdict") is not None)
        # An Xid 79 on the node's GPU: an error finding, an event, and the page shows both.
        snap = json.loads(run("snapshot", "--root", root, "--no-driver").stdout)
        gpu = snap["pcie"]["gpus"][0]
        with open(log, "a") as f:
            f.write(f"3,901,6000000000,-;NVRM: Xid (PCI:{gpu[5:]}): 79, pid=4242, name=<script>x</script>, GPU has "
                    "fallen off the bus.\n")
        wait("the Xid's event", lambda: any(e["kind"] == "appeared" for e in json.loads(get("/v1/events")[2])["events"]))
        status, headers, body = get("/")
        if status != 200 or not headers.get("Content-Type", "").startswith("text/html"):
            fail(f"agent /: {status} {headers.get('Content-Type')}")
        if "default-src 'none'" not in headers.get("Content-Security-Policy", ""):
            fail("agent /: no Content-Security-Policy header")
        if get("/report.html")[0] != 200:
            fail("agent /report.html: not served")
        diag = json.loads(get("/v1/status?format=json")[2])
        strings, errors = expect_node(snap, diag)
        if not errors:
            fail("agent: the Xid 79 gave no error finding")
        check(browser, "agent", url + "/", strings, errors, allowed={url + "/"},
              also=['id="events"', "appeared", "&lt;script&gt;x&lt;/script&gt;" if "<script>x" in body else ""])
    finally:
        proc.terminate()  # the agent this test started, by its own handle
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    chromium = cdp.find_chromium()
    if not chromium:
        skip_or_fail("chromium is not installed (bash scripts/install-deps.sh --with-browser)")
    os.makedirs(os.path.join(work, "screens"), exist_ok=True)
    os.makedirs(os.path.join(work, "scenarios"), exist_ok=True)
    profile = os.path.join(work, "profile-" + case)
    shutil.rmtree(profile, ignore_errors=True)
    with open(os.path.join(work, f"chromium-{case}.log"), "wb") as log:
        browser = cdp.Browser(chromium, profile, log)
        try:
            pages(browser) if case == "pages" else agent(browser)
        finally:
            browser.close()
    if os.environ.get("GPUDX_UPDATE_SCREENSHOTS") == "1":
        for name, doc in DOC_SHOTS.items():
            shot = os.path.join(work, "screens", name + ".png")
            if os.path.exists(shot):
                os.makedirs(os.path.join(src, "docs", "report"), exist_ok=True)
                shutil.copy(shot, os.path.join(src, "docs", "report", doc))
    if failures:
        print(f"{len(failures)} failure(s)", file=sys.stderr)
        sys.exit(1)
    print(f"every page passed; screenshots in {os.path.join(work, 'screens')}")


main()
