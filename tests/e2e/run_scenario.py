#!/usr/bin/env python3
"""Builds one scenario from a capture (h200x2, or the fixture its `base` file names), runs gpudx on it and checks
the results.

Checks, in order: every finding diagnose reports is a rule `gpudx rules` declares, filed under a layer its
declaration names; diagnose's finding ids and failure boundary against the scenario's `expect` file, then the
snapshot and diagnose JSON against tests/golden/<scenario>.{snapshot,diagnose}.json.
With GPUDX_UPDATE_GOLDEN=1 the golden files are rewritten instead of compared."""
import argparse, json, os, shlex, shutil, stat, subprocess, sys

VOLATILE_KEYS = {"duration_ms", "collected_at"}


def normalise(value, places):
    """Drops volatile keys and writes the machine's paths as <root>, <standins>, <scenario>."""
    if isinstance(value, dict):
        return {k: normalise(v, places) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [normalise(v, places) for v in value]
    if isinstance(value, str):
        for path, name in places:
            value = value.replace(path, name)
        return value
    return value


def standin_scenarios(scenario):
    """tests/standins/scenarios (the stand-ins' recorded answers), for setup.sh as $STANDIN_SCENARIOS:
    $STANDIN_SCENARIOS when set, else found next to this script or next to the scenario's folder."""
    if os.environ.get("STANDIN_SCENARIOS"):
        return os.environ["STANDIN_SCENARIOS"]
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "standins", "scenarios"),
                 os.path.join(os.path.abspath(scenario), "..", "..", "standins", "scenarios")):
        if os.path.isdir(cand):
            return os.path.normpath(cand)
    return ""


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=45)
    return p.returncode, p.stdout, p.stderr


def check_declared(gpudx, findings, problems):
    """Each finding's id is declared in a rule table and its layer is one the declaration files it under."""
    rc, out, err = run([gpudx, "rules", "--format", "json"])
    if rc != 0:
        problems.append(f"gpudx rules exited {rc}: {err}")
        return
    declared = {}
    for r in json.loads(out)["rules"]:
        # gpudx.check_failed has no layer of its own (null): the failing family's, one of those it lists.
        layers = set(r["also_filed_under"]) | ({r["layer"]} if r["layer"] else set())
        declared[r["id"]] = layers
    for f in findings:
        if f["id"] not in declared:
            problems.append(f"finding {f['id']} is not declared in any rule table (gpudx rules)")
        elif f["layer"] not in declared[f["id"]]:
            problems.append(f"finding {f['id']} is filed under {f['layer']}, declared {sorted(declared[f['id']])}")


def compare_golden(path, actual, label, problems):
    text = json.dumps(actual, indent=2, sort_keys=True) + "\n"
    if os.environ.get("GPUDX_UPDATE_GOLDEN") == "1":
        with open(path, "w") as f:
            f.write(text)
        return
    if not os.path.exists(path):
        problems.append(f"{label}: no golden file {path} (run ctest with GPUDX_UPDATE_GOLDEN=1 to create it)")
        return
    with open(path) as f:
        expected = f.read()
    if expected != text:
        import difflib
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), "golden", "actual", n=2))
        problems.append(f"{label}: differs from {path}:\n{diff[:6000]}")


