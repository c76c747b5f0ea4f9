#!/usr/bin/env python3
"""tests/ref/attention_inputs.py - the HDF5 inputs the command-line suites
generate at test time, and the properties of fixtures their checks rely on.
Values come from numpy's default_rng, so the same arguments always write
the same file.

    attention_inputs.py random OUT B N D_MODEL [SEED] [--same-rows] [--nan-at B,Q,C]
        float32 X (B, N, D_MODEL) and packed (D_MODEL, D_MODEL) weights
        W_Q, W_K, W_V, W_O scaled by 1/sqrt(D_MODEL) (SEED default 0).
        --same-rows copies each item's first query row over its other rows,
        so that every output repeats row after row and compresses well;
        --nan-at puts one NaN into X at [B, Q, C]; --kv M adds a float32
        KV (B, M, D_MODEL) for --kv KV, drawn after the weights.
    attention_inputs.py huge-value OUT
        float64 X of ones (2, 3, 4) but X[1, 2, 3] = 1e100, and float32
        identity weights: its logits fit float64, not float32.
    attention_inputs.py gpt2-layers OUT LAYERS
        a GPT-2-style model: per layer i its input /inputs/h.i (2, 16, 32)
        and /transformer/h.i/attn/c_attn.weight (32, 96), c_attn.bias,
        c_proj.weight, c_proj.bias.
    attention_inputs.py float16-bigendian IN
        exits 1 unless IN's X is float16 and its W_Q big-endian.
"""
import argparse
import sys

import numpy as np
import h5py

WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")


def random_input(path, B, n, d, seed=0, same_rows=False, nan_at=None, kv=None):
    """X (B, n, d), packed (d, d) weights and, with kv = m, KV (B, m, d);
    float32."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((B, n, d)).astype(np.float32)
    if same_rows:
        X[:, 1:, :] = X[:, :1, :]
    if nan_at is not None:
        X[nan_at] = np.nan
    with h5py.File(path, "w") as f:
        f["X"] = X
        for w in WEIGHTS:
            f[w] = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
        if kv is not None:
            f["KV"] = rng.standard_normal((B, kv, d)).astype(np.float32)


def huge_value(path):
    with h5py.File(path, "w") as f:
        x = np.ones((2, 3, 4))
        x[1, 2, 3] = 1e100
        f["X"] = x
        for w in WEIGHTS:
            f[w] = np.eye(4, dtype=np.float32)


def gpt2_layers(path, layers, B=2, n=16, D=32, seed=7):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for i in range(layers):
            f["inputs/h.%d" % i] = rng.standard_normal((B, n, D)).astype(np.float32)
            g = "transformer/h.%d/attn/" % i
            f[g + "c_attn.weight"] = (rng.standard_normal((D, 3 * D)) / np.sqrt(D)).astype(np.float32)
            f[g + "c_attn.bias"] = (0.1 * rng.standard_normal(3 * D)).astype(np.float32)
            f[g + "c_proj.weight"] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
            f[g + "c_proj.bias"] = (0.1 * rng.standard_normal(D)).astype(np.float32)


def float16_bigendian(path):
    with h5py.File(path, "r") as f:
        if f["X"].dtype != np.float16:
            sys.exit("X is %s, not float16" % f["X"].dtype)
        if f["W_Q"].dtype.byteorder != ">":
            sys.exit("W_Q is %s, not big-endian" % f["W_Q"].dtype.str)


def index(text):
    return tuple(int(i) for i in text.split(","))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("random")
    r.add_argument("out")
    r.add_argument("shape", type=int, nargs=3, metavar="B N D_MODEL")
    r.add_argument("seed", type=int, nargs="?", default=0)
    r.add_argument("--same-rows", action="store_true")
    r.add_argument("--nan-at", type=index)
    r.add_argument("--kv", type=int, metavar="M")
    sub.add_parser("huge-value").add_argument("out")
    g = sub.add_parser("gpt2-layers")
    g.add_argument("out")
    g.add_argument("layers", type=int)
    sub.add_parser("float16-bigendian").add_argument("input")
    a = p.parse_args(argv)
    if a.command == "random":
        random_input(a.out, *a.shape, seed=a.seed, same_rows=a.same_rows, nan_at=a.nan_at,
                     kv=a.kv)
    elif a.command == "huge-value":
        huge_value(a.out)
    elif a.command == "gpt2-layers":
        gpt2_layers(a.out, a.layers)
    else:
        float16_bigendian(a.input)


if __name__ == "__main__":
    main(sys.argv[1:])
