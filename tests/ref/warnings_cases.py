"""tests/ref/warnings_cases.py - the inputs of tests/cli/test_warnings.sh (the
warnings of likely mistakes, docs/warnings.md) and the check that a run's
results are the float64 reference's (tests/ref/models_ref.py), never
another run's.

    python3 tests/ref/warnings_cases.py input FILE.h5
        X (4, 6, 16), W_Q ... W_O (16, 16) (2 heads: d_k 8) and every bias
        all zeros (zero biases are legitimate: no warning), and beside them
          key_padding_mask  (4, 6) bool, torch's: True = padding; items 1
                            and 3 padded at the end (2 and 3 keys), items 0
                            and 2 not at all
          attention_mask    (4, 6) int8, Hugging Face's: 1 = attend, the
                            same padding
          one_empty         attention_mask with item 3 wholly padded
          shared_none       (6) uint8, all 0: no key of any item
          shared_some       (6) uint8, key 5 hidden
          W_Q_zero, W_K_zero  (16, 16) zeros
          W_K_sparse        W_K with half its rows zero
          W_K_last          (16, 16) zeros but the last element: not all zeros
          W_QKV_zero        (16, 48) zeros, fused Q|K|V
          X1                (6, 16): one item, no batch axis
          X_long            (1, 1100, 16): one long item, whose query rows
                            the ranks of an MPI job share
          long_padding_mask (1, 1100) bool, torch's, nothing padded
    python3 tests/ref/warnings_cases.py check OUT.h5 IN.h5 MASK [invert] [OPTION=VALUE ...]
        OUT's weights and output against models_ref.attention_variant on
        IN with keep = dataset MASK of IN (inverted with `invert`; "-":
        none), 2 heads, and OPTION=VALUE the reference's other arguments
        (wq=NAME, wk=NAME, wqkv=NAME for datasets of IN; scale=S); 1e-5
        absolute.  Exit 1 with the first difference.
    python3 tests/ref/warnings_cases.py tty FILE PLAN WARNING
        FILE, script(1)'s typescript of a run on a terminal (each "\n"
        written as "\r\n"), is the line PLAN, then the progress line
        (rewritten with "\r", ended by one newline), then the line
        WARNING and nothing else.  Exit 1 saying what differs.
"""
import re
import sys

import numpy as np
import h5py

import models_ref as M

B, N, D, H = 4, 6, 16, 2


def make_input(path):
    rng = np.random.default_rng(20)
    w = lambda *shape: (rng.standard_normal(shape) / np.sqrt(D)).astype(np.float32)
    pad = np.zeros((B, N), bool)
    pad[1, 4:] = True
    pad[3, 3:] = True
    with h5py.File(path, "w") as f:
        f["X"] = rng.standard_normal((B, N, D)).astype(np.float32)
        f["X1"] = rng.standard_normal((N, D)).astype(np.float32)
        f["X_long"] = rng.standard_normal((1, 1100, D)).astype(np.float32)
        f["long_padding_mask"] = np.zeros((1, 1100), bool)
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            f[name] = w(D, D)
        for name in ("b_Q", "b_K", "b_V", "b_O"):
            f[name] = np.zeros(D, np.float32)
        f["key_padding_mask"] = pad
        f["attention_mask"] = (~pad).astype(np.int8)
        one_empty = (~pad).astype(np.int8)
        one_empty[3] = 0
        f["one_empty"] = one_empty
        f["shared_none"] = np.zeros(N, np.uint8)
        some = np.ones(N, np.uint8)
        some[5] = 0
        f["shared_some"] = some
        f["W_Q_zero"] = np.zeros((D, D), np.float32)
        f["W_K_zero"] = np.zeros((D, D), np.float32)
        sparse = f["W_K"][...]
        sparse[::2] = 0
        f["W_K_sparse"] = sparse
        last = np.zeros((D, D), np.float32)
        last[-1, -1] = 0.5
        f["W_K_last"] = last
        f["W_QKV_zero"] = np.zeros((D, 3 * D), np.float32)


def check(out_path, in_path, mask, invert=False, **given):
    with h5py.File(in_path, "r") as f:
        def dataset(key, default):
            return f[given.get(key, default)][...]
        if "wqkv" in given:
            Wq, Wk, Wv = np.split(f[given["wqkv"]][...], 3, axis=1)
        else:
            Wq, Wk, Wv = dataset("wq", "W_Q"), dataset("wk", "W_K"), f["W_V"][...]
        keep = None
        if mask != "-":
            keep = f[mask][...].astype(bool)
            keep = ~keep if invert else keep
        ref = M.attention_variant(
            f[given.get("x", "X")][...], Wq, Wk, Wv, f["W_O"][...], heads=H,
            bq=f["b_Q"][...], bk=f["b_K"][...], bv=f["b_V"][...], bo=f["b_O"][...],
            scale=float(given["scale"]) if "scale" in given else None, keep=keep)
    with h5py.File(out_path, "r") as o:
        for name in ("weights", "output"):
            got = o[name][...].astype(np.float64)
            want = ref[name]
            if got.shape != want.shape:
                sys.exit("%s: shape %s, reference %s" % (name, got.shape, want.shape))
            err = np.abs(got - want)
            if not (err <= 1e-5).all():
                at = tuple(int(i) for i in np.argwhere(~(err <= 1e-5))[0])
                sys.exit("%s%s = %r, reference %r" % (name, at, got[at], want[at]))


PROGRESS = re.compile(r"attnrun: \d+% \(\d+/\d+ rows of items? [0-9/-]+\)(, .* (left|elapsed))?")


def check_tty(path, plan, warning):
    text = open(path, "rb").read().decode("utf-8")
    lines = text.split("\r\n")
    if len(lines) != 4 or lines[3] != "":
        sys.exit("not three lines: %r" % text[:600])
    if lines[0] != plan:
        sys.exit("the first line is %r, not the plan %r" % (lines[0], plan))
    shown = [s.rstrip(" ") for s in lines[1].split("\r")]
    if shown[0] != "" or len(shown) < 2 or not all(PROGRESS.fullmatch(s) for s in shown[1:]):
        sys.exit("the second line is no progress line: %r" % lines[1][:300])
    if not shown[-1].startswith("attnrun: 100% "):
        sys.exit("the progress does not end at 100%%: %r" % shown[-1])
    if lines[2] != warning:
        sys.exit("the third line is %r, not the warning %r" % (lines[2], warning))


def main(argv):
    if len(argv) == 3 and argv[1] == "input":
        make_input(argv[2])
    elif len(argv) >= 5 and argv[1] == "check":
        rest = argv[5:]
        invert = bool(rest) and rest[0] == "invert"
        given = dict(a.split("=", 1) for a in rest[1 if invert else 0:])
        check(argv[2], argv[3], argv[4], invert, **given)
    elif len(argv) == 5 and argv[1] == "tty":
        check_tty(argv[2], argv[3], argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
