#!/usr/bin/env python3
"""tests/ref/sliding_check.py - the checks of tests/cli/test_sliding.sh:
sliding keys (docs/running.md, "Steps"), a causal window run in blocks of
query rows that reads and projects each block's own rows of X and keeps
only the keys its window reaches.

    sliding_check.py inputs DIR
        DIR/small.h5: B = 2, n = 1100, d_model 64, 4 heads over 2 K/V heads,
        all four biases, positions P (B, n) with a jump, a mask M (B, n)
        hiding some keys; DIR/fused.h5: B = 1, n = 700, d_model 32, 4
        heads, one fused weight W_QKV (96, 32) in torch.nn.Linear's layout
        with the heads interleaved (per head q|k|v, GPT-NeoX's), its bias
        B_QKV, W_O (32, 32), b_O; DIR/long.h5: B = 1, n = 32768, d_model
        256, 4 heads (X, K and V of the item 32 MiB each in float32).
        Seeded.
    sliding_check.py sliding PLAN_JSON
        the plan (--dry-run --json) slides its keys: plan.slide_keys > 0,
        in blocks of rows
    sliding_check.py whole PLAN_JSON
        the plan does not slide (plan.slide_keys 0)
    sliding_check.py over PLAN_JSON
        the plan's least step is over its cap (what sliding avoids)
    sliding_check.py same NAMES A B
        the datasets NAMES (comma list) of A and B bit for bit
    sliding_check.py reference INPUT OUT WINDOW NAMES
        OUT's datasets NAMES (comma list of output, weights, heads, q)
        against the float64 reference of models_ref.attention_variant for
        INPUT with --causal --window WINDOW, RoPE 10000 at the positions P,
        ALiBi (BLOOM's slopes), the mask M, 2 K/V heads: within 2e-4 of the
        largest value in float32, 1e-10 in float64
    sliding_check.py fused INPUT OUT WINDOW
        OUT's output against the float64 reference for fused.h5 with
        --wqkv W_QKV --bqkv B_QKV --qkv-split heads --layout linear
        --causal --window WINDOW, within 2e-4 of its largest value

The reference is written from docs/models.md's formulas (models_ref.py);
it never reads attnrun's output but to compare.
"""
import json
import os
import sys

import numpy as np
import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models_ref  # noqa: E402
import same_file  # noqa: E402  (the one comparer)
from subcommands import fail, run  # noqa: E402

SMALL = (2, 1100, 64, 4, 2)          # B, n, D, H, G
LONG = (1, 32768, 256, 4, 4)


def _write(path, shape, seed, extras):
    B, n, D, H, G = shape
    dk = D // H
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f["X"] = rng.standard_normal((B, n, D), dtype=np.float32)
        for w, cols in (("W_Q", H * dk), ("W_K", G * dk), ("W_V", G * dk)):
            f[w] = (rng.standard_normal((D, cols)) / np.sqrt(D)).astype(np.float32)
        f["W_O"] = (rng.standard_normal((H * dk, D)) / np.sqrt(H * dk)).astype(np.float32)
        if not extras:
            return
        for b, cols in (("b_Q", H * dk), ("b_K", G * dk), ("b_V", G * dk), ("b_O", D)):
            f[b] = (0.1 * rng.standard_normal(cols)).astype(np.float32)
        # positions: 3 + the index, then a jump of 40 past row 700
        pos = np.tile(np.arange(n, dtype=np.int64) + 3, (B, 1))
        pos[:, 700:] += 40
        f["P"] = pos
        keep = rng.random((B, n)) > 0.1
        keep[:, 0] = True
        f["M"] = keep.astype(np.int8)


def inputs(directory):
    _write(os.path.join(directory, "small.h5"), SMALL, 501, True)
    rng = np.random.default_rng(503)
    with h5py.File(os.path.join(directory, "fused.h5"), "w") as f:
        f["X"] = rng.standard_normal((1, 700, 32), dtype=np.float32)
        f["W_QKV"] = (rng.standard_normal((96, 32)) / np.sqrt(32)).astype(np.float32)
        f["B_QKV"] = (0.1 * rng.standard_normal(96)).astype(np.float32)
        f["W_O"] = (rng.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32)
        f["b_O"] = (0.1 * rng.standard_normal(32)).astype(np.float32)
    _write(os.path.join(directory, "long.h5"), LONG, 502, False)


