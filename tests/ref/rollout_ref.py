#!/usr/bin/env python3
"""tests/ref/rollout_ref.py - attention rollout written from its paper, and
the checks of tests/cli/test_rollout.sh (`attnrun rollout`).

The reference is Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers" (ACL 2020), section 3: with W_att a layer's attention
(averaged over its heads) and I the identity standing for the residual
connection, the raw attention of the layer is A = 0.5 W_att + 0.5 I,
re-normalised so that each row sums to 1, and the rollout from the first
layer j to layer i is

    Ã(l_i) = A(l_i) Ã(l_{i-1})   if i > j,      Ã(l_j) = A(l_j).

`residual` stands for the paper's 0.5 (attnrun's --residual R: A = (1 - R)
W_att + R I); a row summing to 0 (a query that sees no key, R = 0) is left
0.  Written in float64 with numpy from the weights (or head means) attnrun
saved, read back with h5py; never from attnrun's rollout.

    rollout_ref.py
        self-checks: cases computed by hand (tests/unit/test_math.c has its
        own)
    rollout_ref.py inputs DIR
        DIR/model.h5: four layers' inputs (seeded numpy), B = 2 items of
          n = 6 tokens, d_model 16: /l0 .. /l3 each X (2, 6, 16) and W_Q,
          W_K, W_V, W_O (16, 16) but /l2's W_K and W_V (16, 8) (two K/V
          heads of four: GQA); tok (2, 6) tokens with repeats, tok_other
          (one token of item 1 changed), mask (2, 6) hiding key 0 of item 0;
          Y (2, 5, 16) for cross-attention; small/X (2, 7, 16); flat/X
          (6, 16) and flat/tok (6), a rank-2 input
        DIR/shapes.h5: a plain file built with h5py, groups /a and /b of
          weights (1, 2, 4, 4) and (1, 2, 5, 5), each marked attnrun_version
        DIR/square.h5: groups /a, /b of weights (1, 2, 4, 4) without marks,
          /c of weights (1, 2, 4, 4) whose rows are not attention (sums 3)
    rollout_ref.py check OUT RESULTS R GROUP...
        OUT's rollout (B, L, n, n) against the reference through RESULTS'
        GROUPs in order (mean when a group holds it, else the weights'
        mean over heads) with residual R, within 1e-5 relative (+1e-7);
        its layer_group is GROUP...; its tokens are the first GROUP's; its
        attributes; prints the largest difference
    rollout_ref.py identity OUT
        every map of OUT's rollout is the identity, exactly
    rollout_ref.py differ A B
        the rollouts of A and B differ (by more than 1e-3 somewhere)
    rollout_ref.py same A B
        the rollouts of A and B agree within 1e-5 relative (+1e-6): float32
        head means against float64 ones
    rollout_ref.py zero_row RESULTS GROUP ITEM QUERY OUT LAYER
        the weights row (ITEM, head, QUERY) of RESULTS' GROUP is all 0 in
        every head (a query that sees no key), and so is OUT's rollout row
        (ITEM, LAYER, QUERY)
    rollout_ref.py layout OUT
        rollout (batch, layer, query, key) float32 and its coordinates,
        layer_group (layer), the tokens' axes, each axis one dimension
        scale holding 0 .. len-1
    rollout_ref.py xarray OUT
        xarray (its default engine) opens OUT: rollout with dimensions
        (batch, layer, query, key), layer_group and the tokens its
        coordinates, the rollout's values h5py's
    rollout_ref.py signalled RESULTS DIR SIGNAL [COMMAND]
        `$ATTNRUN COMMAND RESULTS -o DIR/out.h5` (COMMAND rollout by
        default, or flow; stderr in DIR/err) gets
        SIGNAL (INT, TERM, ...) once its temporary exists; prints the exit
        status, or "early: WHY" when the rollout ended first
        (process_control.py)

Each check prints the reason and exits 1 when it is not so
(tests/ref/subcommands.py).
"""
import os
import signal
import sys

import numpy as np
import h5py

import process_control as pc
from output_layout import axis_scale_problem
from subcommands import check, fail, run

RTOL, ATOL = 1e-5, 1e-7
UTF8 = h5py.string_dtype("utf-8")
AXES = ("batch", "layer", "query", "key")


# ------------------------------------------------------------ the reference

