#!/usr/bin/env python3
"""tests/ref/tree_snapshot.py - the state of a directory tree, for checks that
a failed or refused run left everything as it was: a sorted line per
directory ("dir REL") and per file, hidden ones too ("REL SHA256").

    tree_snapshot.py DIR
"""
import hashlib
import os
import sys


def snapshot(top):
    out = []
    for d, dirs, files in os.walk(top):
        rel = os.path.relpath(d, top)
        out.append("dir " + rel)
        for n in sorted(files):
            with open(os.path.join(d, n), "rb") as f:
                out.append("%s %s" % (os.path.join(rel, n), hashlib.sha256(f.read()).hexdigest()))
    return "\n".join(sorted(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(snapshot(sys.argv[1]))
