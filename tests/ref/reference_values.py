#!/usr/bin/env python3
"""tests/ref/reference_values.py - does a file attnrun wrote hold the values of
the float64 reference (tests/ref/reference.py, straight from the formulas)?

    reference_values.py values OUT GROUPS IN HEADS [NAMES [ABSENT]]
        each group of GROUPS (comma-separated) in OUT holds, for each output
        of NAMES (comma-separated; default every output present, at least
        one), the reference values of IN with HEADS heads, finite and within
        1e-4 of the reference's largest magnitude; and OUT has no group
        ABSENT (when given)

Prints the reason and exits 1 when it does not (tests/ref/subcommands.py).
"""
import os

import numpy as np
import h5py

import reference
from subcommands import check, fail, run


def values_problem(out, group, inp, heads, names=None):
    """'' when OUT's group holds the reference values (within 1e-4 of the
    dataset's largest magnitude) for names (default: every output present)."""
    ref = reference.from_file(inp, heads)
    try:
        f = h5py.File(out, "r")
    except OSError as e:
        return "OUT is not an HDF5 file: %s" % e
    with f:
        if group not in f:
            return "no group %s in %s" % (group, os.path.basename(out))
        g = f[group]
        present = [k for k in reference.OUTPUTS if k in g]
        want = list(names) if names else present
        if not want or set(want) - set(present):
            return "%s holds %s, expected %s" % (group, present, want)
        for k in want:
            got = g[k][...].astype(np.float64)
            if got.shape != ref[k].shape:
                return "%s%s has shape %s, expected %s" % (group.rstrip("/") + "/", k, got.shape, ref[k].shape)
            top = float(np.max(np.abs(ref[k])))
            err = float(np.max(np.abs(got - ref[k]))) if got.size else 0.0
            if not np.isfinite(got).all() or err > 1e-4 * max(top, 1e-30):
                return "%s off by %.3g (largest |reference| %.3g)" % (k, err, top)
    return ""


def values(out, groups, inp, heads, names="", absent=""):
    if absent:
        with h5py.File(out, "r") as f:
            if absent in f:
                fail("the group %s is in %s" % (absent, os.path.basename(out)))
    for group in groups.split(","):
        check(values_problem(out, group, inp, int(heads), names.split(",") if names else None))


if __name__ == "__main__":
    run({"values": values}, __doc__)