def _plan(path):
    with open(path) as f:
        return json.load(f)["plan"]


def sliding(path):
    p = _plan(path)
    if p.get("slide_keys", 0) <= 0:
        fail("the plan does not slide its keys (plan.slide_keys %r)" % p.get("slide_keys"))
    if p["row_blocks"] < 2:
        fail("the plan takes whole items (%d rows)" % p["rows_per_block"])
    print("blocks of %d rows, %d keys held, %d of %d bytes"
          % (p["rows_per_block"], p["slide_keys"], p["held_bytes"], p["memory_cap"]))


def whole(path):
    p = _plan(path)
    if p.get("slide_keys", 0) != 0:
        fail("the plan slides its keys (plan.slide_keys %r)" % p["slide_keys"])


def over(path):
    p = _plan(path)
    if not p["least_step_over_cap"]:
        fail("the least step, %d bytes, fits the cap of %d" % (p["least_step_bytes"],
                                                               p["memory_cap"]))
    print("least step %d bytes, cap %d" % (p["least_step_bytes"], p["memory_cap"]))


def same(names, path_a, path_b):
    with h5py.File(path_a, "r") as a, h5py.File(path_b, "r") as b:
        for name in names.split(","):
            x, y = a[name][...], b[name][...]
            if x.dtype != y.dtype or x.shape != y.shape:
                fail("%s: %s %s against %s %s" % (name, x.dtype, x.shape, y.dtype, y.shape))
            d = same_file.value_difference(same_file.values(a[name]), same_file.values(b[name]))
            if d is not None:
                fail("%s: differs first at %s: %r against %r" % (name, d.at, x[d.at], y[d.at]))


def _within(name, got, exp):
    if got.shape != exp.shape:
        fail("%s: shape %s, expected %s" % (name, got.shape, exp.shape))
    tol = (1e-10 if got.dtype == np.float64 else 2e-4) * max(1.0, np.abs(exp).max())
    err = np.abs(got.astype(np.float64) - exp).max()
    if not err <= tol:
        at = np.unravel_index(np.argmax(np.abs(got.astype(np.float64) - exp)), exp.shape)
        fail("%s: off by %.3g at %s (tolerance %.3g)" % (name, err, at, tol))
    print("%s within %.3g" % (name, err))


def fused(input_path, out_path, window):
    with h5py.File(input_path, "r") as f:
        d = {k: f[k][...] for k in f}
    Wq, Wk, Wv, bq, bk, bv = models_ref.split_fused(d["W_QKV"], d["B_QKV"], 4, 4, 8, 8,
                                                    layout="linear", split="heads")
    ref = models_ref.attention_variant(d["X"], Wq, Wk, Wv, d["W_O"], bq=bq, bk=bk, bv=bv,
                                       bo=d["b_O"], heads=4, kv_heads=4, layout="linear",
                                       causal=True, window=int(window))
    with h5py.File(out_path, "r") as f:
        _within("output", f["output"][...], ref["output"])


def reference(input_path, out_path, window, names):
    window = int(window)
    with h5py.File(input_path, "r") as f:
        d = {k: f[k][...] for k in f}
    B, n, D, H, G = SMALL
    ref = models_ref.attention_variant(
        d["X"], d["W_Q"], d["W_K"], d["W_V"], d["W_O"], bq=d["b_Q"], bk=d["b_K"], bv=d["b_V"],
        bo=d["b_O"], heads=H, kv_heads=G, causal=True, window=window,
        alibi_slopes=models_ref.alibi_slopes(H), keep=d["M"].astype(bool), rope_theta=10000.0,
        positions=d["P"])
    with h5py.File(out_path, "r") as f:
        for name in names.split(","):
            _within(name, f[name][...], ref[name])


if __name__ == "__main__":
    run({"inputs": inputs, "sliding": sliding, "whole": whole, "over": over, "same": same,
         "fused": fused, "reference": reference}, __doc__)
