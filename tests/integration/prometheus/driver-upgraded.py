#!/usr/bin/env python3
"""driver-upgraded.py TREE OLD NEW: turn a capture into the same node running driver NEW instead of OLD.

Every file and symlink whose name carries OLD is renamed, every symlink target rewritten, and the text files
of proc/ and sys/ that print OLD (the loaded module's version, each GPU's information file) say NEW. What a
driver upgrade that went well leaves behind: a coherent node, off its class's tested driver and nothing else.
"""
import os
import sys

tree, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
for top, dirs, files in os.walk(tree, topdown=False):
    for name in files + dirs:
        path = os.path.join(top, name)
        if os.path.islink(path):
            target = os.readlink(path)
            if old in target:
                os.unlink(path)
                os.symlink(target.replace(old, new), path)
        elif os.path.isfile(path) and os.path.relpath(path, tree).split(os.sep)[0] in ("proc", "sys"):
            with open(path, "rb") as f:
                data = f.read()
            if old.encode() in data:
                with open(path, "wb") as f:
                    f.write(data.replace(old.encode(), new.encode()))
        if old in name:
            os.rename(path, os.path.join(top, name.replace(old, new)))
