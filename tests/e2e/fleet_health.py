#!/usr/bin/env python3
"""`gpudx fleet report` shows each node's health, from real captures.

A small fleet is built from the captured nodes (tests/fixtures/h200x2, the 1xH200 tests/fixtures/h200x1-gathered)
and two scenario trees derived from h200x2 (a GPU on PCIe but missing from the driver, a link trained at x8):
each tree is snapshotted with `gpudx snapshot` and given its own hostname; one node is given only as a saved
`gpudx diagnose --format json`, one as its snapshot plus a saved diagnosis. The report must:
  - call only the healthy node in its tested set conforming (the two faulty ones were "conforming" when only
    versions were compared);
  - group the findings by class and id, with each node's health source (snapshot, diagnosis);
  - exit 1 (an error finding).
The JSON and text reports are compared with tests/golden/fleet-health.report.{json,txt}
(GPUDX_UPDATE_GOLDEN=1 rewrites them)."""
import argparse, json, os, shutil, subprocess, sys

VOLATILE_KEYS = {"generated_at", "read_seconds"}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def build_tree(fixture, scenario, out):
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(fixture, out, symlinks=True)
    subprocess.run(["chmod", "-R", "u+w", out], check=True)  # as tests/integration/lib.sh: build_scenario
    p = run(["bash", os.path.join(scenario, "setup.sh")], cwd=out)
    if p.returncode != 0:
        sys.exit(f"{scenario}/setup.sh failed: {p.stderr}")


def snapshot(gpudx, root, hostname, path):
    p = run([gpudx, "snapshot", "--root", root, "--no-driver"])
    if p.returncode != 0:
        sys.exit(f"gpudx snapshot --root {root} exited {p.returncode}: {p.stderr}")
    j = json.loads(p.stdout)
    j["host"]["hostname"] = hostname  # each capture is of a host called "vm"; a fleet has distinct names
    j["collected_at"] = "2026-11-30T06:00:00Z"
    with open(path, "w") as f:
        json.dump(j, f, indent=2)


def diagnosis(gpudx, root, hostname, path, collected_at):
    p = run([gpudx, "diagnose", "--root", root, "--no-driver", "--format", "json"])
    if p.returncode not in (0, 1, 2):
        sys.exit(f"gpudx diagnose --root {root} exited {p.returncode}: {p.stderr}")
    j = json.loads(p.stdout)
    j["host"] = hostname
    j["collected_at"] = collected_at
    with open(path, "w") as f:
        json.dump(j, f, indent=2)


