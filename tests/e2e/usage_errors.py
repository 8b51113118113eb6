#!/usr/bin/env python3
"""Usage errors: a mistake on the command line or in an input file exits 64 with one line on stderr that names
the option (or the file and its line) and what was expected; nothing on stdout, no help text, no trace.

Cases that need a driver to be absent point --driver-lib-dir at an empty directory, so the result is the same
on a machine with GPUs and one without."""
import argparse, os, shutil, subprocess, sys


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpudx", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    no_driver = os.path.join(a.work, "no-driver")
    os.makedirs(no_driver)
    node = ["--root", a.fixture, "--no-driver"]
    bad_policy = write(os.path.join(a.work, "policy.toml"),
                       'version = "site-1"\n[default]\nseverity = "warning"\naction = "look"\n[xid.79]\nseverity = \n')
    bad_matrix = write(os.path.join(a.work, "matrix.toml"), '[class.h200]\nmodel = "NVIDIA H200"\ncount = \n')
    bad_record = write(os.path.join(a.work, "node.json"), '{\n  "gpus": [\n')
    snapshot = os.path.join(a.work, "snapshot.json")
    subprocess.run([a.gpudx, "snapshot", "-o", snapshot] + node, check=True, capture_output=True)

    # (arguments, what stderr must say)
    cases = [
        (["no-such-command", "--help"], ["unknown command 'no-such-command'", "gpudx --help"]),
        (["no-such-command"], ["unknown command 'no-such-command'"]),
        (["diagnos", "--root", a.fixture], ["unknown command 'diagnos'", "did you mean 'diagnose'?"]),
        (["baseline", "sav", "x.json"], ["unknown baseline command 'sav'", "did you mean 'save'?"]),
        (["fleet", "--help", "rport"], ["unknown fleet command 'rport'", "did you mean 'report'?"]),
        ([], ["A subcommand is required"]),
        # The device map's syntax is checked before the driver is opened, and before the process is looked at.
        (["checkpoint", "1", "--device-map", "garbage", "--driver-lib-dir", no_driver],
         ["device map 'garbage': item 'garbage' is not OLD=NEW"]),
        (["restore", "1", "--device-map", "0=gpu1", "--driver-lib-dir", no_driver], ["'gpu1' names no GPU"]),
        (["migrate", "1", "--device-map", "swap:0", "--driver-lib-dir", no_driver, "--format", "text"],
         ["swap needs two GPUs"]),
        (["migrate", "1", "--driver-lib-dir", no_driver], ["migrate needs --device-map"]),
        (["state", "0"], ["pids"]),
        (["checkpoint", "1", "--timeout", "soon"], ["--timeout", "soon"]),
        # Bad values, unknown options, missing arguments.
        (["diagnose", "--deadline", "abc"] + node, ["--deadline", "abc"]),
        (["diagnose", "--deadline", "0"] + node, ["--deadline", "0"]),
        (["diagnose", "--format", "yaml"] + node, ["--format", "yaml"]),
        (["diagnose", "--bogus"] + node, ["--bogus"]),
        (["diagnose", "stray"] + node, ["not expected", "stray"]),
        (["diagnose", "--expect-gpus", "-1"] + node, ["--expect-gpus", "-1"]),
        (["diagnose", "--since", "last tuesday"] + node, ["--since", "last tuesday"]),
        (["snapshot", "--deadline", "1e9"] + node, ["--deadline"]),
        (["gather", "--deadline", "0", os.path.join(a.work, "capture")], ["--deadline", "0"]),
        (["gather"], ["output", "required"]),
        (["record", "--deadline", "x", "--file", "-"] + node, ["--deadline", "x"]),
        (["xid", "abc"], ["code", "abc"]),
        (["xid", "0"], ["code", "0"]),
        (["xid"], ["give a code", "--list"]),
        (["xid", "79", "--list"], ["--list", "excludes", "code"]),
        (["verify"], ["pid", "required"]),
        (["verify", "-3"], ["pid", "-3"]),
        (["fleet", "report", "--matrix", "examples/matrix.toml"], ["SNAPSHOT", "required"]),
        (["fleet", "report", "--jobs", "0", "--matrix", "m.toml", "s.json"], ["--jobs", "0"]),
        (["fleet", "report", "--limit", "-3", "--matrix", "m.toml", "s.json"], ["--limit", "-3"]),
        (["matrix", "check"], ["--matrix", "required"]),
        (["matrix", "validate", "--matrix", "examples/matrix.toml", "--today", "tomorrow"],
         ["--today tomorrow", "YYYY-MM-DD"]),
        (["matrix", "check", "--matrix", bad_matrix, "--today", "2026-13-01"] + node, ["--today 2026-13-01"]),
        (["accept", "--min-d2d", "fast"], ["--min-d2d", "fast"]),
        (["accept", "--min-h2d", "-5"], ["--min-h2d", "-5"]),
        (["accept", "--min-memory-fraction", "2"], ["--min-memory-fraction", "2"]),
        (["accept", "--pairs", "0-1"], ["--pairs", "item '0-1' is not A:B"]),
        (["accept", "--timeout", "0"], ["--timeout", "0"]),
        # Conflicting options.
        (["accept", "--from", "old.json", "--long"], ["--from", "excludes", "--long"]),
        (["diagnose", "--from", snapshot, "--root", a.fixture], ["--from", "excludes", "--root"]),
        (["ids", "--from", snapshot, "--driver-lib-dir", no_driver], ["--from", "excludes", "--driver-lib-dir"]),
        (["diagnose", "--node", "vm"] + node, ["--node", "requires", "--drain"]),
        (["diagnose", "--drain", "--from", snapshot], ["--drain", "--from"]),
        # Malformed input files: the file and the line.
        (["diagnose", "--xid-policy", bad_policy] + node, [bad_policy + ":6"]),
        (["xid", "79", "--xid-policy", bad_policy], [bad_policy + ":6"]),
        (["matrix", "validate", "--matrix", bad_matrix], [bad_matrix + ":3"]),
        (["fleet", "report", "--matrix", bad_matrix, snapshot], [bad_matrix + ":3"]),
        (["diagnose", "--matrix", bad_matrix] + node, [bad_matrix + ":3"]),
        (["diagnose", "--baseline", bad_record] + node, [bad_record, "line 3"]),
        (["baseline", "diff", bad_record] + node, [bad_record, "line 3"]),
        (["diagnose", "--from", bad_record], [bad_record, "line 3"]),
        (["accept", "--from", bad_record], [bad_record, "not valid JSON"]),
        (["diagnose", "--kernel-log", os.path.join(a.work, "missing.log")] + node, ["--kernel-log", "missing.log"]),
        (["diagnose", "--kernel-log", a.work] + node, ["--kernel-log", a.work, "Is a directory"]),
        (["explain", os.path.join(a.work, "missing.log")], ["missing.log", "No such file"]),
        # Input files that are directories or missing: named, with why; never an exception from the stream.
        (["diagnose", "--from", a.work], [a.work, "cannot read the snapshot: Is a directory"]),
        (["diagnose", "--from", os.path.join(a.work, "missing.json")], ["missing.json", "no such file"]),
        (["diagnose", "--baseline", a.work] + node, [a.work, "cannot read the node record: Is a directory"]),
        (["baseline", "diff", a.work] + node, [a.work, "Is a directory"]),
        (["xid", "79", "--xid-policy", a.work], [a.work, "cannot read the Xid policy file: Is a directory"]),
        (["explain", "--signatures", a.work, "--text", "x"], [a.work, "signature catalogue: Is a directory"]),
        (["matrix", "check", "--matrix", a.work] + node, [a.work, "cannot read the matrix file: Is a directory"]),
        (["accept", "--from", a.work], ["--from", a.work, "Is a directory"]),
        (["gather", "--dir", "-"], ["--dir", "standard output"]),
        (["diagnose", "--root", os.path.join(a.work, "missing")], ["--root", "not a directory"]),
        # gpudx report: the inputs of the page, each named with what is wrong (and the line of broken JSON).
        (["report", "--from", bad_record], [bad_record, "line 3"]),
        (["report", "--from", a.work], [a.work, "cannot read the saved snapshot or diagnosis: Is a directory"]),
        (["report", "--from", snapshot, "--accept", snapshot], [snapshot, "not a gpudx accept record"]),
        (["report", "--from", snapshot, "--events", bad_record], [bad_record, "line 3"]),
        (["report", "--from", snapshot, "--events", snapshot], [snapshot, "not the agent's events"]),
        (["report", "--from", write(os.path.join(a.work, "diag.json"), '{"verdict": "fine", "findings": []}')],
         ["diag.json", "verdict \"fine\" is not one gpudx writes"]),
        (["report", "--from", snapshot, "--root", a.fixture], ["--from", "excludes", "--root"]),
        (["fleet", "report", "--matrix", bad_matrix, "--format", "pdf", a.work], ["--format", "pdf"]),
    ]

    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "GPUDX_STANDIN_SCENARIO")}
    failures = 0
    for args, wanted in cases:
        p = subprocess.run([a.gpudx] + args, capture_output=True, text=True, timeout=60, env=env,
                           cwd=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
        lines = p.stderr.splitlines()
        problems = []
        if p.returncode != 64:
            problems.append(f"exit {p.returncode}, expected 64")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr, expected one")
        if p.stdout:
            problems.append(f"stdout is not empty: {p.stdout[:200]!r}")
        for w in wanted:
            if w not in p.stderr:
                problems.append(f"stderr lacks {w!r}")
        for bad in ("internal error", "terminate called", "what():"):
            if bad in p.stderr:
                problems.append(f"stderr holds {bad!r}")
        shown = " ".join(args)
        if problems:
            failures += 1
            print(f"FAIL gpudx {shown}: " + "; ".join(problems) + f"\n     stderr: {p.stderr.strip()!r}")
        else:
            print(f"ok   gpudx {shown}: {p.stderr.strip()}")
    print(f"{len(cases) - failures} of {len(cases)} usage errors exit 64 with one clear line")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
