#!/usr/bin/env python3
"""How well `gpudx explain` does on a folder of real excerpts it was not written against (real/README.md's
format: five header lines, then the excerpt as posted). This is a measurement, not a test: it prints a figure,
and exits 0 whatever the figure is.

An excerpt whose `# expect:` is a failure family counts as **named** when explain reports at least one warning
or error from its text, and as **named at its layer** when one of those findings is of the layer the curator
wrote in `# meaning: [layer] ...`. A `healthy` excerpt counts as a **false alarm** when explain reports any
warning or error.

  tests/corpus/measure.py --gpudx build/gpudx tests/corpus/unseen            the figure, one line per miss
  tests/corpus/measure.py --gpudx build/gpudx --all tests/corpus/unseen      every excerpt, named or not
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# The curator's layer words against the layers gpudx's findings carry (model/finding.hpp): the fabric is the
# driver layer's; "application" (the program's own bug) has no layer of the node, so any layer counts.
LAYER_ALIASES = {"libs": "libraries", "fabric": "driver"}


def header(lines):
    fields = {}
    for line in lines[:5]:
        m = re.match(r"# (\w+): ?(.*)", line)
        if m:
            fields[m.group(1)] = m.group(2).strip()
    m = re.match(r"\[(\w+)\]", fields.get("meaning", ""))
    fields["layer"] = m.group(1) if m else ""
    return fields


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpudx", required=True)
    ap.add_argument("--all", action="store_true", help="list every excerpt, not only the misses")
    ap.add_argument("folder")
    a = ap.parse_args()
    files = sorted(f for f in os.listdir(a.folder) if f.endswith(".txt"))
    failures = named = named_at_layer = healthy = false_alarms = 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpudx-measure-") as work:
        for f in files:
            lines = open(os.path.join(a.folder, f), "rb").read().decode("utf-8", "replace").splitlines(True)
            h = header(lines)
            path = os.path.join(work, f)
            with open(path, "w", encoding="utf-8") as out:
                out.writelines(lines[5:])
            p = subprocess.run([a.gpudx, "explain", path, "--format", "json"], capture_output=True, text=True)
            try:
                findings = json.loads(p.stdout).get("findings", [])
            except json.JSONDecodeError:
                findings = []
                rows.append(f"NO JSON  {f} (exit {p.returncode})")
            bad = [x for x in findings if x.get("severity") in ("warning", "error")]
            ids = " ".join(sorted({x["id"] for x in bad})) or "-"
            if h.get("expect") == "healthy":
                healthy += 1
                if bad:
                    false_alarms += 1
                    rows.append(f"FALSE    {f}: {ids}")
                elif a.all:
                    rows.append(f"ok       {f}")
                continue
            failures += 1
            want = LAYER_ALIASES.get(h["layer"], h["layer"])
            if bad:
                named += 1
                at_layer = want == "application" or any(x.get("layer") == want for x in bad)
                named_at_layer += at_layer
                if a.all or not at_layer:
                    rows.append(f"{'named' if at_layer else 'OTHER':8} {f}: {ids} (curator: {h['layer']})")
            else:
                rows.append(f"MISSED   {f} (curator: {h.get('expect')}, {h['layer']})")
    for r in rows:
        print(r)
    print(f"{a.folder}: named {named} of {failures} failure excerpts ({named_at_layer} at the curator's layer); "
          f"{false_alarms} false alarm(s) in {healthy} healthy excerpt(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
