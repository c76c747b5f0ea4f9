#!/usr/bin/env python3
"""tests/ref/norms_check.py - the checks of tests/cli/test_norms.sh: the
norm-based map `norms` and the per-key summary `value_norm`.

Kobayashi, Kuribayashi, Yokoi and Inui, "Attention is Not Only a Weight:
Analyzing Transformers with Vector Norms" (EMNLP 2020), write head h's
output for query q as sum_k alpha[q, k] f(x_k), with the transformed value
f(x_k) = (x_k W_V + b_V) W_O[h] -- W_O[h] the head's d_v rows of W_O, b_O
left out (it does not depend on the key) -- and measure how much key k
contributes by the length || alpha[q, k] f(x_k) ||.  So:

    value_norm[b, h, k] = || v[b, g(h), k, :] @ W_O[h] ||_2
    norms[b, h, q, k]   = weights[b, h, q, k] * value_norm[b, h, k]

with g(h) = h G / H the K/V head of query head h.  The reference computes
v W_O[h] as the product itself (not the Gram form attnrun uses) in
float64, from the inputs, and the weights from models_ref.attention_variant
(docs/models.md's formulas); it never reads attnrun's output but to compare.

    norms_check.py inputs DIR [WIDE]
        DIR/small.h5: B = 2, n = 300 (past one block of 256 rows), d_model
        64, 4 heads over 2 K/V heads, all four biases, a mask M (B, n) that
        hides key 0 of item 1 (with --causal, its query 0 sees no key);
        DIR/cross.h5: B = 2, n = 40 queries, m = 70 keys (KV), 4 heads;
        DIR/fused.h5: B = 1, n = 90, d_model 32, 4 heads, one fused weight
        W_QKV (96, 32) in torch.nn.Linear's layout, heads interleaved, and
        W_O (32, 32) in the same layout;
        DIR/wide.h5 (with WIDE): B = 1, n = 5, one head of d_v = d_model =
        WIDE (the suite passes MEAN_KEYS + 1, so that the Gram form's
        columns take two blocks), b_V.  Seeded.
    norms_check.py reference CASE INPUT OUT
        OUT's norms and value_norm (and weights, when saved) against the
        float64 reference of CASE (small-causal, small, cross, fused, wide):
        within 2e-4 of the largest value in float32, 1e-10 in float64; a
        fully masked row of norms all 0
    norms_check.py same NAMES A B
        the datasets NAMES (comma list) of A and B bit for bit
    norms_check.py like NAME MAP FILE
        FILE's NAME is laid out as its MAP: type, chunks, fill value, filters,
        axis labels and dimension scales, attributes but the description
"""
import os
import sys

import numpy as np
import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models_ref  # noqa: E402
from sliding_check import same  # noqa: E402,F401
from subcommands import fail, run  # noqa: E402

H, G = 4, 2