def main():
    ap = argparse.ArgumentParser()
    for a in ("gpudx", "scenario", "fixture", "golden", "work", "standins"):
        ap.add_argument("--" + a, required=True)
    o = ap.parse_args()
    name = os.path.basename(o.scenario.rstrip("/"))
    tree = os.path.join(o.work, name)
    # `base`: the fixture the scenario starts from, by name among --fixture's siblings (mi300x8); default --fixture.
    fixtures_dir = os.path.dirname(os.path.abspath(o.fixture).rstrip("/"))
    fixture = o.fixture
    base_file = os.path.join(o.scenario, "base")
    if os.path.exists(base_file):
        base = open(base_file).read().strip()
        fixture = os.path.join(fixtures_dir, base)
        if not base or "/" in base or not os.path.isdir(fixture):
            print(f"{base_file}: '{base}' is not a fixture in {fixtures_dir}")
            return 1
    if os.path.exists(tree):
        for dirpath, dirnames, _ in os.walk(tree):
            for d in dirnames:
                os.chmod(os.path.join(dirpath, d), 0o755)
        shutil.rmtree(tree)
    shutil.copytree(fixture, tree, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(tree):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | (stat.S_IXUSR if n in dirnames else 0))
    scenario_dir = os.path.abspath(o.scenario).rstrip("/")
    standins_dir = os.path.abspath(o.standins).rstrip("/")
    env = dict(os.environ, STANDIN_SCENARIOS=standin_scenarios(o.scenario), SCENARIO=scenario_dir,
               FIXTURES=fixtures_dir)
    setup = subprocess.run(["bash", os.path.join(scenario_dir, "setup.sh")], cwd=tree, capture_output=True, text=True,
                           env=env)
    if setup.returncode != 0:
        print(f"setup.sh failed ({setup.returncode}):\n{setup.stdout}{setup.stderr}")
        return 1

    args = []
    args_file = os.path.join(o.scenario, "args")
    if os.path.exists(args_file):
        text = open(args_file).read()
        for key, value in (("@STANDINS@", standins_dir), ("@ROOT@", tree), ("@SCENARIO@", scenario_dir)):
            text = text.replace(key, value)
        args = shlex.split(text)
    if "--driver-lib-dir" not in args:
        args.append("--no-driver")
    # Options that only diagnose takes stay out of the snapshot's command line.
    diagnose_only = {"--expect-gpus", "--baseline", "--matrix", "--xid-policy"}
    snap_args, i = [], 0
    while i < len(args):
        if args[i] in diagnose_only:
            i += 2
            continue
        snap_args.append(args[i])
        i += 1

    problems = []
    rc, out, err = run([o.gpudx, "snapshot", "--root", tree] + snap_args)
    if rc != 0:
        problems.append(f"snapshot exited {rc}: {err}")
    try:
        snapshot = json.loads(out)
    except ValueError as e:
        print(f"snapshot is not valid JSON: {e}\n{out[:2000]}\n{err}")
        return 1
    rc, out, err = run([o.gpudx, "diagnose", "--root", tree, "--format", "json"] + args)
    try:
        report = json.loads(out)
    except ValueError as e:
        print(f"diagnose is not valid JSON: {e}\n{out[:2000]}\n{err}")
        return 1
    if report.get("exit_code") != rc:
        problems.append(f"diagnose exit code {rc} differs from the report's exit_code {report.get('exit_code')}")

    check_declared(o.gpudx, report["findings"], problems)
    ids = {f["id"] for f in report["findings"]}
    boundary = report.get("boundary") or "none"
    expect_file = os.path.join(o.scenario, "expect")
    if os.path.exists(expect_file):
        for line in open(expect_file):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("boundary:"):
                want = line.split(":", 1)[1].strip()
                if want != boundary:
                    problems.append(f"boundary is {boundary}, expected {want}")
            elif line.startswith("!"):
                if line[1:] in ids:
                    problems.append(f"finding {line[1:]} reported but must not be")
            elif line.startswith("exit:"):
                if str(rc) != line.split(":", 1)[1].strip():
                    problems.append(f"exit code {rc}, expected {line.split(':', 1)[1].strip()}")
            elif line not in ids:
                problems.append(f"expected finding {line} not reported (got: {sorted(ids)})")
    else:
        problems.append(f"no expect file in {o.scenario}")

    # A scenario whose output depends on what the host offers (libkmod reads the module files) is checked
    # by its expect file alone: a golden file would hold one machine's answer.
    if not os.path.exists(os.path.join(o.scenario, "no-golden")):
        places = [(tree, "<root>"), (standins_dir, "<standins>"), (scenario_dir, "<scenario>")]
        compare_golden(os.path.join(o.golden, name + ".snapshot.json"), normalise(snapshot, places), "snapshot", problems)
        compare_golden(os.path.join(o.golden, name + ".diagnose.json"), normalise(report, places), "diagnose", problems)
    for p in problems:
        print("FAIL:", p)
    print(f"scenario {name}: boundary={boundary} findings={sorted(ids)} exit={rc}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
