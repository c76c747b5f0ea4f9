"""tests/ref/h5files_cases.py - what attnrun's HDF5 files hold, for
tests/cli/test_h5files.sh: the inputs, the float64 reference (tests/ref/
reference.py, the published formulas) and the checks of the files written.
Float32 results must be within 1e-4 relative to the dataset's largest
magnitude, float64 within 1e-12 (tests/ref/outputs_compare.py).  A check
prints why it fails and exits 1; a check that holds exits 0, maybe saying
what it saw.

    python3 tests/ref/h5files_cases.py make DIR
        every input of the suite, each check in its own directory; prints
        the sizes of the link-bomb and external-link inputs
    python3 tests/ref/h5files_cases.py verify OUT IN [--group G] [--x X]
            [--heads H] [--scale S] [--save LIST] [--precision P]
            [--storage] [--dims]
        every saved output of OUT holds the reference values computed from IN
    python3 tests/ref/h5files_cases.py user-datasets-kept FILE
        5a: /scale and /precision kept, the attributes scale and precision
        written, output the reference's
    python3 tests/ref/h5files_cases.py user-heads-kept FILE
        5a: /heads and /scale kept, the attribute heads 2, scores, weights
        and output the reference's
    python3 tests/ref/h5files_cases.py d_k-kept FILE
        5b: d_k still there, the scales of q and k resolve, q k v output the
        reference's, xarray opens the file
    python3 tests/ref/h5files_cases.py force-twice FILE
        5g: every output the reference's, every scale resolves, attnrun_role
        marks results and axes, xarray shows the labelled dims
    python3 tests/ref/h5files_cases.py long-x LONG.h5 SHORT.h5 IN.h5 X
        20: the run on the long --x X holds the reference values and equals
        the run on /X
"""
import argparse
import os
import sys

import numpy as np
import h5py

import reference as attention_reference
from outputs_compare import compare as compare_outputs

OUTPUTS = attention_reference.OUTPUTS
AXES = attention_reference.LABELS


def fail(msg):
    print(msg)
    sys.exit(1)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def gen(f, B, n, d, H=2, seed=0, bias=False, x=None, xname="X"):
    """X (B, n, d) float32 (or (n, d) when B == 0), packed (d, d) weights."""
    rng = np.random.default_rng(seed)
    shape = (B, n, d) if B > 0 else (n, d)
    f[xname] = (rng.standard_normal(shape) if x is None else x).astype(np.float32)
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[w] = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    if bias:
        for b in ("b_Q", "b_K", "b_V", "b_O"):
            f[b] = (0.1 * rng.standard_normal(d)).astype(np.float32)


def reference(f, x="X", heads=2, scale=None, causal=False):
    """Every output in float64 (tests/ref/reference.py)."""
    return attention_reference.from_file(f, heads, x=x, scale=scale, causal=causal)


def compare(name, got, ref, f64):
    """'' when got matches ref: dtype, shape, within the tolerance (1e-4 of
    the largest magnitude for every output, weights too)."""
    return compare_outputs(name, got, ref, f64, weights_absolute=False)


def verify(a):
    with h5py.File(a.input, "r") as fi:
        ref = reference(fi, a.x, a.heads, a.scale)
    save = a.save.split(",")
    notes = []
    with h5py.File(a.out, "r") as fo:
        if a.group not in fo:
            fail("no group %s in the output" % a.group[:60])
        g = fo[a.group]
        for name in save:
            if name not in g:
                fail("no dataset %s in %s" % (name, a.group[:60]))
            ds = g[name]
            if a.storage and not ds.id.get_storage_size() > 0:
                fail("%s stores 0 bytes (get_storage_size)" % name)
            why = compare(name, ds[...], ref[name], a.precision == "f64")
            if why:
                fail(why)
            if ds.chunks is not None:
                try:
                    notes.append("%s:%d" % (name, ds.id.get_num_chunks()))
                except Exception:
                    pass
        if a.dims:
            why = dims_resolve(g, save)
            if why:
                fail(why)
    print("%d datasets match%s" % (len(save), " (chunks " + " ".join(notes) + ")" if notes else ""))


def dims_resolve(g, names):
    """'' when every axis of every named output has its scale attached."""
    for name in names:
        ds = g[name]
        for i, axis in enumerate(AXES[name][-ds.ndim:]):
            try:
                sc = ds.dims[i][0]
            except Exception as e:
                return "%s axis %d (%s): the dimension scale does not resolve: %s" % (name, i, axis, e)
            if sc.name.rsplit("/", 1)[-1] != axis or sc.shape != (ds.shape[i],):
                return "%s axis %d: scale %s of shape %s, expected %s of (%d,)" % (
                    name, i, sc.name[-40:], sc.shape, axis, ds.shape[i])
    return ""


