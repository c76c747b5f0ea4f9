#!/usr/bin/env python3
"""tests/ref/same_file.py - are two of attnrun's files the same, bit for bit?
The tree's one file comparer (h5py and numpy only, independently of
attnrun), in three modes:

    same_file.py A.h5 B.h5 [--ignore-attr NAME ...] [--no-chunks]
        the whole file: for a serial run against an MPI one
        (tests/cli/test_mpi.sh) and two builds (scripts/compare-builds.py,
        which imports walk, Differ and CHUNKS).
    same_file.py outputs GROUP A B [B2 ...]
        the outputs (scores ... v) in GROUP of A and of each B: the same
        names (at least one), dtypes, shapes and values bit for bit.  For
        two ways of running (threads, batch slices, --compress, --append
        against -o) that must give one answer.
    same_file.py datasets A B
        every dataset of both files, axis scales included: the same paths,
        dtypes, shapes and values bit for bit; nothing else (attributes,
        links, chunks, filters) compared.

The first argument picks the mode: exactly `outputs` or `datasets` is
that mode; anything else is the first file of the whole-file mode (a file
named outputs or datasets is compared whole by another name for it, such
as ./outputs).  Every mode compares values alike (value_difference): by
their raw bytes, so a NaN equals a NaN of the same bits and 0.0 differs
from -0.0; strings as str.

The whole-file mode walks both files from the root through every hard
link and requires
  - the same links in every group, of the same kinds (a soft link's path
    and an external link's file and path compared, never followed);
  - for every group and dataset the same attributes with equal values and
    the same HDF5 types, except those named with --ignore-attr, and
    DIMENSION_LIST / REFERENCE_LIST (object references differ between
    files; the dimension-scale check below covers what they say);
  - for every dataset the same shape, dtype, HDF5 type, chunk shape (not
    with --no-chunks: chunks follow the slice size, which follows the
    threads each process plans with), fill value, compression filter
    (compression, compression_opts, shuffle) and bit-identical values (raw
    bytes; strings compared as str);
  - dimension scales: the same datasets are scales, with the same scale
    names; on every axis of every dataset the same attached scales (by
    path) and the same label.

Every mode prints one line naming the first difference and exits 1;
prints nothing and exits 0 when the files agree.  Exit 2: a usage error
(outputs and datasets: this text on stderr, tests/ref/subcommands.py), or
in the whole-file mode a file it cannot open or compare.
"""
import collections
import os
import sys

import numpy as np
import h5py

from subcommands import check, run

INTERNAL = ("DIMENSION_LIST", "REFERENCE_LIST")


class Differ(Exception):
    pass


def differ(msg):
    raise Differ(msg)


def as_str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return v


