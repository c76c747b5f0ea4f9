"""tests/ref/fast_paths_check.py - the paths attnrun takes for speed (threads,
the online softmax, query rows in blocks) give the same answers, for
tests/cli/test_fast.sh.  The reference is the tree's one
(tests/ref/reference.py, written from the formulas of docs/contract.md §2
with its rules for NaN rows and rows that see no key, independently of
attnrun).  Each command prints nothing and exits 0 when the
check holds, else prints the problems and exits 1.

    python3 tests/ref/fast_paths_check.py inputs DIR
        the suite's inputs: DIR/self.h5, cross.h5, many.h5, nan.h5, odd.h5, long.h5,
        inf_group.h5
    python3 tests/ref/fast_paths_check.py inf_group OUT.h5
        item 0 of inf_group.h5 sees no key: its heads exactly 0, NaN (0 . inf)
        only where K/V group 1's values are infinite
    python3 tests/ref/fast_paths_check.py compare A.h5 B.h5 exact|close|online
        the datasets of A against B's -- exact: the same bytes (same_file.py's
        comparison); close: within
        float32 tolerance; online: the output only, within float32 tolerance
    python3 tests/ref/fast_paths_check.py reference IN.h5 OUT.h5 HEADS CAUSAL MASK KV
        OUT's weights, heads and output against float64 numpy (CAUSAL 1 or 0,
        MASK and KV a dataset name or -)
"""
import sys

import numpy as np
import h5py

import reference as attention_reference   # tests/ref/reference.py
from reference import OUTPUTS, PATHS_TOLERANCE
import same_file                           # tests/ref/same_file.py, the one comparer


def inputs(d):
    """Several query blocks (64 rows) and projection blocks (128 rows) per
    item, so that the threads really share the work."""
    rng = np.random.default_rng(20261129)

    def layer(f, D, H, bias):
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype("f4")
        if bias:
            for b in ("b_Q", "b_K", "b_V", "b_O"):
                f[b] = (0.1 * rng.standard_normal(D)).astype("f4")

    with h5py.File(f"{d}/self.h5", "w") as f:          # B=3, n=200, D=48, H=4
        f["X"] = rng.standard_normal((3, 200, 48)).astype("f4")
        keep = rng.random((3, 200)) > 0.2
        keep[1, :] = False                              # an item with no key at all
        f["pad"] = keep
        layer(f, 48, 4, True)

    with h5py.File(f"{d}/cross.h5", "w") as f:         # n=70 queries, m=700 keys
        f["X"] = rng.standard_normal((2, 70, 32)).astype("f4")
        f["mem"] = rng.standard_normal((2, 700, 32)).astype("f4")
        layer(f, 32, 4, False)

    with h5py.File(f"{d}/many.h5", "w") as f:          # many small concurrent GEMMs
        f["X"] = rng.standard_normal((1024, 32, 64)).astype("f4")
        layer(f, 64, 4, False)

    with h5py.File(f"{d}/nan.h5", "w") as f:           # --allow-nonfinite semantics
        x = rng.standard_normal((2, 300, 16)).astype("f4")
        x[1, 200, 3] = np.nan                           # reaches K and V of item 1
        f["X"] = x
        keep = np.ones((2, 300), bool)
        keep[0, :] = False                              # item 0: no key at all
        f["pad"] = keep
        layer(f, 16, 2, True)

    with h5py.File(f"{d}/odd.h5", "w") as f:           # odd sizes: buffers end unaligned
        f["X"] = rng.standard_normal((3, 5, 6)).astype("f4")
        f["pad"] = rng.random((3, 5)) > 0.3
        layer(f, 6, 2, True)

    with h5py.File(f"{d}/long.h5", "w") as f:          # one (1024, 1024) map per head
        f["X"] = rng.standard_normal((1, 1024, 16)).astype("f4")
        layer(f, 16, 2, True)

    with h5py.File(f"{d}/inf_group.h5", "w") as f:     # --heads 4 --kv-heads 2, d = 2
        f["X"] = rng.standard_normal((2, 5, 8)).astype("f4")
        for w, shape in (("W_Q", (8, 8)), ("W_K", (8, 4)), ("W_V", (8, 4)), ("W_O", (8, 8))):
            f[w] = (rng.standard_normal(shape) / 3).astype("f4")
        wv = f["W_V"][...]
        wv[0, 3] = np.inf                               # V of K/V group 1, column 1: +-inf
        f["W_V"][...] = wv
        keep = np.ones((2, 5), bool)
        keep[0, :] = False                              # item 0: no key at all
        f["pad"] = keep
    return []


def inf_group(out_path):
    """Item 0 sees no key, so its weights are 0; heads = 0 . V: exactly 0
    where V is finite (K/V group 0, heads 0 and 1; column 0 of group 1),
    NaN where V is infinite (0 . inf: column 1 of group 1, heads 2 and 3)."""
    with h5py.File(out_path, "r") as f:
        h = f["heads"][0]                               # (H, n, d_v)
    want = np.zeros_like(h)
    want[2:, :, 1] = np.nan
    if not np.array_equal(h, want, equal_nan=True) or np.signbit(h[~np.isnan(h)]).any():
        return [f"item 0's heads {h.tolist()}, expected 0 with NaN in column 1 of heads 2 and 3"]
    return []


def compare(a_path, b_path, mode):
    problems = []
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        names = [n for n in OUTPUTS if n in a]
        if mode == "online":
            names = ["output"]
        # close: every dataset within float32 tolerance (the masked -inf
        # scores must match exactly)
        if not names:
            problems.append("no datasets")
        for n in names:
            x, y = a[n][()], b[n][()]
            if x.shape != y.shape or x.dtype != y.dtype:
                problems.append(f"{n}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
            elif mode == "exact":
                d = same_file.value_difference(np.ascontiguousarray(x), np.ascontiguousarray(y))
                if d is not None:
                    problems.append(f"{n}: {d.elements} values differ, the first at {d.at}")
            else:
                finite = np.isfinite(y)
                if (np.isfinite(x) != finite).any() or (x[~finite] != y[~finite]).any():
                    problems.append(f"{n}: the non-finite values differ")
                    continue
                scale = max(float(np.abs(y[finite]).max()), 1e-30)
                err = float(np.abs(x[finite].astype("f8") - y[finite].astype("f8")).max()) / scale
                if not err <= PATHS_TOLERANCE:
                    problems.append(f"{n}: relative difference {err:g} > {PATHS_TOLERANCE:g}")
    return problems


def reference(in_path, out_path, heads, causal, mask, kv):
    """OUT's weights, heads and output against reference.py's, within its
    tolerance() (weights absolute, heads and output relative to their
    largest magnitude); NaN and -inf exactly where the reference has them."""
    ref = attention_reference.from_file(in_path, int(heads), causal=causal == "1",
                                        y=None if kv == "-" else kv,
                                        keep=None if mask == "-" else mask)
    problems = []
    with h5py.File(out_path, "r") as f:
        for name in ("weights", "heads", "output"):
            if name in f:
                why = attention_reference.off_by(name, f[name][()], ref[name])
                if why:
                    problems.append(why)
    return problems


COMMANDS = {"inputs": (inputs, 1), "compare": (compare, 3), "reference": (reference, 6),
            "inf_group": (inf_group, 1)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    found = COMMANDS[sys.argv[1]][0](*sys.argv[2:])
    if found:
        print("; ".join(found))
        sys.exit(1)
