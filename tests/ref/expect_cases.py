#!/usr/bin/env python3
"""tests/ref/expect_cases.py - the inputs of tests/cli/test_expect.sh
(`--expect` and the diagnosis of the convention a user got wrong): a layer
with references computed in float64 by tests/ref/models_ref.py (its
torch_mha, as torch.nn.MultiheadAttention computes, and attention_variant,
docs/models.md's math), never by attnrun.

    python3 tests/ref/expect_cases.py input FILE.h5
        X (3, 8, 16) and its torch batch_first=False copy X_seq (8, 3, 16);
        torch-mha weights in_proj_weight (48, 16), in_proj_bias (48),
        out_proj.weight (16, 16), out_proj.bias (16) -- nn.Linear's (out, in),
        4 heads -- and key_padding_mask (3, 8) bool, True = padding (item 1
        padded from key 6); the same projections split as W_Q, W_K, W_V, W_O
        (16, 16) in nn.Linear's layout; and under /reference:
          mha/weights, mha/output      torch_mha: not causal, no mask
          causal/weights, causal/output  torch_mha with the causal attn_mask
          padded/weights, padded/output  torch_mha with key_padding_mask
          mean                         mha/weights averaged over the heads
                                       (average_attn_weights=True)
          heads8/weights, heads8/output  8 heads (d_k 2)
          scale1/weights               attention_variant, scale 1
          rope/weights                 attention_variant, RoPE theta 10000,
                                       gptj style (pairs of features)
          gqa/weights                  W_QKV fused (16, 32) linear: 4 heads,
                                       2 K/V heads
          seq/output                   mha/output as torch returns it with
                                       batch_first=False: (8, 3, 16)
          short                        (3, 4, 8, 7): a shape of nothing
          f64/weights                  mha/weights in float64
          leftpad/output               torch_mha with leftpad's padding
          square/weights               torch_mha of 8 items of 8 tokens, whose
                                       X the input keeps as X_sq_seq (8, 8, 16)
                                       in torch's batch_first=False order
                                       (X_sq: the same in attnrun's)
        and W_QKV_gqa (32, 16) for gqa, and the masks allpad (3, 8) bool,
        torch's with every item padded from key 6 (with --causal rows 0-5
        see no key: 18 of 24), leftpad (3, 8) int8, Hugging Face's with
        keys 0 and 1 padded (with --causal 6 of 24 rows see none), and
        attn_mask (8, 8) bool, torch's causal attn_mask (True = hidden).
    python3 tests/ref/expect_cases.py big FILE.h5 B
        X (B, 64, 16), W_Q ... W_O (16, 16), and /reference/weights
        (B, 4, 64, 64): the weights of attention_variant, 4 heads -- a
        reference as large as the batch, for --expect's memory.
    python3 tests/ref/expect_cases.py line STDERR OUT.h5 GROUP IN.h5 OUTPUT REF TOL
        STDERR holds the line of --expect's comparison of OUTPUT (OUT.h5's
        GROUP) with REF (IN.h5): its largest difference, relative one
        (over the largest |b|), place (of the largest |a - b| / max(1, |b|))
        and tolerance TOL are numpy's, as printed (2 or 3 digits), and it
        says within or beyond as numpy finds.  Exit 1 saying what differs.
    python3 tests/ref/expect_cases.py diagnosis STDERR FIRST WITH
        STDERR's last line is `attnrun: expect: FIRST; they match (D) WITH`
        (or "it matches"; WITH such as "with --causal") with D below 1e-5;
        FIRST without a space is
        an output's name, standing for "NAME differ(s) by X" with X the
        largest difference of its line (checked by `line`).  Exit 1 else.
"""
import re
import sys

import numpy as np
import h5py

import models_ref as M

B, N, D, H = 3, 8, 16, 4