def layer_attention(mean, residual):
    """A = rownorm((1 - r) W + r I) of one head mean W (n, n), float64."""
    a = (1.0 - residual) * np.asarray(mean, np.float64) + residual * np.eye(mean.shape[-1])
    sums = a.sum(axis=-1, keepdims=True)
    return np.divide(a, sums, out=np.zeros_like(a), where=sums != 0)


def rollout(means, residual):
    """[Ã(l_1), ..., Ã(l_L)] of the head means W (n, n) of layers 1..L."""
    out, rolled = [], None
    for mean in means:
        a = layer_attention(mean, residual)
        rolled = a if rolled is None else a @ rolled
        out.append(rolled)
    return out


def head_means(f, group):
    """(B, n, n) float64: the group's mean, else its weights averaged over
    the heads; a map without a batch axis gets one of 1."""
    g = f[group]
    if "mean" in g:
        m = g["mean"][()].astype(np.float64)
        return m if m.ndim == 3 else m[None]
    w = g["weights"][()].astype(np.float64)
    w = w if w.ndim == 4 else w[None]
    return w.mean(axis=1)


def expected(results, residual, groups):
    """(B, L, n, n) the reference rollout through groups of results."""
    with h5py.File(results, "r") as f:
        means = [head_means(f, g) for g in groups]
    items = []
    for b in range(means[0].shape[0]):
        items.append(np.stack(rollout([m[b] for m in means], residual)))
    return np.stack(items)


def self_check():
    # n = 2, two layers, r = 0.5:
    #   A_1 = 0.5 [[1, 0], [.5, .5]] + 0.5 I = [[1, 0], [.25, .75]]
    #   A_2 = 0.5 [[.5, .5], [0, 1]] + 0.5 I = [[.75, .25], [0, 1]]
    #   A_2 A_1 = [[.75 + .0625, .1875], [.25, .75]]
    r = rollout([np.array([[1, 0], [0.5, 0.5]]), np.array([[0.5, 0.5], [0, 1]])], 0.5)
    if not np.array_equal(r[0], [[1, 0], [0.25, 0.75]]):
        fail("self-check: A_1 is %s" % r[0].tolist())
    if not np.array_equal(r[1], [[0.8125, 0.1875], [0.25, 0.75]]):
        fail("self-check: A_2 A_1 is %s" % r[1].tolist())
    # rows are normalised; a row of 0 stays 0 with r = 0, and is I's with r = 0.5
    a = layer_attention(np.array([[2.0, 2.0], [0.0, 0.0]]), 0.0)
    if not np.array_equal(a, [[0.5, 0.5], [0, 0]]):
        fail("self-check: rownorm with r = 0 is %s" % a.tolist())
    a = layer_attention(np.array([[0.0, 0.0], [1.0, 0.0]]), 0.5)
    if not np.array_equal(a, [[1, 0], [0.5, 0.5]]):
        fail("self-check: rownorm with r = 0.5 is %s" % a.tolist())
    if not np.array_equal(layer_attention(np.array([[0.3, 0.7], [0.0, 0.0]]), 1.0), np.eye(2)):
        fail("self-check: r = 1 is not the identity")
    # the comparison fails where it should
    if within(np.array([1.0]), np.array([1.0 + 1e-4])) == "" or within(np.array([np.nan]), np.array([0.0])) == "":
        fail("self-check: within() lets a difference pass")
    print("the reference reproduces 5 hand-computed cases")


# ------------------------------------------------------------------- inputs