def open_xarray(path, group=None):
    import xarray
    return xarray.open_dataset(path, engine="h5netcdf", phony_dims="access", group=group)


def bomb_base(f, seed):
    """The weights and /g with /g/a a hard link to /g itself."""
    rng = np.random.default_rng(seed)
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[w] = (rng.standard_normal((8, 8)) / np.sqrt(8)).astype(np.float32)
    g = f.create_group("g")
    g["a"] = g
    return g, rng


def make(top):
    def path(check, name="in.h5"):
        d = os.path.join(top, check)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, name)

    # 4: every libver bound; one chunk per output (B=2, n=4) and several
    # (B=3, n=5 with --batch-slice 1), for -o and for --in-place
    for lv in ("earliest", "v108", "v110", "latest"):
        for mode in ("o", "inplace"):
            with h5py.File(path("4_%s_%s_one" % (lv, mode)), "w", libver=lv) as f:
                gen(f, 2, 4, 8, seed=40)
            with h5py.File(path("4_%s_%s_multi" % (lv, mode)), "w", libver=lv) as f:
                gen(f, 3, 5, 8, seed=41, bias=True)

    # 5a: user datasets named like the provenance attributes
    with h5py.File(path("5a"), "w") as f:
        gen(f, 2, 4, 8, seed=50)
        f["scale"] = np.arange(3.0)
        f["precision"] = np.arange(2, dtype=np.int32)
    with h5py.File(path("5a_heads"), "w") as f:
        gen(f, 2, 4, 8, seed=51)
        f["scale"] = np.arange(3.0)
        f["precision"] = np.arange(2, dtype=np.int32)
        f["heads"] = np.array([7, 8], dtype=np.int64)
    for c in ("5b", "5g"):
        with h5py.File(path(c), "w") as f:
            gen(f, 2, 4, 8, seed=52)
    # 5c: a user dataset named output
    for c in ("5c", "5c_noforce"):
        with h5py.File(path(c), "w") as f:
            gen(f, 2, 4, 8, seed=53)
            f["output"] = np.arange(5.0)
    # 5d: a user dimension scale named query, attached to a user dataset
    with h5py.File(path("5d"), "w") as f:
        gen(f, 2, 4, 8, seed=54)
        f["query"] = np.arange(4, dtype=np.int64)
        f["query"].make_scale("query")
        f["data"] = np.zeros(4)
        f["data"].dims[0].attach_scale(f["query"])
    # 5e: X with n=8, X2 with n=6
    with h5py.File(path("5e"), "w") as f:
        gen(f, 2, 8, 8, seed=55)
        f["X2"] = np.random.default_rng(56).standard_normal((2, 6, 8)).astype(np.float32)
    # 5f: a user attribute scale on a group attnrun never wrote into
    for c in ("5f", "5f_noforce"):
        with h5py.File(path(c), "w") as f:
            gen(f, 2, 4, 8, seed=57)
            f.attrs["scale"] = 5.0

    # 6: a long --group path through an external link, a soft link, no link
    G = "g" * 4200
    d6 = os.path.dirname(path("6_external", "other.h5"))
    with h5py.File(os.path.join(d6, "other.h5"), "w") as f:
        f.create_group("results")
    with h5py.File(path("6_external"), "w") as f:
        gen(f, 2, 4, 8, seed=60)
        f["results"] = h5py.ExternalLink(os.path.join(d6, "other.h5"), "/results")
    with h5py.File(path("6_soft"), "w") as f:
        gen(f, 2, 4, 8, seed=60)
        f.create_group("real")
        f["results"] = h5py.SoftLink("/real")
    for c in ("6_long_o", "6_long_inplace"):
        with h5py.File(path(c), "w") as f:
            gen(f, 2, 4, 8, seed=61)

    # 7: float32 overflow; X around 1e19 and 1e30 (finite float32), positive so
    # that every score overflows float32 whatever the order of the products
    with h5py.File(path("7_scale"), "w") as f:
        gen(f, 2, 4, 8, seed=70)
    for e, c in ((19, "7_x19"), (30, "7_x30")):
        rng = np.random.default_rng(e)
        with h5py.File(path(c), "w") as f:
            f["X"] = (2.0 * 10.0 ** e * (1 + 0.1 * rng.random((2, 4, 8)))).astype(np.float32)
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                f[w] = (np.abs(rng.standard_normal((8, 8))) / np.sqrt(8)).astype(np.float32)
            assert np.isfinite(f["X"][...]).all()
    # 7: one score overflows to -inf, under a key mask (the kept keys'
    # check; a -inf logit would otherwise pass for a masked key): item 0's
    # token t around 2e19, the rest near 1, W_K negative, the other W
    # positive: each head's qt . kt of item 0 is below float32's range, no
    # other score is.  t = 3, the last key; t = 0, the first (the check
    # starts at key 0).
    for t, name, seed in ((3, "7_one_masked", 71), (0, "7_first_masked", 72)):
        rng = np.random.default_rng(seed)
        with h5py.File(path(name), "w") as f:
            x = (1 + 0.1 * rng.random((2, 4, 8))).astype(np.float32)
            x[0, t] *= np.float32(2e19)
            f["X"] = x
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                sign = -1 if w == "W_K" else 1
                f[w] = (sign * np.abs(rng.standard_normal((8, 8))) / np.sqrt(8)).astype(np.float32)
            f["M"] = np.array([[1, 1, 1, 1], [0, 1, 1, 1]], dtype=np.int8)
            q = x[0].astype(np.float64) @ f["W_Q"][...].astype(np.float64)
            k = x[0].astype(np.float64) @ f["W_K"][...].astype(np.float64)
            for h in (slice(0, 4), slice(4, 8)):     # --heads 2: d_k = 4
                logit = q[:, h] @ k[:, h].T / 2
                below = logit < -3.5e38
                assert below[t, t] and below.sum() == 1 and (logit[~below] > -1e30).all()

    # 10: /g/a is a hard link to /g; soft links through 4 KB paths /g/a/a/.../a/NAME
    P = "/g/" + "a/" * 2045
    with h5py.File(path("10_small"), "w") as f:      # X -> .../D, D -> .../D -> ...
        g, _ = bomb_base(f, 100)
        f["X"] = h5py.SoftLink(P + "D")
        g["D"] = h5py.SoftLink(P + "D")
    with h5py.File(path("10_big"), "w", libver="latest") as f:  # 75 chained links
        g, rng = bomb_base(f, 101)
        g["real"] = rng.standard_normal((2, 4, 8)).astype(np.float32)
        f["X"] = h5py.SoftLink(P + "L0")
        N = 75
        for i in range(N):
            g["L%d" % i] = h5py.SoftLink(P + ("L%d" % (i + 1) if i + 1 < N else "real"))
    with h5py.File(path("10_one"), "w") as f:         # one 4 KB link to a dataset
        g, rng = bomb_base(f, 102)
        g["real"] = rng.standard_normal((2, 4, 8)).astype(np.float32)
        f["X"] = h5py.SoftLink(P + "real")

    # 19: X -> other.h5:/X, 64 KiB of values, in a linking file of ~4 KB
    d19 = os.path.dirname(path("19", "other.h5"))
    rng = np.random.default_rng(190)
    with h5py.File(os.path.join(d19, "other.h5"), "w") as f:
        f["X"] = rng.standard_normal((4, 64, 64)).astype(np.float32)
    with h5py.File(path("19"), "w") as f:
        f["X"] = h5py.ExternalLink(os.path.join(d19, "other.h5"), "/X")
        for w in ("W_Q", "W_K", "W_V"):
            f[w] = (rng.standard_normal((64, 2)) / 8).astype(np.float32)
        f["W_O"] = (rng.standard_normal((2, 64)) / 8).astype(np.float32)

    # 20: X also inside two nested groups with 2500-character names
    with h5py.File(path("20"), "w") as f:
        gen(f, 2, 4, 8, seed=200)
        f["/" + "p" * 2500 + "/" + "q" * 2500 + "/X"] = f["X"][...]

    for c in ("10_small", "10_big", "10_one"):
        print("%s=%d" % (c, os.path.getsize(path(c))))
    print("19_link=%d 19_other=%d" % (os.path.getsize(path("19")),
                                      os.path.getsize(os.path.join(d19, "other.h5"))))


