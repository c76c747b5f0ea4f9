"""Keys a query cannot see add exactly nothing to its output (test_blocks.sh).

A causal --window w over one item whose tokens after the first are all 0:
every value v_k but v_0 is 0, so the rows r >= w, which cannot see key 0,
have heads and output exactly 0 (a uniform average of zero vectors), while
the rows r < w average v_0 in and are not 0.  A masked weight that is not
exactly 0 (a tiny denormal-sized one, say) would show only here: a
tolerance against a reference cannot see it.

    unseen_keys.py make IN.h5 N W
    unseen_keys.py check OUT.h5 W
    unseen_keys.py masked-overflow IN.h5 N KEY
        one item of N tokens, a --mask `keep` hiding key KEY only and a
        (N, N) --attn-bias `AB` of 0 but float32's largest value in key
        KEY's column: under a huge --scale the hidden key's logit overflows
        to +inf, which must not count as an overflow (the key takes no
        part); every other logit stays finite.
"""
import sys

import h5py
import numpy as np


def make(path, n, w):
    n, w = int(n), int(w)
    assert 1 < w < n
    rng = np.random.default_rng(2301)
    x = np.zeros((1, n, 8), dtype=np.float32)
    x[0, 0] = 1 + rng.random(8)
    with h5py.File(path, "w") as f:
        f["X"] = x
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            f[name] = (1 + rng.random((8, 8))).astype(np.float32)   # positive: v_0 != 0


def check(path, w):
    w = int(w)
    bad = 0
    with h5py.File(path, "r") as f:
        for name in ("heads", "output"):
            a = f[name][...]
            rows = np.moveaxis(a, -2, 0).reshape(a.shape[-2], -1)   # (n, everything else)
            unseen = rows[w:]
            if np.count_nonzero(unseen):
                r = w + int(np.flatnonzero(np.any(unseen != 0, axis=1))[0])
                print(f"FAIL {path.rsplit('/', 1)[-1]}: {name}: row {r} cannot see key 0 yet holds {rows[r][rows[r] != 0][:2]} "
                      f"(exactly 0 expected)")
                bad += 1
            elif not np.all(np.any(rows[:w] != 0, axis=1)):
                print(f"FAIL {name}: a row before {w} is 0: the input does not test what it should")
                bad += 1
            else:
                print(f"ok {path.rsplit('/', 1)[-1]}: {name}: rows {w}.. exactly 0, rows 0..{w - 1} not")
    return 1 if bad else 0


def masked_overflow(path, n, key):
    n, key = int(n), int(key)
    rng = np.random.default_rng(2302)
    with h5py.File(path, "w") as f:
        f["X"] = rng.standard_normal((1, n, 16)).astype(np.float32)
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            f[name] = (0.25 * rng.standard_normal((16, 16))).astype(np.float32)
        keep = np.ones((1, n), np.uint8)
        keep[0, key] = 0
        f["keep"] = keep
        bias = np.zeros((n, n), np.float32)
        bias[:, key] = np.finfo(np.float32).max
        f["AB"] = bias


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "make":
        make(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "masked-overflow":
        masked_overflow(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
