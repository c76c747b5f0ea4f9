#!/usr/bin/env python3
"""tests/ref/append_index.py - what readers find in a results index that
`attnrun -o INDEX --append --group G` builds (docs/append.md): its groups,
their dimension scales (h5py), their variables (xarray, engines netCDF4 and
h5netcdf) and their dimensions (ncdump -h).

    append_index.py groups INDEX NAME...
        the index's top-level groups are exactly NAME...
    append_index.py scales INDEX GROUP...
        every output of every GROUP has, on each axis, one dimension scale
        named after the axis label inside GROUP, holding 0 .. len-1
    append_index.py xarray INDEX GROUP[=DIRECT]...
        xarray's default engine (netCDF4) opens every GROUP with variables
        and weights' last dimensions (query, key); with DIRECT (the file of
        a direct -o run of that group) the values are DIRECT's bit for bit
    append_index.py ncdump INDEX LISTING
        LISTING (the output of `ncdump -h INDEX`) shows, under each group,
        the dimensions h5py finds in that group's axis scales; prints how
        many groups
    append_index.py part_h5netcdf PART DIRECT GROUP
        h5netcdf opens a part file itself: GROUP's weights have dimensions
        (batch, head, query, key) and DIRECT's values
    append_index.py order INDEX GROUP...
        the index lists its groups (paths) in the order GROUP...: its groups
        track link creation order, and h5py (the root group's own listing,
        and each group's), netCDF4 and `h5dump --sort_by=creation_order`
        all list them so
    append_index.py untrack INDEX
        rewrites INDEX as attnrun 1.5 wrote it: the same links, without link
        creation order, made in reverse name order
    append_index.py parts DIR PREFIX NAME...
        the files in the parts directory DIR whose names start with PREFIX
        are exactly NAME...

Each prints the reason and exits 1 when it is not so (tests/ref/subcommands.py).
"""
import os
import re

import numpy as np
import h5py

from output_layout import axis_scale_problem
from reference import OUTPUTS
from subcommands import check, fail, run


def groups(index, name, *more):
    with h5py.File(index, "r") as f:
        if sorted(f) != sorted((name,) + more):
            fail("groups %s" % sorted(f))


def scales(index, group, *more):
    with h5py.File(index, "r") as f:
        for g in (group,) + more:
            for k in OUTPUTS:
                if k in f[g]:
                    ds = f[g][k]
                    for axis, dim in enumerate(ds.dims):
                        check(axis_scale_problem(ds, axis, dim.label, g))


def xarray_problem(index, group, direct=None):
    """'' when xarray's default engine (netCDF4) opens the index's group with
    named dimensions; with direct, the values are direct's."""
    import xarray as xr
    with xr.open_dataset(index, group=group) as ds:
        if "weights" in ds and ds.weights.dims[-2:] != ("query", "key"):
            return "%s: weights dims %s" % (group, ds.weights.dims)
        if not ds.data_vars:
            return "%s: no variables" % group
        if direct is not None:
            with h5py.File(direct, "r") as f:
                for k in ds.data_vars:
                    if not np.array_equal(ds[k].values, f[group][k][...], equal_nan=True):
                        return "%s/%s: xarray reads other values" % (group, k)
    return ""


def xarray(index, spec, *more):
    for s in (spec,) + more:
        group, _, direct = s.partition("=")
        check(xarray_problem(index, group, direct or None))


def ncdump_dimensions(listing):
    """The dimensions ncdump -h lists under each group, by group path."""
    found, path = {}, []
    with open(listing) as f:
        for line in f:
            s = line.strip()
            m = re.match(r"group: (\S+) \{", s)
            if m:
                path.append(m.group(1))
                continue
            m = re.match(r"(\w+) = (\d+) ;", s)
            if m and path:
                found.setdefault("/" + "/".join(path), {})[m.group(1)] = int(m.group(2))
            elif s.startswith("} // group") and path:
                path.pop()
    return found


def axis_dimensions(index):
    """The axis scales h5py finds under each top-level object, by group path."""
    expected = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.attrs.get("attnrun_role") in (b"axis", "axis"):
            g, axis = name.rsplit("/", 1)
            expected.setdefault("/" + g, {})[axis] = obj.shape[0]
    with h5py.File(index, "r") as f:
        for top in f:
            f[top].visititems(lambda n, o: visit(top + "/" + n, o))
    return expected


def ncdump(index, listing):
    found, expected = ncdump_dimensions(listing), axis_dimensions(index)
    if not expected:
        fail("no groups found with h5py")
    for g, dims in expected.items():
        if found.get(g) != dims:
            fail("%s: ncdump lists %s, the part holds %s" % (g, found.get(g), dims))
    print("%d groups" % len(expected))


def part_h5netcdf(part, direct, group):
    import xarray as xr
    with xr.open_dataset(part, group=group, engine="h5netcdf") as ds, h5py.File(direct, "r") as f:
        if ds.weights.dims != ("batch", "head", "query", "key"):
            fail("dims %s" % (ds.weights.dims,))
        if not np.array_equal(ds.weights.values, f[group + "/weights"][...]):
            fail("values differ")


def _tree(group, prefix=""):
    """The index's link paths below group, in the group's listing order."""
    out = []
    for name in group:
        link = group.get(name, getlink=True)
        path = prefix + "/" + name
        if isinstance(link, h5py.ExternalLink):
            out.append(path)
        else:
            out.extend(_tree(group[name], path))
    return out


def _netcdf_tree(group, prefix=""):
    out = []
    for name, sub in group.groups.items():
        path = prefix + "/" + name
        nested = _netcdf_tree(sub, path) if not sub.variables else []
        out.extend(nested or [path])
    return out


def order(index, group, *more):
    import subprocess
    import netCDF4
    want = list((group,) + more)
    with h5py.File(index, "r") as f:
        flags = f["/"].id.get_create_plist().get_link_creation_order()
        if not flags & h5py.h5p.CRT_ORDER_TRACKED:
            fail("the root group does not track link creation order")
        # f["/"]: h5py before 3.11 lists a File itself by name (h5py #1577)
        if _tree(f["/"]) != want:
            fail("h5py lists %s" % _tree(f["/"]))
    with netCDF4.Dataset(index) as d:
        if _netcdf_tree(d) != want:
            fail("netCDF4 lists %s" % _netcdf_tree(d))
    listing = subprocess.run(["h5dump", "--sort_by=creation_order", "-n", index],
                             capture_output=True, text=True, check=True).stdout
    links = re.findall(r"^ ext link\s+(\S+) ->", listing, re.M)
    if links != want:
        fail("h5dump --sort_by=creation_order lists %s" % links)


def untrack(index):
    with h5py.File(index, "r") as f:
        attrs = dict(f.attrs)
        links = {}
        for path in _tree(f["/"]):
            link = f.get(path, getlink=True)
            links[path] = (link.filename, link.path)
    os.remove(index)
    with h5py.File(index, "w", track_order=False) as f:
        for k, v in attrs.items():
            f.attrs[k] = v
        for path in sorted(links, reverse=True):
            f[path] = h5py.ExternalLink(*links[path])


def parts(d, prefix, name, *more):
    names = sorted(n for n in os.listdir(d) if n.startswith(prefix))
    if names != sorted((name,) + more):
        fail("parts %s" % names)


if __name__ == "__main__":
    run({f.__name__: f for f in (groups, scales, xarray, ncdump, part_h5netcdf, order, untrack, parts)}, __doc__)
