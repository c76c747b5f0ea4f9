#!/usr/bin/env python3
"""tests/ref/in_place_result.py - what `--in-place --group /attn` leaves in the
input file: the input's own datasets untouched, the results added beside them.

    in_place_result.py adds_group IN ORIGINAL
        every dataset of ORIGINAL (a copy of IN made before the run) still
        in IN with the same dtype, shape, values and attributes; /attn the
        only new top-level object, holding scores, weights, heads and
        output, with attributes causal 1 and heads 2
    in_place_result.py replaced_group IN ORIGINAL
        after --force: ORIGINAL's datasets hold the same values, and /attn
        holds scores, weights, heads and output
    in_place_result.py has IN PATH
        IN holds the object PATH

Each prints the reason and exits 1 when IN is not so (tests/ref/subcommands.py).
"""
import numpy as np
import h5py

from reference import OUTPUTS
from subcommands import fail, run

DEFAULT_OUTPUTS = {"scores", "weights", "heads", "output"}


def check_default_outputs(group):
    if {k for k in OUTPUTS if k in group} != DEFAULT_OUTPUTS:
        fail("%s holds %s" % (group.name, sorted(group)))


def adds_group(inp, original):
    with h5py.File(inp, "r") as f, h5py.File(original, "r") as o:
        for name, ds in o.items():
            if name not in f:
                fail("%s is gone" % name)
            new = f[name]
            if new.dtype != ds.dtype or new.shape != ds.shape or not np.array_equal(new[...], ds[...]):
                fail("%s changed" % name)
            if dict(new.attrs) != dict(ds.attrs):
                fail("attributes of %s changed" % name)
        extra = sorted(set(f) - set(o))
        if extra != ["attn"]:
            fail("new top-level objects %s, expected only attn" % extra)
        g = f["attn"]
        check_default_outputs(g)
        if int(g.attrs.get("causal", -1)) != 1 or int(g.attrs.get("heads", -1)) != 2:
            fail("/attn attributes causal=%r heads=%r" % (g.attrs.get("causal"), g.attrs.get("heads")))


def replaced_group(inp, original):
    with h5py.File(inp, "r") as f, h5py.File(original, "r") as o:
        for name in o:
            if not np.array_equal(f[name][...], o[name][...]):
                fail("%s changed" % name)
        check_default_outputs(f["attn"])


def has(inp, path):
    with h5py.File(inp, "r") as f:
        if path not in f:
            fail("no %s in %s" % (path, sorted(f)))


if __name__ == "__main__":
    run({f.__name__: f for f in (adds_group, replaced_group, has)}, __doc__)
