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
        and W_QKV_gqa (32, 16) for gqa.
"""
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


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "input":
        make_input(sys.argv[2])
    else:
        sys.exit(__doc__)
