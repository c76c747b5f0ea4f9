#!/usr/bin/env python3
"""tests/lib/layers.py - the layers of the source tree, checked.

    python3 tests/lib/layers.py [ROOT]     exit 0 when every include keeps to
                                           its layer, 1 (naming each one) when not

libattn is five layers, lowest first; a file may include headers of its own
layer and of the layers below it, never above:

    core   lib/core/   status, sizes, allocation, threads, atomic files, guards
    math   lib/math/   the kernels and the stored forms, on plain buffers
    plan   lib/plan/   tables, shapes, steps, tiles: arithmetic, no files
    h5     lib/h5/     HDF5 files read and written (knows no attention)
    run    lib/run/    one run: the pipeline joining the layers below

Each public header (include/attn/, what `make install` installs) belongs to
the layer that implements it, and includes public headers only.  The
command line (cmd/) includes public headers and its own: cmd/cli/ (shared by
every command), one folder per command, which never includes another's,
and cmd/main.c, which names them all.

An include is resolved as the compiler does: beside the including file,
then in include/attn/, then in lib/ (for lib/) or cmd/ (for cmd/).  System
headers (<...>) are not the tree's.  The check runs its own self-checks
first: a violation of each kind planted in a copy must be found.
"""
import os
import re
import sys

LAYERS = ["core", "math", "plan", "h5", "run"]

# The public headers, by the layer that implements them.
PUBLIC = {
    "attn_common.h": "core", "attn_threads.h": "core", "attn_atomic.h": "core",
    "attn_math.h": "math",
    "attn_plan.h": "plan",
    "attn_results.h": "h5",
    "attn_run.h": "run", "attn_ranks.h": "run", "attn_tokens.h": "run",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".c", ".h", ".inc")


def tree_files(root):
    """{path relative to root: text} of the C sources and headers checked."""
    files = {}
    for top in ("include", "lib", "cmd"):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith(SOURCES):
                    path = os.path.join(folder, name)
                    files[os.path.relpath(path, root)] = open(path, encoding="utf-8").read()
    return files


def resolve(files, including, target):
    """The tree path an include names, or None (a system header)."""
    here = os.path.dirname(including)
    search = [here, "include/attn"]
    if including.startswith("lib/"):
        search.append("lib")
    if including.startswith("cmd/"):
        search.append("cmd")
    for folder in search:
        path = os.path.normpath(os.path.join(folder, target))
        if path in files:
            return path
    return None


def layer_of(path):
    """('lib', layer), ('public', layer), ('cmd', folder) or ('other', None)."""
    parts = path.split("/")
    if parts[0] == "include":
        return ("public", PUBLIC.get(parts[-1]))
    if parts[0] == "lib" and len(parts) == 3 and parts[1] in LAYERS:
        return ("lib", parts[1])
    if parts[0] == "cmd":
        return ("cmd", "main" if len(parts) == 2 else parts[1])
    return ("other", None)


def rank(layer):
    return LAYERS.index(layer)


def problems(files):
    """Every include that breaks the layers, as 'file: includes x (why)'."""
    found = []
    for path in sorted(files):
        kind, layer = layer_of(path)
        if kind == "public" and layer is None:
            found.append("%s: a public header no layer implements (add it to PUBLIC)" % path)
            continue
        for target in INCLUDE.findall(files[path]):
            to = resolve(files, path, target)
            if to is None:
                found.append("%s: includes \"%s\", which is not in the tree" % (path, target))
                continue
            to_kind, to_layer = layer_of(to)
            why = None
            if kind in ("lib", "public"):
                if to_kind == "cmd":
                    why = "the library includes the command line"
                elif kind == "public" and to_kind != "public":
                    why = "a public header includes a private one"
                elif to_layer is not None and to_kind in ("lib", "public") and \
                        rank(to_layer) > rank(layer):
                    why = "layer %s includes the higher layer %s" % (layer, to_layer)
            elif kind == "cmd":
                if to_kind == "lib":
                    why = "the command line includes a private header of lib/"
                elif to_kind == "cmd" and layer == "cli" and to_layer != "cli":
                    why = "the shared cli includes command %s" % to_layer
                elif to_kind == "cmd" and to_layer not in (layer, "cli") and layer != "main":
                    why = "command %s includes command %s" % (layer, to_layer)
            if why:
                found.append("%s: includes \"%s\" (%s)" % (path, target, why))
    return found


def planted(files, path, target):
    """A copy of files where `path` also includes `target`."""
    copy = dict(files)
    copy[path] = '#include "%s"\n' % target + copy[path]
    return copy


def self_check(files):
    """Each kind of violation, planted in a copy, must be found."""
    cases = [
        ("lib/core/common.c", "run/run_state.h", "layer core includes the higher layer run"),
        ("lib/math/store.c", "attn_plan.h", "layer math includes the higher layer plan"),
        ("lib/h5/h5.c", "attn_run.h", "layer h5 includes the higher layer run"),
        ("include/attn/attn_math.h", "attn_run.h", "layer math includes the higher layer run"),
        ("include/attn/attn_run.h", "../../lib/run/run_state.h", "a public header includes a private one"),
        ("cmd/cli/process.c", "h5/h5.h", "not in the tree"),
        ("cmd/cli/process.c", "../../lib/h5/h5.h", "the command line includes a private header"),
        ("cmd/plot/plot.c", "attnrun/attnrun.h", "command plot includes command attnrun"),
        ("cmd/cli/cli.c", "plot/plot.h", "the shared cli includes command plot"),
    ]
    for path, target, why in cases:
        if path not in files:
            return "self-check: %s is not in the tree" % path
        if not any(why in p for p in problems(planted(files, path, target))):
            return "self-check: %s including %s was not found (%s)" % (path, target, why)
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files = tree_files(root)
    failure = self_check(files)
    if failure:
        print("FAIL " + failure)
        return 1
    found = problems(files)
    for p in found:
        print("FAIL " + p)
    if found:
        return 1
    headers = sum(1 for p in files if p.startswith("include/"))
    print("ok %d files keep to their layers (%d public headers); the self-checks found every "
          "planted violation" % (len(files), headers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