def inputs(directory, wide=None):
    if wide is not None:
        rng = np.random.default_rng(704)
        D = int(wide)
        with h5py.File(os.path.join(directory, "wide.h5"), "w") as f:
            f["X"] = rng.standard_normal((1, 5, D), dtype=np.float32)
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                f[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
            f["b_V"] = (0.3 * rng.standard_normal(D)).astype(np.float32)
    rng = np.random.default_rng(701)
    B, n, D, dk = 2, 300, 64, 16
    with h5py.File(os.path.join(directory, "small.h5"), "w") as f:
        f["X"] = rng.standard_normal((B, n, D), dtype=np.float32)
        for w, cols in (("W_Q", H * dk), ("W_K", G * dk), ("W_V", G * dk)):
            f[w] = (rng.standard_normal((D, cols)) / np.sqrt(D)).astype(np.float32)
        # heads of W_O of very different sizes, so that norms and weights differ
        wo = rng.standard_normal((H * dk, D)) / np.sqrt(H * dk)
        wo *= np.repeat([0.1, 1.0, 3.0, 0.5], dk)[:, None]
        f["W_O"] = wo.astype(np.float32)
        for b, cols in (("b_Q", H * dk), ("b_K", G * dk), ("b_V", G * dk), ("b_O", D)):
            f[b] = (0.3 * rng.standard_normal(cols)).astype(np.float32)
        keep = rng.random((B, n)) > 0.1
        keep[0, 0] = True
        keep[1, 0] = False
        f["M"] = keep.astype(np.int8)
    rng = np.random.default_rng(702)
    with h5py.File(os.path.join(directory, "cross.h5"), "w") as f:
        f["X"] = rng.standard_normal((2, 40, 32), dtype=np.float32)
        f["KV"] = rng.standard_normal((2, 70, 32), dtype=np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (rng.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32)
        f["b_V"] = (0.3 * rng.standard_normal(32)).astype(np.float32)
    rng = np.random.default_rng(703)
    with h5py.File(os.path.join(directory, "fused.h5"), "w") as f:
        f["X"] = rng.standard_normal((1, 90, 32), dtype=np.float32)
        f["W_QKV"] = (rng.standard_normal((96, 32)) / np.sqrt(32)).astype(np.float32)
        f["B_QKV"] = (0.3 * rng.standard_normal(96)).astype(np.float32)
        f["W_O"] = (rng.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32)
        f["b_O"] = (0.1 * rng.standard_normal(32)).astype(np.float32)


def _per_head_out(Wo, heads, layout):
    """W_O[h], (H, dv, D): the head's rows of W_O (D columns), or its
    columns in torch.nn.Linear's layout (W_O stored (D, H dv))."""
    Wo = np.asarray(Wo, np.float64)
    if layout == "linear":
        Wo = Wo.T
    return Wo.reshape(heads, Wo.shape[0] // heads, Wo.shape[1])


def _expected(case, d):
    """(weights (B, H, n, m), value_norm (B, H, m)) of CASE in float64."""
    if case in ("small", "small-causal"):
        ref = models_ref.attention_variant(
            d["X"], d["W_Q"], d["W_K"], d["W_V"], d["W_O"], bq=d["b_Q"], bk=d["b_K"],
            bv=d["b_V"], bo=d["b_O"], heads=H, kv_heads=G, causal=case == "small-causal",
            keep=d["M"] != 0)
        heads, kv, layout = H, G, "xw"
    elif case == "cross":
        ref = models_ref.attention_variant(d["X"], d["W_Q"], d["W_K"], d["W_V"], d["W_O"],
                                           bv=d["b_V"], heads=H, kv_heads=H, Y=d["KV"])
        heads, kv, layout = H, H, "xw"
    elif case == "wide":
        ref = models_ref.attention_variant(d["X"], d["W_Q"], d["W_K"], d["W_V"], d["W_O"],
                                           bv=d["b_V"], heads=1, kv_heads=1)
        heads, kv, layout = 1, 1, "xw"
    elif case == "fused":
        Wq, Wk, Wv, bq, bk, bv = models_ref.split_fused(d["W_QKV"], d["B_QKV"], H, H, 8, 8,
                                                        layout="linear", split="heads")
        ref = models_ref.attention_variant(d["X"], Wq, Wk, Wv, d["W_O"], bq=bq, bk=bk, bv=bv,
                                           bo=d["b_O"], heads=H, kv_heads=H, layout="linear",
                                           causal=True)
        heads, kv, layout = H, H, "linear"
    else:
        fail("no case %s" % case)
    Wo = _per_head_out(d["W_O"], heads, layout)            # (H, dv, D)
    V = ref["v"]                                           # (B, G, m, dv), b_V included
    B, m = V.shape[0], V.shape[2]
    value_norm = np.empty((B, heads, m))
    for h in range(heads):
        f_x = V[:, h * kv // heads] @ Wo[h]                # (B, m, D): f(x_k) of the paper
        value_norm[:, h] = np.linalg.norm(f_x, axis=-1)
    return ref["weights"], value_norm


def _within(name, got, exp):
    if got.shape != exp.shape:
        fail("%s: shape %s, expected %s" % (name, got.shape, exp.shape))
    tol = (1e-10 if got.dtype == np.float64 else 2e-4) * max(1.0, np.abs(exp).max())
    diff = np.abs(got.astype(np.float64) - exp)
    if not diff.max() <= tol:
        at = np.unravel_index(np.argmax(diff), exp.shape)
        fail("%s: off by %.3g at %s (tolerance %.3g)" % (name, diff.max(), at, tol))
    return diff.max()


def reference(case, input_path, out_path):
    with h5py.File(input_path, "r") as f:
        d = {k: f[k][...] for k in f}
    weights, value_norm = _expected(case, d)
    norms = weights * value_norm[:, :, None, :]
    said = []
    with h5py.File(out_path, "r") as f:
        if "value_norm" in f:
            said.append("value_norm within %.3g" % _within("value_norm", f["value_norm"][...],
                                                          value_norm))
        if "norms" in f:
            got = f["norms"][...]
            said.append("norms within %.3g" % _within("norms", got, norms))
            hidden = ~(weights != 0).any(axis=-1)          # rows that see no key
            if case == "small-causal" and not hidden[1, :, 0].all():
                fail("the case has no fully masked row")
            if hidden.any() and (got[hidden] != 0).any():
                fail("norms of a fully masked row are not all 0")
            # the contributions' lengths rank the keys unlike the weights
            if case.startswith("small") and \
                    np.array_equal(np.argmax(got, axis=-1), np.argmax(weights, axis=-1)):
                fail("norms rank the keys as the weights do: the case tests nothing")
        if "weights" in f:
            said.append("weights within %.3g" % _within("weights", f["weights"][...], weights))
    if not said:
        fail("%s holds neither norms nor value_norm" % out_path)
    print(", ".join(said))


def like(name, map_name, path):
    with h5py.File(path, "r") as f:
        a, b = f[name], f[map_name]
        for what, x, y in (("type", a.dtype, b.dtype), ("shape", a.shape, b.shape),
                           ("chunks", a.chunks, b.chunks), ("fill value", a.fillvalue, b.fillvalue),
                           ("compression", a.compression, b.compression),
                           ("shuffle", a.shuffle, b.shuffle),
                           ("axes", [x.label for x in a.dims], [y.label for y in b.dims]),
                           ("scales", [[s.name for s in x.values()] for x in a.dims],
                            [[s.name for s in y.values()] for y in b.dims]),
                           ("attributes", sorted(k for k in a.attrs if k != "description"),
                            sorted(k for k in b.attrs if k != "description"))):
            if x != y:
                fail("%s's %s %r, %s's %r" % (name, what, x, map_name, y))
        if a.attrs.get("coordinates") != b.attrs.get("coordinates"):
            fail("coordinates %r against %r" % (a.attrs.get("coordinates"),
                                                b.attrs.get("coordinates")))
        print("%s %s chunks %s" % (name, a.dtype, a.chunks))


if __name__ == "__main__":
    run({"inputs": inputs, "reference": reference, "same": same, "like": like}, __doc__)