def user_datasets_kept(path):
    with h5py.File(path, "r") as f:
        if not np.array_equal(f["scale"][...], np.arange(3.0)):
            fail("the user dataset /scale changed: %r" % f["scale"][...])
        if not np.array_equal(f["precision"][...], np.arange(2)):
            fail("the user dataset /precision changed: %r" % f["precision"][...])
        for a in ("scale", "precision"):
            if a not in f.attrs:
                fail("no group attribute %s" % a)
        if abs(float(f.attrs["scale"]) - 0.5) > 1e-12 or text(f.attrs["precision"]) != "f32":
            fail("attributes scale=%r precision=%r" % (f.attrs["scale"], f.attrs["precision"]))
        ref = reference(f)
        why = compare("output", f["output"][...], ref["output"], False)
        if why:
            fail(why)
    print("user datasets kept, attributes scale and precision written")


def user_heads_kept(path):
    with h5py.File(path, "r") as f:
        if not np.array_equal(f["heads"][...], [7, 8]):
            fail("the user dataset /heads changed: %r" % f["heads"][...])
        if not np.array_equal(f["scale"][...], np.arange(3.0)):
            fail("the user dataset /scale changed")
        for a in ("scale", "precision", "heads"):
            if a not in f.attrs:
                fail("no group attribute %s" % a)
        if int(f.attrs["heads"]) != 2:
            fail("attribute heads = %r" % f.attrs["heads"])
        ref = reference(f)
        for k in ("scores", "weights", "output"):
            why = compare(k, f[k][...], ref[k], False)
            if why:
                fail(why)


