#!/usr/bin/env python3
"""tests/ref/fixture_tolerances.py - a group of results against a fixture's
expected output (fixtures/CASE.expected.h5, computed by numpy in float64 by
fixtures/make_fixtures.py, never by attnrun) within the tolerances that
fixtures/tolerances.tsv gives the case.

    fixture_tolerances.py within FIXTURES FILE GROUP=CASE...
        for each GROUP=CASE: every dataset tolerances.tsv lists for CASE,
        read from FILE's GROUP, has the expected shape, -inf exactly where
        the expected output has it, and is off by at most the tolerance
        elsewhere

Prints the reason and exits 1 at the first that is not so
(tests/ref/subcommands.py).
"""
import os

import numpy as np
import h5py

from subcommands import check, run


def tolerances(fixtures, case):
    """{dataset name: absolute tolerance} of case in fixtures/tolerances.tsv."""
    tol = {}
    with open(os.path.join(fixtures, "tolerances.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            c, name, delta = line.rstrip("\n").split("\t")
            if c == case:
                tol[name.strip("/")] = float(delta)
    return tol


def tolerance_problem(path, group, case, fixtures):
    """'' when path's group matches fixtures/<case>.expected.h5 within the tolerances."""
    expected = os.path.join(fixtures, case + ".expected.h5")
    with h5py.File(path, "r") as a, h5py.File(expected, "r") as b:
        for name, delta in tolerances(fixtures, case).items():
            x, y = a[group][name][...].astype(np.float64), b[name][...].astype(np.float64)
            if x.shape != y.shape:
                return "%s: shape %s vs %s" % (name, x.shape, y.shape)
            inf = np.isinf(y)
            if not np.array_equal(x[inf], y[inf]):
                return "%s: -inf where the reference has none, or none where it has" % name
            err = np.max(np.abs(x[~inf] - y[~inf])) if (~inf).any() else 0.0
            if not err <= delta:
                return "%s: off by %g > %g" % (name, err, delta)
    return ""


def within(fixtures, path, group_case, *more):
    for gc in (group_case,) + more:
        group, case = gc.rsplit("=", 1)
        why = tolerance_problem(path, group, case, fixtures)
        check(why and "%s (%s): %s" % (group, case, why))


if __name__ == "__main__":
    run({"within": within}, __doc__)
