#!/usr/bin/env python3
"""examples/stand-ins.py - stand-ins for the README's "Common tasks" inputs,
to try their commands without the models: random weights and inputs under
the names, shapes and types the README describes (the numbers mean
nothing).

    python3 examples/stand-ins.py FILE.h5...

FILE's name says which:

    gpt2.h5           GPT-2 small's layer 0 under its checkpoint's names
                      (transformer/h.0/attn/c_attn.weight (768, 2304),
                      c_attn.bias, c_proj.weight (768, 768), c_proj.bias)
                      and its input hidden/0 (2, 16, 768)
    llama-layer0.h5   TinyLlama-1.1B's layer 0 as torch.nn.Linear keeps it
                      (model/layers.0/self_attn/q_proj.weight (2048, 2048),
                      k_proj.weight and v_proj.weight (256, 2048),
                      o_proj.weight) and X (1, 32, 2048)
    long.h5           one sequence of 4096 tokens: X (1, 4096, 768) and
                      W_Q ... W_O (768, 768), 12 heads of 64

Each is seeded by its name, so a file made twice is the same.
"""
import sys
import zlib

import h5py
import numpy as np


def gpt2(f, rng):
    g = f.create_group("transformer/h.0/attn")
    g["c_attn.weight"] = (rng.standard_normal((768, 2304)) * 0.02).astype("f4")
    g["c_attn.bias"] = (rng.standard_normal(2304) * 0.02).astype("f4")
    g["c_proj.weight"] = (rng.standard_normal((768, 768)) * 0.02).astype("f4")
    g["c_proj.bias"] = (rng.standard_normal(768) * 0.02).astype("f4")
    f["hidden/0"] = rng.standard_normal((2, 16, 768)).astype("f4")


def llama(f, rng):
    g = f.create_group("model/layers.0/self_attn")
    for name, rows in (("q_proj", 2048), ("k_proj", 256), ("v_proj", 256), ("o_proj", 2048)):
        g[name + ".weight"] = (rng.standard_normal((rows, 2048)) * 0.02).astype("f4")
    f["X"] = rng.standard_normal((1, 32, 2048)).astype("f4")


def long(f, rng):
    f["X"] = rng.standard_normal((1, 4096, 768)).astype("f4")
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        f[name] = (rng.standard_normal((768, 768)) * 0.04).astype("f4")


WRITERS = {"gpt2.h5": gpt2, "llama-layer0.h5": llama, "long.h5": long}


def main(paths):
    if not paths or any(p.split("/")[-1] not in WRITERS for p in paths):
        sys.exit("usage: python3 examples/stand-ins.py FILE.h5... (each one of %s)"
                 % ", ".join(WRITERS))
    for path in paths:
        name = path.split("/")[-1]
        with h5py.File(path, "w") as f:
            WRITERS[name](f, np.random.default_rng(zlib.crc32(name.encode())))


if __name__ == "__main__":
    main(sys.argv[1:])
