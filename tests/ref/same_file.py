#!/usr/bin/env python3
"""tests/ref/same_file.py - are two attnrun output files the same file?

    same_file.py A.h5 B.h5 [--ignore-attr NAME ...] [--no-chunks]

Written for tests/cli/test_mpi.sh (a serial run against an MPI one) and
scripts/compare-builds.py (two builds), independently of attnrun (h5py and numpy
only): walks both files from the root through every hard link and
requires
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
Prints one line naming the first difference and exits 1; prints nothing
and exits 0 when the files are the same.  Exit 2: usage or unreadable file.
"""
import sys

import numpy as np
import h5py

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
        la = [as_str(x) for x in np.asarray(a[()]).ravel().tolist()]
        lb = [as_str(x) for x in np.asarray(b[()]).ravel().tolist()]
        if la != lb:
            first = next(i for i, (x, y) in enumerate(zip(la, lb)) if x != y)
            differ("%s: strings differ, first at flat index %d: %r vs %r"
                   % (path, first, la[first], lb[first]))
        return
    if a.dtype.kind == "O":
        differ("%s: dataset of type %s not comparable here" % (path, a.dtype))
    va, vb = a[()], b[()]
    va, vb = np.ascontiguousarray(va), np.ascontiguousarray(vb)
    if a.dtype.fields is None and a.dtype.kind in "fc":
        if not np.array_equal(va, vb, equal_nan=True):
            diff = ~((va == vb) | (np.isnan(va) & np.isnan(vb)))
            idx = tuple(int(i) for i in np.argwhere(diff)[0])
            differ("%s: values differ (%d elements), first at %s: %r vs %r"
                   % (path, int(diff.sum()), idx, va[idx], vb[idx]))
    ba, bb = va.reshape(-1).view(np.uint8), vb.reshape(-1).view(np.uint8)
    if not np.array_equal(ba, bb):
        first = int(np.argmax(ba != bb))
        differ("%s: bytes differ (%d bytes), first at byte %d" % (path, int((ba != bb).sum()), first))


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