def normalise(value, work, src):
    """Drops volatile keys and writes the machine's paths as <work> and <source>."""
    if isinstance(value, dict):
        return {k: normalise(v, work, src) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [normalise(v, work, src) for v in value]
    if isinstance(value, str):
        return value.replace(work, "<work>").replace(src, "<source>")
    return value


def compare_golden(path, text, problems):
    if os.environ.get("GPUDX_UPDATE_GOLDEN") == "1":
        with open(path, "w") as f:
            f.write(text)
        print(f"updated {path}")
        return
    try:
        want = open(path).read()
    except FileNotFoundError:
        problems.append(f"{path} does not exist (GPUDX_UPDATE_GOLDEN=1 writes it)")
        return
    if want != text:
        import difflib
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), path, "now", n=2))
        problems.append(f"{path} differs:\n{diff[:6000]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpudx", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    src, work = os.path.abspath(a.source), os.path.abspath(a.work)
    fixtures, scenarios = os.path.join(src, "tests/fixtures"), os.path.join(src, "tests/scenarios")
    shutil.rmtree(work, ignore_errors=True)
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    h200x2 = os.path.join(fixtures, "h200x2")
    for name in ("gpu-not-in-driver", "link-degraded"):
        build_tree(h200x2, os.path.join(scenarios, name), os.path.join(work, "trees", name))

    snapshot(a.gpudx, h200x2, "gpu-a001", os.path.join(inputs, "gpu-a001.json"))
    snapshot(a.gpudx, os.path.join(work, "trees/gpu-not-in-driver"), "gpu-a002", os.path.join(inputs, "gpu-a002.json"))
    snapshot(a.gpudx, os.path.join(work, "trees/link-degraded"), "gpu-a003", os.path.join(inputs, "gpu-a003.json"))
    # Only its saved diagnosis (as an agent's /v1/status would be saved): versions unknown, health known.
    diagnosis(a.gpudx, os.path.join(work, "trees/gpu-not-in-driver"), "gpu-a004",
              os.path.join(inputs, "gpu-a004.diagnosis.json"), "2026-11-30T06:00:00Z")
    # The 1xH200 node: its snapshot and, as new as it, its saved diagnosis, which counts instead of the rules.
    h200x1 = os.path.join(fixtures, "h200x1-gathered")
    snapshot(a.gpudx, h200x1, "gpu-b001", os.path.join(inputs, "gpu-b001.json"))
    diagnosis(a.gpudx, h200x1, "gpu-b001", os.path.join(inputs, "gpu-b001.diagnosis.json"), "2026-11-30T06:00:00Z")
    # A diagnosis older than the snapshot of its host is left out: the rules run on the newer snapshot.
    diagnosis(a.gpudx, os.path.join(work, "trees/link-degraded"), "gpu-a001",
              os.path.join(inputs, "gpu-a001.old-diagnosis.json"), "2026-11-29T06:00:00Z")

    matrix = os.path.join(src, "examples/matrix.toml")
    base = [a.gpudx, "fleet", "report", "-q", "--today", "2026-12-01", "--matrix", matrix, inputs]
    pj = run(base + ["--format", "json"])
    pt = run(base + ["--limit", "0"])
    problems = []
    if pj.returncode != 1:
        problems.append(f"fleet report --format json exited {pj.returncode}, expected 1: {pj.stderr}")
    if pt.returncode != 1:
        problems.append(f"fleet report exited {pt.returncode}, expected 1: {pt.stderr}")
    report = json.loads(pj.stdout)
    classes = {c["name"]: c for c in report["classes"]}
    h = classes.get("h200x2")
    if not h:
        sys.exit("no class h200x2 in the report:\n" + pj.stdout)
    unhealthy = {u["node"]: u for u in h["unhealthy"]}
    ids = {n: sorted(f["id"] for f in u["findings"]) for n, u in unhealthy.items()}
    want = [
        (h["nodes"] == 5, f"class h200x2 has {h['nodes']} nodes, expected 5"),
        (h["conforming"] == 1, f"{h['conforming']} conforming, expected 1 (gpu-a001 only)"),
        ("gpu-a001" not in unhealthy, "the healthy capture is listed unhealthy: " + json.dumps(unhealthy.get("gpu-a001"))),
        ("module.gpu_not_in_driver" in ids.get("gpu-a002", []), f"gpu-a002: {ids.get('gpu-a002')}"),
        (unhealthy.get("gpu-a002", {}).get("health") == "snapshot", "gpu-a002's health is not from its snapshot"),
        ("pcie.link_degraded" in ids.get("gpu-a003", []), f"gpu-a003: {ids.get('gpu-a003')}"),
        ("module.gpu_not_in_driver" in ids.get("gpu-a004", []), f"gpu-a004: {ids.get('gpu-a004')}"),
        (unhealthy.get("gpu-a004", {}).get("health") == "diagnosis", "gpu-a004's health is not from its diagnosis"),
        (h["health_only"] == 1, f"health_only {h['health_only']}, expected 1"),
        (h["finding_nodes"].get("module.gpu_not_in_driver", {}).get("nodes") == 2,
         f"module.gpu_not_in_driver on {h['finding_nodes'].get('module.gpu_not_in_driver')} nodes, expected 2"),
        (report["health"] == {"diagnosis": 2, "snapshot": 3, "unknown": 0}, f"health sources {report['health']}"),
        (any(s["file"].endswith("gpu-a001.old-diagnosis.json") for s in report["superseded"]),
         "the old diagnosis of gpu-a001 is not listed as superseded"),
    ]
    problems += [msg for ok, msg in want if not ok]
    golden = os.path.join(src, "tests/golden")
    compare_golden(os.path.join(golden, "fleet-health.report.json"),
                   json.dumps(normalise(report, work, src), indent=2, sort_keys=True) + "\n", problems)
    compare_golden(os.path.join(golden, "fleet-health.report.txt"), normalise(pt.stdout, work, src), problems)
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(pt.stdout)
    print("ok")


main()