def values_equal(a, b):
    """Attribute values: strings as str, numbers bit for bit (NaN equal)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "OSU" or b.dtype.kind in "OSU":
        la = [as_str(x) for x in a.ravel().tolist()]
        lb = [as_str(x) for x in b.ravel().tolist()]
        return la == lb
    if a.dtype != b.dtype:
        return False
    if a.dtype.fields is None and a.dtype.kind in "fc":
        if not np.array_equal(a, b, equal_nan=True):
            return False
    return a.tobytes() == b.tobytes()


def compare_attrs(path, oa, ob, ignore):
    na = sorted(k for k in oa.attrs.keys() if k not in INTERNAL and k not in ignore)
    nb = sorted(k for k in ob.attrs.keys() if k not in INTERNAL and k not in ignore)
    if na != nb:
        only_a = sorted(set(na) - set(nb))
        only_b = sorted(set(nb) - set(na))
        differ("%s: attributes differ: only in the first %s, only in the second %s" % (path, only_a, only_b))
    for k in na:
        ia, ib = oa.attrs.get_id(k), ob.attrs.get_id(k)
        if not ia.get_type().equal(ib.get_type()):
            differ("%s@%s: attribute types differ (%s vs %s)" % (path, k, ia.dtype, ib.dtype))
        if ia.shape != ib.shape:
            differ("%s@%s: attribute shapes %s vs %s" % (path, k, ia.shape, ib.shape))
        va, vb = oa.attrs[k], ob.attrs[k]
        if not values_equal(va, vb):
            differ("%s@%s: attribute values %r vs %r" % (path, k, va, vb))


def values(d):
    """A dataset's values as every mode compares them: its strings as a
    flat list of str, else its values as an array in C order."""
    if h5py.check_string_dtype(d.dtype) is not None:
        return [as_str(x) for x in np.asarray(d[()]).ravel().tolist()]
    return np.ascontiguousarray(d[()])


# How two datasets' values differ: at, the index of the first element that
# does (a tuple; a flat index for strings), and elements, how many do -- by
# value (NaN equal to NaN) when numeric, floats that differ as numbers,
# else by their bytes (as str for strings); byte and bytes, the first
# differing byte of the raw data and how many differ (None for strings).
Difference = collections.namedtuple("Difference", "at elements numeric byte bytes")


def first_true(mask):
    return tuple(int(i) for i in np.argwhere(mask)[0])


def value_difference(va, vb):
    """None when va and vb, the values (values()) of two datasets of one
    dtype and shape, not of objects other than strings, are the same bit
    for bit -- raw bytes, so a NaN equals a NaN of the same bits and 0.0
    differs from -0.0; strings as str -- else their Difference."""
    if isinstance(va, list):
        diff = [x != y for x, y in zip(va, vb)]
        if not any(diff):
            return None
        return Difference(diff.index(True), sum(diff), False, None, None)
    ba, bb = va.reshape(-1).view(np.uint8), vb.reshape(-1).view(np.uint8)
    if np.array_equal(ba, bb):
        return None
    byte_diff = ba != bb
    byte, nbytes = int(np.argmax(byte_diff)), int(byte_diff.sum())
    if va.dtype.fields is None and va.dtype.kind in "fc":
        diff = ~((va == vb) | (np.isnan(va) & np.isnan(vb)))
        if diff.any():
            return Difference(first_true(diff), int(diff.sum()), True, byte, nbytes)
    diff = byte_diff.reshape(va.shape + (va.dtype.itemsize,)).any(axis=-1)
    return Difference(first_true(diff), int(diff.sum()), False, byte, nbytes)


CHUNKS = True                           # --no-chunks: False


def compare_dataset(path, a, b):
    if a.shape != b.shape:
        differ("%s: shape %s vs %s" % (path, a.shape, b.shape))
    if a.dtype != b.dtype:
        differ("%s: dtype %s vs %s" % (path, a.dtype, b.dtype))
    if not a.id.get_type().equal(b.id.get_type()):
        differ("%s: HDF5 types differ" % path)
    for prop in ("chunks", "compression", "compression_opts", "shuffle",
                 "fletcher32", "scaleoffset", "maxshape"):
        pa, pb = getattr(a, prop), getattr(b, prop)
        if prop == "chunks" and not CHUNKS:
            continue
        if pa != pb:
            differ("%s: %s %r vs %r" % (path, prop, pa, pb))
    pa, pb = a.id.get_create_plist(), b.id.get_create_plist()
    if pa.fill_value_defined() != pb.fill_value_defined():
        differ("%s: fill value defined %d vs %d" % (path, pa.fill_value_defined(), pb.fill_value_defined()))
    if a.dtype.kind != "O":             # (h5py's fillvalue crashes on strings)
        fa, fb = a.fillvalue, b.fillvalue
        if not values_equal(fa, fb):
            differ("%s: fill value %r vs %r" % (path, fa, fb))
    if h5py.check_string_dtype(a.dtype) is not None:
        la, lb = values(a), values(b)
        d = value_difference(la, lb)
        if d is not None:
            differ("%s: strings differ, first at flat index %d: %r vs %r"
                   % (path, d.at, la[d.at], lb[d.at]))
        return
    if a.dtype.kind == "O":
        differ("%s: dataset of type %s not comparable here" % (path, a.dtype))
    va, vb = values(a), values(b)
    d = value_difference(va, vb)
    if d is None:
        return
    if d.numeric:
        differ("%s: values differ (%d elements), first at %s: %r vs %r"
               % (path, d.elements, d.at, va[d.at], vb[d.at]))
    differ("%s: bytes differ (%d bytes), first at byte %d" % (path, d.bytes, d.byte))


def compare_scales(path, a, b):
    sa, sb = h5py.h5ds.is_scale(a.id), h5py.h5ds.is_scale(b.id)
    if sa != sb:
        differ("%s: a dimension scale in one file only (first %s, second %s)" % (path, sa, sb))
    if sa:
        ka, kb = h5py.h5ds.get_scale_name(a.id), h5py.h5ds.get_scale_name(b.id)
        if ka != kb:
            differ("%s: scale name %r vs %r" % (path, ka, kb))
    for axis in range(len(a.shape)):
        da, db = a.dims[axis], b.dims[axis]
        if da.label != db.label:
            differ("%s axis %d: label %r vs %r" % (path, axis, da.label, db.label))
        na = [da[j].name for j in range(len(da))]
        nb = [db[j].name for j in range(len(db))]
        if na != nb:
            differ("%s axis %d: attached scales %s vs %s" % (path, axis, na, nb))
        ka, kb = list(da.keys()), list(db.keys())
        if ka != kb:
            differ("%s axis %d: names of the attached scales %s vs %s" % (path, axis, ka, kb))


def link_kind(group, name):
    link = group.get(name, getlink=True)
    if isinstance(link, h5py.SoftLink):
        return ("soft", link.path)
    if isinstance(link, h5py.ExternalLink):
        return ("external", link.filename, link.path)
    return ("hard",)


def walk(path, a, b, ignore):
    compare_attrs(path, a, b, ignore)
    if isinstance(a, h5py.Dataset) or isinstance(b, h5py.Dataset):
        if not (isinstance(a, h5py.Dataset) and isinstance(b, h5py.Dataset)):
            differ("%s: a dataset in one file only (%s vs %s)" % (path, type(a).__name__, type(b).__name__))
        compare_dataset(path, a, b)
        compare_scales(path, a, b)
        return
    if isinstance(a, h5py.Datatype) or isinstance(b, h5py.Datatype):
        if not (isinstance(a, h5py.Datatype) and isinstance(b, h5py.Datatype)):
            differ("%s: a named type in one file only" % path)
        if not a.id.equal(b.id):
            differ("%s: named types differ" % path)
        return
    if not (isinstance(a, h5py.Group) and isinstance(b, h5py.Group)):
        differ("%s: a group in one file only" % path)
    ka, kb = sorted(a.keys()), sorted(b.keys())
    if ka != kb:
        only_a = sorted(set(ka) - set(kb))
        only_b = sorted(set(kb) - set(ka))
        differ("%s: members differ: only in the first %s, only in the second %s" % (path, only_a, only_b))
    for k in ka:
        child = path.rstrip("/") + "/" + k
        la, lb = link_kind(a, k), link_kind(b, k)
        if la != lb:
            differ("%s: link %r vs %r" % (child, la, lb))
        if la[0] != "hard":
            continue                # compared as a link, not followed
        walk(child, a[k], b[k], ignore)


def main(argv):
    global CHUNKS
    files, ignore = [], set()
    i = 0
    while i < len(argv):
        if argv[i] == "--no-chunks":
            CHUNKS = False
            i += 1
        elif argv[i] == "--ignore-attr":
            if i + 1 >= len(argv):
                print("usage: same_file.py SERIAL.h5 MPI.h5 [--ignore-attr NAME ...]")
                return 2
            ignore.add(argv[i + 1])
            i += 2
        elif argv[i].startswith("--ignore-attr="):
            ignore.add(argv[i].split("=", 1)[1])
            i += 1
        else:
            files.append(argv[i])
            i += 1
    if len(files) != 2:
        print("usage: same_file.py SERIAL.h5 MPI.h5 [--ignore-attr NAME ...]")
        return 2
    try:
        fa = h5py.File(files[0], "r")
    except OSError as e:
        print("cannot open %s: %s" % (files[0], e))
        return 2
    try:
        fb = h5py.File(files[1], "r")
    except OSError as e:
        print("cannot open %s: %s" % (files[1], e))
        return 2
    try:
        with fa, fb:
            walk("/", fa, fb, ignore)
    except Differ as e:
        print(e)
        return 1
    except Exception as e:              # one line, whatever broke
        print("cannot compare: %s: %s" % (type(e).__name__, str(e).replace("\n", " ")))
        return 2
    return 0


# ---------------------------------------- the modes outputs and datasets

def outputs_differ(path_a, path_b, group="/"):
    """'' when both files' group holds the same outputs with equal values, else why."""
    # imported here: the whole-file mode (and compare-builds.py, which
    # imports this module) needs no more than h5py and numpy
    from reference import OUTPUTS
    with h5py.File(path_a, "r") as a, h5py.File(path_b, "r") as b:
        ga, gb = a[group], b[group]
        oa = sorted(k for k in OUTPUTS if k in ga)
        ob = sorted(k for k in OUTPUTS if k in gb)
        if oa != ob:
            return "different outputs: %s vs %s" % (oa, ob)
        if not oa:
            return "no outputs"
        for k in oa:
            da, db = ga[k], gb[k]
            if da.dtype != db.dtype or da.shape != db.shape:
                return "%s: %s%s vs %s%s" % (k, da.dtype, da.shape, db.dtype, db.shape)
            x, y = values(da), values(db)
            if da.dtype.kind == "O" and not isinstance(x, list):
                return "%s: dataset of type %s not comparable here" % (k, da.dtype)
            d = value_difference(x, y)
            if d is not None:
                return "%s differs first at %s: %r vs %r" % (k, d.at, x[d.at], y[d.at])
    return ""


def all_datasets(path):
    """Every dataset of the file at path: {name: (dtype, shape, values)}."""
    found = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                found[name] = (obj.dtype, obj.shape, values(obj))
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
        (ta, sa, x), (tb, sb, y) = da[k], db[k]
        if ta != tb or sa != sb:
            return "%s differs" % k
        if ta.kind == "O" and not isinstance(x, list):
            return "%s differs" % k         # objects other than strings: not comparable
        if value_difference(x, y) is not None:
            return "%s differs" % k
    return ""


def outputs(group, a, b, *more):
    for other in (b,) + more:
        why = outputs_differ(a, other, group)
        check(why and "%s vs %s: %s" % (os.path.basename(other), os.path.basename(a), why))


def datasets(a, b):
    check(datasets_differ(a, b))


MODES = {"outputs": outputs, "datasets": datasets}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        run(MODES, __doc__)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
