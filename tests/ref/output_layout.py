#!/usr/bin/env python3
"""tests/ref/output_layout.py - how attnrun lays out an output file (docs/contract.md
§3 and §4), for tests/cli/test_cli.sh.  Expected labels come from
tests/ref/reference.py; sizes and shapes are computed here by hand.

    output_layout.py axis_labels OUT        all seven outputs, each axis labelled as LABELS says
    output_layout.py descriptions OUT       every output has a non-empty description attribute
    output_layout.py dimension_scales OUT   one scale per axis, named after its label, 0..len-1
    output_layout.py rank2_drops_batch OUT IN
                                            a rank-2 X: no batch axis, no batch scale
    output_layout.py chunking OUT           chunks of at most 1 MiB, at least 256 KiB for
                                            datasets that large (prints the chunk shapes)
    output_layout.py compress_filters GZ PLAIN
                                            GZ: gzip level 4 and shuffle on every output;
                                            PLAIN: no filters
    output_layout.py precision OUT DTYPE TAG
                                            all seven outputs stored as DTYPE, attribute
                                            precision TAG
    output_layout.py save_subset OUT        weights and output, and only the axis scales
                                            they use
    output_layout.py default_outputs OUT    OUT opens and holds scores, weights, heads, output
    output_layout.py dry_run REPORT         batch_bias's --dry-run report: FLOPs, and each
                                            output's shape and bytes
    output_layout.py xarray_opens OUT       xarray (h5netcdf) sees batch_bias's outputs as
                                            named dimensions with coordinates

Each prints the reason and exits 1 when the file is not so (tests/ref/subcommands.py).
"""
import re

import numpy as np
import h5py

from reference import AXES, LABELS, OUTPUTS
from subcommands import check, fail, run

MiB = 1 << 20
DEFAULT_OUTPUTS = ["heads", "output", "scores", "weights"]


def outputs(group):
    """The output datasets present in an h5py group, by name."""
    return {k: group[k] for k in OUTPUTS if k in group}


def text_attr(obj, key):
    v = obj.attrs.get(key)
    return v.decode() if isinstance(v, bytes) else v


def axis_scale_problem(ds, axis, label, group=None):
    """'' when ds's axis has exactly one dimension scale, named label (and
    inside group, when given), holding 0 .. len-1; else why not."""
    dim = ds.dims[axis]
    if len(dim) != 1:
        return "%s.dims[%d] has %d scales" % (ds.name, axis, len(dim))
    scale = dim[0]
    if group is None:
        got, want = scale.name.rsplit("/", 1)[-1], label
    else:
        got, want = scale.name, "/%s/%s" % (group.strip("/"), label)
    if got != want:
        return "%s.dims[%d] scale is %s, expected %s" % (ds.name, axis, scale.name, want)
    if not np.array_equal(scale[...], np.arange(ds.shape[axis])):
        return "%s.dims[%d] scale %s is not 0..%d" % (ds.name, axis, scale.name, ds.shape[axis] - 1)
    return ""


def axis_labels(out):
    with h5py.File(out, "r") as f:
        outs = outputs(f)
        if sorted(outs) != sorted(OUTPUTS):
            fail("outputs %s, expected all of %s" % (sorted(outs), OUTPUTS))
        for name, ds in outs.items():
            got = tuple(ds.dims[i].label for i in range(ds.ndim))
            if got != LABELS[name]:
                fail("%s labels %s, expected %s" % (name, got, LABELS[name]))


def descriptions(out):
    with h5py.File(out, "r") as f:
        for name, ds in outputs(f).items():
            text = text_attr(ds, "description")
            if not isinstance(text, str) or not text.strip():
                fail("%s: description is %r" % (name, text))


def dimension_scales(out):
    with h5py.File(out, "r") as f:
        w = f["weights"]
        if len(w.dims[0]) != 1:
            fail("weights.dims[0] has %d scales, expected 1" % len(w.dims[0]))
        B = w.shape[0]
        if not np.array_equal(w.dims[0][0][...], np.arange(B)):
            fail("batch scale holds %s, expected 0..%d" % (w.dims[0][0][...], B - 1))
        for name, ds in outputs(f).items():
            for i in range(ds.ndim):
                check(axis_scale_problem(ds, i, LABELS[name][i]))


def rank2_drops_batch(out, inp):
    with h5py.File(inp, "r") as f:
        n = f["X"].shape[0]
    with h5py.File(out, "r") as f:
        w = f["weights"]
        if w.shape != (2, n, n):
            fail("weights shape %s, expected %s" % (w.shape, (2, n, n)))
        for name, ds in outputs(f).items():
            want = LABELS[name][1:]
            got = tuple(ds.dims[i].label for i in range(ds.ndim))
            if got != want:
                fail("%s labels %s, expected %s" % (name, got, want))
        if "batch" in f:
            fail("a batch scale was written for a rank-2 X")