def inputs(directory):
    rng = np.random.default_rng(20260303)
    B, n, D = 2, 6, 16

    def weights(shape):
        return (rng.standard_normal(shape) / np.sqrt(D)).astype(np.float32)

    with h5py.File("%s/model.h5" % directory, "w") as f:
        for i in range(4):
            g = "l%d/" % i
            f[g + "X"] = rng.standard_normal((B, n, D)).astype(np.float32)
            f[g + "W_Q"] = weights((D, D))
            kv = 8 if i == 2 else D             # /l2: 2 K/V heads of d_k 4
            f[g + "W_K"] = weights((D, kv))
            f[g + "W_V"] = weights((D, kv))
            f[g + "W_O"] = weights((D, D))
        tok = [["the", "cat", "the", "the", "dog", "."], ["a", "a", "b", "a", "😀", ""]]
        f["tok"] = np.array(tok, dtype=UTF8)
        tok[1][3] = "A"
        f["tok_other"] = np.array(tok, dtype=UTF8)
        f["mask"] = np.array([[0, 1, 1, 1, 1, 1], [1] * n], dtype=np.int8)
        f["Y"] = rng.standard_normal((B, 5, D)).astype(np.float32)
        f["small/X"] = rng.standard_normal((B, 7, D)).astype(np.float32)
        f["flat/X"] = rng.standard_normal((n, D)).astype(np.float32)
        f["flat/tok"] = np.array(["x", "y", "x", "z", "y", "x"], dtype=UTF8)

    def maps(shape, sums=1.0):
        w = rng.random(shape)
        return (sums * w / w.sum(axis=-1, keepdims=True)).astype(np.float32)

    with h5py.File("%s/shapes.h5" % directory, "w") as f:
        for name, n_ in (("a", 4), ("b", 5)):
            f[name + "/weights"] = maps((1, 2, n_, n_))
            f[name].attrs["attnrun_version"] = "hand-made"
    with h5py.File("%s/square.h5" % directory, "w") as f:
        f["a/weights"] = maps((1, 2, 4, 4))
        f["b/weights"] = maps((1, 2, 4, 4))
        f["c/weights"] = maps((1, 2, 4, 4), sums=3.0)


# ------------------------------------------------------------------- checks

def within(got, want):
    """'' when got is want within RTOL relative plus ATOL, NaN never."""
    diff = np.abs(got.astype(np.float64) - want)
    bad = ~(diff <= RTOL * np.abs(want) + ATOL)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return "at %s: %r, expected %r" % (at, float(got[at]), float(want[at]))
    return ""


def read_rollout(path):
    with h5py.File(path, "r") as f:
        return f["rollout"][()]


def check_tokens(out, results, group):
    with h5py.File(results, "r") as src, h5py.File(out, "r") as dst:
        for name in ("query_token", "key_token"):
            have = name in dst
            want = name in src[group]
            if have != want:
                fail("%s: %s %s, but %s%s %s" % (out, name, "present" if have else "absent",
                                                 results, group, "has it" if want else "has none"))
            if want:
                a, b = src[group][name].asstr()[()], dst[name].asstr()[()]
                if a.shape != b.shape or not np.array_equal(a, b):
                    fail("%s: %s %s is not %s's %s" % (out, name, b.tolist(), group, a.tolist()))


def check_out(out, results, residual, group, *more):
    groups = (group,) + more
    residual = float(residual)
    want = expected(results, residual, groups)
    got = read_rollout(out)
    if got.dtype != np.float32:
        fail("%s: rollout is %s, expected float32" % (out, got.dtype))
    if got.shape != want.shape:
        fail("%s: rollout has shape %s, expected %s" % (out, got.shape, want.shape))
    check(within(got, want) and "%s: rollout %s" % (out, within(got, want)))
    with h5py.File(out, "r") as f:
        layers = list(f["layer_group"].asstr()[()])
        if layers != list(groups):
            fail("%s: layer_group %s, expected %s" % (out, layers, list(groups)))
        attrs = dict(f.attrs)
        for key, value in (("attnrun_analysis", "rollout"), ("source", results), ("residual", residual)):
            if attrs.get(key) != value:
                fail("%s: attribute %s is %r, expected %r" % (out, key, attrs.get(key), value))
        if not str(attrs.get("attnrun_version", "")):
            fail("%s: no attnrun_version" % out)
    check_tokens(out, results, groups[0])
    print("%d items, %d layers of %d tokens; largest difference %.2g" %
          (want.shape[0], want.shape[1], want.shape[2], float(np.abs(got - want).max())))


def identity(out):
    got = read_rollout(out)
    if not np.array_equal(got, np.broadcast_to(np.eye(got.shape[-1], dtype=np.float32), got.shape)):
        fail("%s: the rollout with --residual 1 is not the identity: %s" % (out, got[0, -1].tolist()))


def differ(a, b):
    x, y = read_rollout(a), read_rollout(b)
    if x.shape == y.shape and np.abs(x.astype(np.float64) - y).max() <= 1e-3:
        fail("%s and %s have the same rollout" % (a, b))
    print("largest difference %.3g" % float(np.abs(x.astype(np.float64) - y).max()))


