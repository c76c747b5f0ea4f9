#!/usr/bin/env python3
"""tests/ref/identical_outputs.py - do two of attnrun's files hold the same
results, bit for bit?  For checks that two ways of running (threads, batch
slices, --compress, --append against -o, closed descriptors) give one answer.

    identical_outputs.py outputs GROUP A B [B2 ...]
        the outputs (scores ... v) in GROUP of A and of each B: the same
        names (at least one), dtypes, shapes and values bit for bit, NaN
        equal to NaN.
    identical_outputs.py datasets A B
        every dataset of both files, axis scales included: the same paths,
        dtypes, shapes and values bit for bit.

Prints the first difference and exits 1; prints nothing and exits 0 when
the files agree (tests/ref/subcommands.py).
"""
import os

import numpy as np
import h5py

from reference import OUTPUTS
from subcommands import check, run


def first_difference(x, y):
    """The index of the first element where x and y differ (NaN equal to NaN)."""
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    return tuple(int(j) for j in np.argwhere(~same)[0])


def outputs_differ(path_a, path_b, group="/"):
    """'' when both files' group holds the same outputs with equal values, else why."""
    with h5py.File(path_a, "r") as a, h5py.File(path_b, "r") as b:
        ga, gb = a[group], b[group]
        oa = sorted(k for k in OUTPUTS if k in ga)
        ob = sorted(k for k in OUTPUTS if k in gb)
        if oa != ob:
            return "different outputs: %s vs %s" % (oa, ob)
        if not oa:
            return "no outputs"
        for k in oa:
            x, y = ga[k][...], gb[k][...]
            if x.dtype != y.dtype or x.shape != y.shape:
                return "%s: %s%s vs %s%s" % (k, x.dtype, x.shape, y.dtype, y.shape)
            if not np.array_equal(x, y, equal_nan=True):
                i = first_difference(x, y)
                return "%s differs first at %s: %r vs %r" % (k, i, x[i], y[i])
    return ""


def all_datasets(path):
    found = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                found[name] = obj[...]
        f.visititems(visit)
    return found


def datasets_differ(path_a, path_b):
    """'' when both files hold the same datasets with bitwise equal values."""
    try:
        da, db = all_datasets(path_a), all_datasets(path_b)
    except OSError as e:
        return "cannot read: %s" % e
    if sorted(da) != sorted(db):
        return "datasets %s vs %s" % (sorted(da), sorted(db))
    for k in da:
        x, y = da[k], db[k]
        if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
            return "%s differs" % k
    return ""


def outputs(group, a, b, *more):
    for other in (b,) + more:
        why = outputs_differ(a, other, group)
        check(why and "%s vs %s: %s" % (os.path.basename(other), os.path.basename(a), why))


def datasets(a, b):
    check(datasets_differ(a, b))


if __name__ == "__main__":
    run({"outputs": outputs, "datasets": datasets}, __doc__)
