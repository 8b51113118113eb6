#!/usr/bin/env python3
"""Runs every real excerpt through `gpudx explain` and `gpudx diagnose --kernel-log` and checks the findings
that expected-findings.txt lists for it: each id must be among the findings of both, and an excerpt marked
`healthy` must produce no warning or error from its text. Every excerpt must be listed."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile


def read_expected(path):
    expected = {}
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        slug, _, ids = line.partition(":")
        if not ids.strip():
            sys.exit(f"{path}:{n}: `SLUG: id id ...` or `SLUG: healthy`")
        expected[slug.strip()] = ids.split()
    return expected


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"_error": p.stdout[-2000:] + p.stderr[-2000:]}


def from_text(finding, path):
    return any(e.get("source") == path for e in finding.get("evidence", []))


def check(slug, ids, label, rc, doc, path, problems):
    if "_error" in doc:
        problems.append(f"{slug}: {label}: no JSON (exit {rc}): {doc['_error']}")
        return
    findings = doc.get("findings", [])
    # A finding another one caused in the same text is folded into it (followed_by): it was still found.
    found = {f["id"] for f in findings} | {i for f in findings for i in f.get("followed_by", [])}
    if ids == ["healthy"]:
        bad = [f"{f['id']} ({f['severity']})" for f in findings
               if f["severity"] in ("warning", "error") and (label == "explain" or from_text(f, path))]
        if bad:
            problems.append(f"{slug}: {label}: healthy excerpt, but {', '.join(bad)}")
        return
    missing = [i for i in ids if i not in found]
    if missing:
        problems.append(f"{slug}: {label}: missing {', '.join(missing)}; found {', '.join(sorted(found)) or 'nothing'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpudx", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--fixture", required=True)
    a = ap.parse_args()
    expected = read_expected(a.expected)
    files = sorted(f for f in os.listdir(a.corpus) if f.endswith(".txt"))
    problems = []
    work = tempfile.mkdtemp(prefix="gpudx-corpus-")
    for f in files:
        slug = f[:-4]
        if slug not in expected:
            problems.append(f"{slug}: not listed in {a.expected}")
            continue
        # The five header lines cite the source; only the excerpt after them is what an operator pastes.
        with open(os.path.join(a.corpus, f), "rb") as src:
            excerpt = b"".join(src.readlines()[5:])
        path = os.path.join(work, f)
        with open(path, "wb") as out:
            out.write(excerpt)
        ids = expected[slug]
        rc, doc = run([a.gpudx, "explain", path, "--format", "json"])
        check(slug, ids, "explain", rc, doc, path, problems)
        if "_error" not in doc and doc.get("exit_code") != rc:
            problems.append(f"{slug}: explain: exit {rc} but the document says {doc.get('exit_code')}")
        if ids == ["healthy"] and rc != 0:
            problems.append(f"{slug}: explain: healthy excerpt, exit {rc}")
        rc, doc = run([a.gpudx, "diagnose", "--root", a.fixture, "--no-driver", "--kernel-log", path, "--format", "json"])
        check(slug, ids, "diagnose", rc, doc, path, problems)
    shutil.rmtree(work)
    for slug in expected:
        if slug + ".txt" not in files:
            problems.append(f"{slug}: listed but no such file in {a.corpus}")
    for p in problems:
        print(p)
    print(f"{len(files)} excerpts, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