def make_input(path):
    rng = np.random.default_rng(35)
    f32 = lambda a: np.asarray(a, np.float32)
    X = f32(rng.standard_normal((B, N, D)))
    W_in = f32(rng.standard_normal((3 * D, D)) / 2)
    b_in = f32(rng.standard_normal(3 * D) / 4)
    W_out = f32(rng.standard_normal((D, D)) / 4)
    b_out = f32(rng.standard_normal(D) / 4)
    pad = np.zeros((B, N), bool)
    pad[1, 6:] = True
    causal = np.triu(np.full((N, N), -np.inf), 1)
    mha = M.torch_mha(X, W_in, b_in, W_out, b_out, H)
    cau = M.torch_mha(X, W_in, b_in, W_out, b_out, H, attn_mask=causal)
    padded = M.torch_mha(X, W_in, b_in, W_out, b_out, H, key_padding_mask=pad)
    h8 = M.torch_mha(X, W_in, b_in, W_out, b_out, 8)
    Wq, Wk, Wv = W_in[:D], W_in[D:2 * D], W_in[2 * D:]
    bq, bk, bv = b_in[:D], b_in[D:2 * D], b_in[2 * D:]
    common = dict(bq=bq, bk=bk, bv=bv, bo=b_out, heads=H, layout="linear")
    scale1 = M.attention_variant(X, Wq, Wk, Wv, W_out, scale=1.0, **common)
    rope = M.attention_variant(X, Wq, Wk, Wv, W_out, rope_theta=10000.0, rope_style="gptj",
                               **common)
    W_gqa = f32(rng.standard_normal((2 * D, D)) / 2)          # q (16) | k (8) | v (8)
    gqa = M.attention_variant(X, W_gqa[:D], W_gqa[D:D + 8], W_gqa[D + 8:], W_out, heads=H,
                              kv_heads=2, layout="linear", bo=b_out)
    with h5py.File(path, "w") as f:
        f["X"] = X
        f["X_seq"] = X.transpose(1, 0, 2)
        f["in_proj_weight"] = W_in
        f["in_proj_bias"] = b_in
        f["out_proj.weight"] = W_out
        f["out_proj.bias"] = b_out
        f["key_padding_mask"] = pad
        for name, w in (("W_Q", Wq), ("W_K", Wk), ("W_V", Wv), ("W_O", W_out),
                        ("b_Q", bq), ("b_K", bk), ("b_V", bv), ("b_O", b_out)):
            f[name] = w
        f["W_QKV_gqa"] = W_gqa
        r = f.create_group("reference")
        for group, res in (("mha", mha), ("causal", cau), ("padded", padded), ("heads8", h8)):
            r[group + "/weights"] = f32(res["weights"])
            r[group + "/output"] = f32(res["output"])
        r["mean"] = f32(mha["weights"].mean(axis=1))
        r["scale1/weights"] = f32(scale1["weights"])
        r["rope/weights"] = f32(rope["weights"])
        r["gqa/weights"] = f32(gqa["weights"])
        r["seq/output"] = f32(mha["output"].transpose(1, 0, 2))
        r["short"] = np.zeros((3, 4, 8, 7), np.float32)
        r["f64/weights"] = mha["weights"]
        allpad = np.zeros((B, N), bool)
        allpad[:, 6:] = True
        f["allpad"] = allpad
        leftpad = np.ones((B, N), np.int8)
        leftpad[:, :2] = 0
        f["leftpad"] = leftpad
        f["attn_mask"] = np.triu(np.ones((N, N), bool), 1)
        X_sq = f32(rng.standard_normal((N, N, D)))            # B = n: shapes cannot tell
        f["X_sq_seq"] = X_sq.transpose(1, 0, 2)               # torch's batch_first=False
        f["X_sq"] = X_sq
        r["square/weights"] = f32(M.torch_mha(X_sq, W_in, b_in, W_out, b_out, H)["weights"])
        left = M.torch_mha(X, W_in, b_in, W_out, b_out, H, key_padding_mask=leftpad == 0)
        r["leftpad/output"] = f32(left["output"])


def make_big(path, B):
    rng = np.random.default_rng(36)
    f32 = lambda a: np.asarray(a, np.float32)
    X = f32(rng.standard_normal((B, 64, D)))
    W = [f32(rng.standard_normal((D, D)) / 2) for _ in range(4)]
    res = M.attention_variant(X, *W, heads=4)
    with h5py.File(path, "w") as f:
        f["X"] = X
        for name, w in zip(("W_Q", "W_K", "W_V", "W_O"), W):
            f[name] = w
        f["reference/weights"] = f32(res["weights"])


def fmt(x, digits):
    return "%.*g" % (digits, x)


def check_line(stderr, out, group, inp, output, ref, tol):
    with open(stderr) as f:
        lines = [l.rstrip("\n") for l in f if l.startswith("attnrun: expect: %s vs %s:" % (output, ref))]
    if len(lines) != 1:
        return "%d lines comparing %s with %s" % (len(lines), output, ref)
    line = lines[0]
    with h5py.File(out, "r") as a, h5py.File(inp, "r") as b:
        got = a[group][output][...].astype(np.float64)
        want = b[ref][...].astype(np.float64)
    d = np.abs(got - want)
    excess = d / np.maximum(1.0, np.abs(want))
    largest = np.abs(want).max()
    rel = d.max() / largest
    place = np.unravel_index(np.argmax(excess), excess.shape)
    head = "attnrun: expect: %s vs %s: largest difference " % (output, ref)
    tol = float(tol)
    if excess.max() <= tol:
        expected = head + "%s (relative %s), within %s" % (fmt(d.max(), 2), fmt(rel, 2), fmt(tol, 2))
    else:
        expected = head + "%s (relative %s), at [%s] beyond %s" % (
            fmt(d.max(), 3), fmt(rel, 2), ", ".join(str(int(i)) for i in place), fmt(tol, 2))
    if line != expected:
        return "the line %r; numpy's %r" % (line, expected)
    return ""


def check_diagnosis(stderr, first, with_):
    with open(stderr) as f:
        lines = f.read().rstrip("\n").split("\n")
    last = lines[-1]
    if " " not in first:         # an output's name: its difference, as its line gives it
        said = [re.search(r"largest difference ([^ ]*) ", l) for l in lines
                if l.startswith("attnrun: expect: %s vs " % first)]
        if len(said) != 1 or said[0] is None:
            return "no line comparing %s" % first
        first = "%s %s by %s" % (first, "differ" if first.endswith("s") else "differs",
                                 said[0].group(1))
    m = re.fullmatch(r"attnrun: expect: (.*); (they match|it matches) \(([^)]*)\) (.*)", last)
    if not m:
        return "no diagnosis: %r" % last
    if m.group(1) != first or m.group(4) != with_:
        return "%r, expected %r ... with %r" % (last, first, with_)
    if not float(m.group(3)) < 1e-5:
        return "a match that differs by %s" % m.group(3)
    return ""


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "input":
        make_input(a[1])
    elif len(a) == 3 and a[0] == "big":
        make_big(a[1], int(a[2]))
    elif len(a) == 8 and a[0] == "line":
        why = check_line(*a[1:])
        sys.exit("FAIL " + why if why else 0)
    elif len(a) == 4 and a[0] == "diagnosis":
        why = check_diagnosis(*a[1:])
        sys.exit("FAIL " + why if why else 0)
    else:
        sys.exit(__doc__)