def d_k_kept(path):
    with h5py.File(path, "r") as f:
        if "d_k" not in f:
            fail("d_k was deleted: %s" % sorted(f))
        for name in ("q", "k"):
            try:
                sc = f[name].dims[3][0]
            except Exception as e:
                fail("%s.dims[3][0] does not resolve: %s" % (name, e))
            if sc.name != "/d_k":
                fail("%s.dims[3][0] is %s, not /d_k" % (name, sc.name))
        why = dims_resolve(f, ("q", "k", "v", "output"))
        if why:
            fail(why)
        ref = reference(f)
        for k in ("q", "k", "v", "output"):
            why = compare(k, f[k][...], ref[k], False)
            if why:
                fail(why)
    try:
        ds = open_xarray(path)
        dims = ds["q"].dims
    except Exception as e:
        fail("xarray cannot open the file: %r" % e)
    if dims[-1] != "d_k":
        fail("xarray: q has dims %s" % (dims,))
    print("xarray q dims %s" % (dims,))


def force_twice(path):
    with h5py.File(path, "r") as f:
        ref = reference(f)
        for k in OUTPUTS:
            why = compare(k, f[k][...], ref[k], False)
            if why:
                fail(why)
        why = dims_resolve(f, OUTPUTS)
        if why:
            fail(why)
        roles = {k: "result" for k in OUTPUTS}
        roles.update({a: "axis" for a in ("batch", "head", "query", "key", "d_k", "d_v", "d_model")})
        for k, role in roles.items():
            got = text(f[k].attrs.get("attnrun_role"))
            if got != role:
                fail("%s: attnrun_role is %r, expected %r" % (k, got, role))
    try:
        ds = open_xarray(path)
        got = {k: ds[k].dims for k in OUTPUTS}
    except Exception as e:
        fail("xarray cannot open the file: %r" % e)
    for k in OUTPUTS:
        if got[k] != AXES[k]:
            fail("xarray: %s has dims %s, expected %s" % (k, got[k], AXES[k]))
    print("xarray dims as labelled")


def long_x(long, short, src, x):
    with h5py.File(src, "r") as f:
        ref = reference(f, x)
    with h5py.File(long, "r") as a, h5py.File(short, "r") as b:
        for k in OUTPUTS:
            why = compare(k, a[k][...], ref[k], False)
            if why:
                fail(why)
            if not np.array_equal(a[k][...], b[k][...]):
                fail("%s differs from the run on /X" % k)


def verify_command(argv):
    p = argparse.ArgumentParser(prog="h5files_cases.py verify")
    p.add_argument("out")
    p.add_argument("input")
    p.add_argument("--group", default="/")
    p.add_argument("--x", default="X")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--scale", type=float)
    p.add_argument("--save", default="scores,weights,heads,output")
    p.add_argument("--precision", default="f32")
    p.add_argument("--storage", action="store_true")
    p.add_argument("--dims", action="store_true")
    verify(p.parse_args(argv))


COMMANDS = {"make": (make, 1), "user-datasets-kept": (user_datasets_kept, 1),
            "user-heads-kept": (user_heads_kept, 1), "d_k-kept": (d_k_kept, 1),
            "force-twice": (force_twice, 1), "long-x": (long_x, 4)}

if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "verify":
        verify_command(sys.argv[2:])
    elif len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    else:
        COMMANDS[sys.argv[1]][0](*sys.argv[2:])
