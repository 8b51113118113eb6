#!/usr/bin/env python3
"""Writes the "## Every signature" section of docs/signatures.md from data/signatures.toml, in catalogue order.
A signature id declared more than once (one per vendor or wording) is one entry: its summaries joined by " / ",
its meanings by a blank, its templates listed together. A unit test (Signatures.DeclarationsCoverEveryEmittedId)
fails when an id is missing from the page; this script is how it is put back.

  tools/signatures_doc.py            rewrite docs/signatures.md in place
  tools/signatures_doc.py --check    exit 1 when the page differs from what the catalogue makes
"""
import os
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATALOGUE = os.path.join(ROOT, "data", "signatures.toml")
DOC = os.path.join(ROOT, "docs", "signatures.md")
HEADING = "## Every signature\n"


def entries(catalogue):
    merged = {}
    for s in catalogue["signature"]:
        e = merged.setdefault(s["id"], {"summary": [], "meaning": [], "next_step": [], "match": [], "first": s})
        for key in ("summary", "meaning", "next_step"):
            if s.get(key) and s[key] not in e[key]:
                e[key].append(s[key])
        match = s["match"] if isinstance(s["match"], list) else [s["match"]]
        e["match"] += [m for m in match if m not in e["match"]]
    return merged


def section(catalogue):
    out = [HEADING]
    for sid, e in entries(catalogue).items():
        s = e["first"]
        out.append(f"\n### `{sid}`\n\n")
        out.append(" / ".join(e["summary"]) + "  \n")
        out.append(f"*layer* `{s['layer']}`, *severity* `{s['severity']}`, *vendor* {s.get('vendor', 'any')}\n\n")
        out.append(" ".join(e["meaning"]) + "\n\n")
        if e["next_step"]:
            out.append("**Next step:** " + e["next_step"][0] + "\n\n")  # the first wording: they say one thing
        out.append("Matches: " + "; ".join(f"`{m}`" for m in e["match"]) + "\n")
    return "".join(out)


def main():
    with open(CATALOGUE, "rb") as f:
        catalogue = tomllib.load(f)
    with open(DOC) as f:
        doc = f.read()
    at = doc.find(HEADING)
    if at < 0:
        sys.exit(f"{DOC}: no '{HEADING.strip()}' heading")
    new = doc[:at] + section(catalogue)
    if "--check" in sys.argv:
        sys.exit(0 if new == doc else 1)
    with open(DOC, "w") as f:
        f.write(new)


if __name__ == "__main__":
    main()