def chunking(out):
    sizes = []
    with h5py.File(out, "r") as f:
        outs = outputs(f)
        if not outs:
            fail("no outputs")
        for name, ds in outs.items():
            if ds.chunks is None:
                fail("%s is not chunked" % name)
            cb = int(np.prod(ds.chunks)) * ds.dtype.itemsize
            total = int(np.prod(ds.shape)) * ds.dtype.itemsize
            if cb > MiB:
                fail("%s chunk %s is %d bytes > 1 MiB" % (name, ds.chunks, cb))
            if total >= MiB // 4 and cb < MiB // 4:
                fail("%s (%d bytes) chunk %s is only %d bytes < 256 KiB" % (name, total, ds.chunks, cb))
            sizes.append("%s %s" % (name, ds.chunks))
    print(", ".join(sizes))


def compress_filters(gz, plain):
    with h5py.File(gz, "r") as f, h5py.File(plain, "r") as p:
        outs = outputs(f)
        if not outs:
            fail("no outputs")
        for name, ds in outs.items():
            if ds.compression != "gzip" or not ds.shuffle:
                fail("%s: compression=%r shuffle=%r, expected gzip + shuffle"
                     % (name, ds.compression, ds.shuffle))
            if ds.compression_opts != 4:
                fail("%s: deflate level %r, expected 4" % (name, ds.compression_opts))
        for name, ds in outputs(p).items():
            if ds.compression is not None or ds.shuffle:
                fail("%s: filters without --compress" % name)


def precision(out, dtype, tag):
    want = np.dtype(dtype)
    with h5py.File(out, "r") as f:
        outs = outputs(f)
        if len(outs) != 7:
            fail("outputs %s" % sorted(outs))
        for name, ds in outs.items():
            if ds.dtype != want:
                fail("%s stored as %s, expected %s" % (name, ds.dtype, want))
        if text_attr(f, "precision") != tag:
            fail("precision attribute %r, expected %r" % (text_attr(f, "precision"), tag))


def save_subset(out):
    with h5py.File(out, "r") as f:
        names = set(f)
        if not {"weights", "output"} <= names:
            fail("weights or output missing: file holds %s" % sorted(names))
        extra = names - {"weights", "output"}
        stray = sorted(extra - set(AXES))
        if stray:
            fail("unexpected objects %s besides weights, output and axis scales" % stray)
        attached = {ds.dims[i][0].name.rsplit("/", 1)[-1]
                    for ds in (f["weights"], f["output"]) for i in range(ds.ndim) if len(ds.dims[i])}
        unused = sorted(extra - attached)
        if unused:
            fail("scales %s are attached to no saved dataset" % unused)


def default_outputs(out):
    try:
        f = h5py.File(out, "r")
    except OSError as e:
        fail("OUT is not an HDF5 file: %s" % e)
    with f:
        if sorted(outputs(f)) != DEFAULT_OUTPUTS:
            fail("OUT holds %s" % sorted(f))


# batch_bias: B=3, n=m=6, d_model=16, H=4, d_k=d_v=4.
BATCH_BIAS_SHAPES = {"scores": (3, 4, 6, 6), "weights": (3, 4, 6, 6), "heads": (3, 4, 6, 4),
                     "output": (3, 6, 16), "q": (3, 4, 6, 4), "k": (3, 4, 6, 4), "v": (3, 4, 6, 4)}


def dry_run(report):
    text = open(report).read()
    if "flop" not in text.lower():
        fail("no FLOPs in the dry-run report")
    for name, shape in BATCH_BIAS_SHAPES.items():
        nbytes = 4 * int(np.prod(shape))
        lines = [l for l in text.splitlines() if re.search(r"(^|\s)%s\b" % name, l)]
        if not lines:
            fail("%s not mentioned in the dry-run report" % name)
        if not any(re.search(r"(?<![\d.])%d(?![\d.])" % nbytes, l) for l in lines):
            fail("no line for %s shows %d bytes: %r" % (name, nbytes, lines))
        shape_text = ", ".join(map(str, shape))
        if not any(shape_text in l for l in lines):
            fail("no line for %s shows the shape (%s)" % (name, shape_text))


def xarray_opens(out):
    import xarray as xr
    ds = xr.open_dataset(out, engine="h5netcdf")
    if ds["weights"].dims != ("batch", "head", "query", "key"):
        fail("weights dims %s" % (ds["weights"].dims,))
    if ds["output"].dims != ("batch", "query", "d_model"):
        fail("output dims %s" % (ds["output"].dims,))
    if list(ds["head"].values) != [0, 1, 2, 3]:
        fail("head coordinate %s" % ds["head"].values)
    with h5py.File(out, "r") as f:
        if not np.array_equal(ds["weights"].sel(batch=1, head=2).values, f["weights"][1, 2]):
            fail("xarray's weights[batch=1, head=2] differ from h5py's")
    if int(ds.attrs["heads"]) != 4:
        fail("heads attribute %r" % ds.attrs["heads"])


if __name__ == "__main__":
    run({f.__name__: f for f in (axis_labels, descriptions, dimension_scales, rank2_drops_batch,
                                 chunking, compress_filters, precision, save_subset,
                                 default_outputs, dry_run, xarray_opens)}, __doc__)
