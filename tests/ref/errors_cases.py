"""tests/ref/errors_cases.py - the inputs of tests/cli/test_errors.sh and the
look of a valid run's output.

    python3 tests/ref/errors_cases.py inputs DIR
        DIR/good.h5, a valid input for --heads 2 (B=2, n=4, d_model=8), and
        bad files that each differ from it in one respect only
    python3 tests/ref/errors_cases.py valid-output OUT.h5 [GROUP]
        OUT's output (2, 4, 8) is finite and its weights (2, 2, 4, 4) rows
        sum to 1, in GROUP (default /) (an AssertionError names what is not)
"""
import os
import struct
import sys

import h5py
import numpy as np


def inputs(d):
    rng = np.random.default_rng(7)
    B, n, dm = 2, 4, 8

    def f32(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    good = {"X": f32(B, n, dm), "W_Q": f32(dm, 8), "W_K": f32(dm, 8),
            "W_V": f32(dm, 8), "W_O": f32(8, dm)}

    def write(name, libver=None, **changes):
        data = dict(good)
        data.update(changes)
        path = os.path.join(d, name)
        with h5py.File(path, "w", libver=libver) as f:
            for key, value in data.items():
                if value is not None:
                    f[key] = value
        return path

    write("good.h5")
    write("no_wv.h5", W_V=None)
    write("x_rank4.h5", X=f32(1, B, n, dm))
    write("wq_7x8.h5", W_Q=f32(7, 8))
    # per head: 2 heads of d_k = d_v = 4
    write("per_head.h5", W_Q=f32(2, dm, 4), W_K=f32(2, dm, 4),
          W_V=f32(2, dm, 4), W_O=f32(2, 4, dm))
    write("x_int32.h5", X=rng.integers(-3, 4, size=(B, n, dm)).astype(np.int32))
    wk = good["W_K"].copy()
    wk[3, 5] = np.nan
    write("nan_wk.h5", W_K=wk)

    # weights stored for the other layout: torch.nn.Linear's (out, in) =
    # (16, 8) where x W needs (8, 16), and x W's (8, 16) under --layout
    # linear (2 heads of d_k = 8; square weights would fit either way)
    write("linear.h5", W_Q=f32(16, dm), W_K=f32(16, dm), W_V=f32(16, dm), W_O=f32(dm, 16))
    write("xw_wide.h5", W_Q=f32(dm, 16), W_K=f32(dm, 16), W_V=f32(dm, 16), W_O=f32(16, dm))
    # a Hugging Face additive mask (B, 1, n, m): 0 keeps a key, -inf hides it
    hf_mask = np.zeros((B, 1, n, n), np.float32)
    hf_mask[1, 0, :, 3] = -np.inf
    write("hf_mask.h5", attention_mask=hf_mask)

    # names that are not the defaults: X as hidden_states (B, n, d_model),
    # an integer padding mask, string tokens (B, n); and integer labels of
    # n + 1 keys, which no mask of X's n keys fits (so a missing mask's
    # guess must know n from the batched X)
    write("hidden.h5", X=None, hidden_states=f32(B, n, dm),
          attention_mask=np.ones((B, n), np.int64),
          input_tokens=np.array([[b"a", b"b", b"c", b"d"]] * B),
          labels=np.zeros((B, n + 1), np.int64))
    # X's nearest name, of no shape X could have
    write("near_name.h5", X=None, x=f32(B, n, 7))
    # ... and one edit away, the most a name of 1 letter may be (limit 1)
    write("near_edit.h5", X=None, Xa=f32(B, n, 7))
    # three integer masks of X's (B, n): each could be the one meant
    write("three_masks.h5", mask_a=np.ones((B, n), np.int64), mask_b=np.ones((B, n), np.int64),
          mask_c=np.ones((B, n), np.int64))
    # two integer masks of X's (B, n) in groups other than the one a
    # missing mask is looked up in (grp1): grp2 is not grp1, however
    # alike the names, so the file's order ranks them
    write("sibling_masks.h5", **{"aaa/m": np.ones((B, n), np.int64),
                                 "grp2/m": np.ones((B, n), np.int64)})
    # a mask that HDF5 lists but cannot open (its dataspace message's
    # version byte made 9), listed before one that fits: left out of the
    # guess, and the listing goes on past it
    path = write("unopenable.h5", libver="earliest", a_bad=np.ones((B, n), np.int64),
                 mask_b=np.ones((B, n), np.int64))
    with h5py.File(path, "r") as f:
        header = h5py.h5o.get_info(f["a_bad"].id).addr
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        # a version 1 object header: 16 bytes, then messages of an 8-byte
        # prefix (type, size, flags) and their data
        version, _, messages = struct.unpack_from("<BBH", data, header)
        assert version == 1, version
        at = header + 16
        for _ in range(messages):
            kind, size = struct.unpack_from("<HH", data, at)
            if kind == 1:                      # the dataspace
                data[at + 8] = 9
                break
            at += 8 + size
        else:
            raise AssertionError("a_bad has no dataspace message")
        f.seek(0)
        f.write(data)
    # a GPT-2 layer whose fused bias (a preset's name) is a group, and a
    # group "other" that --bo might name
    with h5py.File(os.path.join(d, "preset_group.h5"), "w") as f:
        f["X"] = good["X"]
        f["c_attn.weight"] = f32(dm, 3 * 8)
        f.create_group("c_attn.bias")
        f["c_proj.weight"] = f32(8, dm)
        f.create_group("other")
    # a Llama checkpoint's layers, each under /model/layers.L/self_attn
    with h5py.File(os.path.join(d, "layers.h5"), "w") as f:
        f["X"] = good["X"]
        for layer in range(12):
            g = f.create_group("model/layers.%d/self_attn" % layer)
            for p in "qkv":
                g[p + "_proj.weight"] = f32(16, dm)
            g["o_proj.weight"] = f32(dm, 16)
    # the same layers behind an external link (to a file that is not
    # there): never followed, so never named
    with h5py.File(os.path.join(d, "layers_external.h5"), "w") as f:
        f["X"] = good["X"]
        f["model"] = h5py.ExternalLink("layers_elsewhere.h5", "/model")

    with open(os.path.join(d, "text.h5"), "w") as f:
        f.write("this is a text file, not HDF5\n")


def valid_output(path, group="/"):
    with h5py.File(path, "r") as f:
        out = f[group]["output"][...]
        w = f[group]["weights"][...]
    assert out.shape == (2, 4, 8), "output shape %s" % (out.shape,)
    assert w.shape == (2, 2, 4, 4), "weights shape %s" % (w.shape,)
    assert np.all(np.isfinite(out)), "output has non-finite values"
    assert np.allclose(w.sum(axis=-1), 1.0, atol=1e-5), "weights rows do not sum to 1"


COMMANDS = {"inputs": inputs, "valid-output": valid_output}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