def same(a, b):
    x, y = read_rollout(a), read_rollout(b)
    if x.shape != y.shape:
        fail("%s has shape %s, %s %s" % (a, x.shape, b, y.shape))
    diff = np.abs(x.astype(np.float64) - y)
    bad = ~(diff <= RTOL * np.abs(y) + 1e-6)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        fail("%s and %s differ at %s: %r and %r" % (a, b, at, float(x[at]), float(y[at])))
    print("largest difference %.2g" % float(diff.max()))


def zero_row(results, group, item, query, out, layer):
    item, query, layer = int(item), int(query), int(layer)
    with h5py.File(results, "r") as f:
        w = f[group]["weights"][item, :, query, :]
    if np.any(w != 0):
        fail("%s%s: weights of item %d, query %d are not all 0: %s" % (results, group, item, query, w.tolist()))
    row = read_rollout(out)[item, layer, query]
    if np.any(row != 0):
        fail("%s: rollout row (%d, %d, %d) is %s, expected all 0" % (out, item, layer, query, row.tolist()))


def check_layout(out, name, axes, coordinates):
    """'' unless dataset name of out has the axes (each one dimension
    scale holding 0 .. len-1), the coordinates attribute (the names of
    coordinates that are present, in order) and a description; and
    layer_group and the tokens theirs."""
    with h5py.File(out, "r") as f:
        ds = f[name]
        labels = tuple(d.label for d in ds.dims)
        if labels != axes:
            return "%s's axes are %s, expected %s" % (name, labels, axes)
        for axis, dim in enumerate(ds.dims):
            why = axis_scale_problem(ds, axis, dim.label)
            if why:
                return why
        want = " ".join(c for c in coordinates if c in f)
        got = ds.attrs.get("coordinates", b"")
        got = got.decode() if isinstance(got, bytes) else got
        if got != want:
            return "%s's coordinates are %r, expected %r" % (name, got, want)
        if not ds.attrs.get("description"):
            return "%s has no description" % name
        labelled = {"layer_group": ("layer",),
                    "query_token": ("batch", "query") if "query_token" in f and f["query_token"].ndim == 2 else ("query",),
                    "key_token": ("batch", "key") if "key_token" in f and f["key_token"].ndim == 2 else ("key",)}
        for label, label_axes in labelled.items():
            if label not in f:
                continue
            d = f[label]
            got = tuple(x.label for x in d.dims)
            if got != label_axes:
                return "%s's axes are %s, expected %s" % (label, got, label_axes)
            for axis, dim in enumerate(d.dims):
                why = axis_scale_problem(d, axis, dim.label)
                if why:
                    return why
    return ""


def layout(out):
    coordinates = ("layer_group", "query_token", "key_token")
    check(check_layout(out, "rollout", AXES, coordinates))
    with h5py.File(out, "r") as f:
        present = " ".join(c for c in coordinates if c in f)
    print("axes %s, coordinates %s" % (" ".join(AXES), present))


def xarray(out):
    import xarray as xr
    with xr.open_dataset(out) as ds:
        r = ds["rollout"]
        if r.dims != AXES:
            fail("xarray: rollout's dimensions are %s, expected %s" % (r.dims, AXES))
        with h5py.File(out, "r") as f:
            names = ["layer_group"] + [t for t in ("query_token", "key_token") if t in f]
            values = f["rollout"][()]
        missing = [c for c in names if c not in r.coords]
        if missing:
            fail("xarray: rollout lacks the coordinates %s" % missing)
        if not np.array_equal(r.values, values):
            fail("xarray: rollout's values are not h5py's")
        print("coordinates %s" % " ".join(sorted(str(c) for c in r.coords)))


@pc.supervised
def signalled(results, directory, name, command="rollout"):
    p = pc.start([command, results, "-o", os.path.join(directory, "out.h5")],
                 os.path.join(directory, "err"))
    pc.wait_until(pc.temp_at_least(directory, 1), p, "its temporary")
    os.kill(p.pid, getattr(signal, "SIG" + name))
    print(pc.finish(p, 5))


if __name__ == "__main__":
    if len(sys.argv) == 1:
        self_check()
    else:
        run({"inputs": inputs, "check": check_out, "identity": identity, "differ": differ,
             "same": same, "zero_row": zero_row, "layout": layout, "xarray": xarray,
             "signalled": signalled}, __doc__)
