"""tests/ref/mpi_cases.py - the inputs of tests/cli/test_mpi.sh and the checks
it makes besides tests/ref/same_file.py.  A check prints why it fails and
exits 1.

    python3 tests/ref/mpi_cases.py inputs DIR
        the generated inputs (random, float32 weights (D, D)):
          b5.h5    X (5, 40, 32), tokens (5, 40) UTF-8 strings, key_mask (5, 40)
          nan.h5   b5.h5 with one NaN in the last item's X only
          long.h5  X (1, 1100, 64): one item, its query rows in blocks
          fused.h5 X (1, 600, 32), W_QKV (96, 32) in torch.nn.Linear's
                   layout with the heads interleaved, W_O (32, 32)
          big.h5   X (6, 2048, 64): ~10 s of work under mpirun -n 2, ~800 MB
                   of scores and weights
          overflow.h5  long.h5 with X[0, 1000, :] = 3e38: finite, but its
                   q, k and v overflow float32 (rows of the last rank)
    python3 tests/ref/mpi_cases.py normalize ATTR... -- FILE...
        sets each attribute named ATTR, on every object of each FILE where it
        exists, to one fixed string, so that h5diff compares the rest
    python3 tests/ref/mpi_cases.py mutate DIR
        copies of DIR/ref.h5 (and DIR/tokref.h5) each changed in one way
        (MUTATIONS below: DIR/<name>.h5) for the comparison's self-check
    python3 tests/ref/mpi_cases.py row-blocks PLAN.json
        the plan (--dry-run --json) of one item whose query rows come in
        more than one block smaller than n
    python3 tests/ref/mpi_cases.py dry-run-json OUT SERIAL.json
        OUT is one JSON document on one line, the serial one's but for the
        plan
"""
import json
import os
import shutil
import sys

import numpy as np
import h5py


def inputs(top):
    rng = np.random.default_rng(20250)
    utf8 = h5py.string_dtype("utf-8")

    def write(name, X, extra=None):
        D = X.shape[-1]
        with h5py.File(os.path.join(top, name), "w") as f:
            f["X"] = X.astype(np.float32)
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                f[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
            for k, v in (extra or {}).items():
                f[k] = v

    X5 = rng.standard_normal((5, 40, 32)).astype(np.float32)
    tokens = np.array([["t%d.%d" % (b, i) if i % 7 else "Ġ日本%d" % b for i in range(40)]
                       for b in range(5)], dtype=utf8)
    mask = (rng.random((5, 40)) > 0.2).astype(np.int8)
    mask[:, 0] = 1
    write("b5.h5", X5, {"tokens": tokens, "key_mask": mask})
    Xn = X5.copy()
    Xn[4, 39, 31] = np.nan
    write("nan.h5", Xn)
    write("long.h5", rng.standard_normal((1, 1100, 64)))
    with h5py.File(os.path.join(top, "fused.h5"), "w") as f:
        f["X"] = rng.standard_normal((1, 600, 32)).astype(np.float32)
        f["W_QKV"] = (rng.standard_normal((96, 32)) / np.sqrt(32)).astype(np.float32)
        f["W_O"] = (rng.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32)
    write("big.h5", rng.standard_normal((6, 2048, 64)))
    # row 1000 of float32's near-largest value: its q, k and v overflow
    shutil.copy(os.path.join(top, "long.h5"), os.path.join(top, "overflow.h5"))
    with h5py.File(os.path.join(top, "overflow.h5"), "r+") as f:
        f["X"][0, 1000, :] = np.float32(3e38)


def normalize(argv):
    i = argv.index("--")
    names, files = argv[:i], argv[i + 1:]
    for path in files:
        with h5py.File(path, "r+") as f:
            objs = [f]
            f.visititems(lambda n, o: objs.append(o))
            for o in objs:
                for a in names:
                    if a in o.attrs:
                        o.attrs[a] = "normalized for h5diff"


def _one_ulp(f):
    w = f["weights"]
    v = w[0, 0, 0, 0]
    w[0, 0, 0, 0] = np.nextafter(v, np.float32(np.inf), dtype=np.float32)


def _token(f):
    t = f["query_token"]
    t[4, 39] = t[4, 39].decode() + "x"


# name: (the file copied, the change made to the copy)
MUTATIONS = {
    "value": ("ref", _one_ulp),                                          # one element, one ulp
    "attr": ("ref", lambda f: f.attrs.modify("heads", f.attrs["heads"] + 1)),   # a root attribute
    "dsattr": ("ref", lambda f: f["output"].attrs.__delitem__("description")),  # a dataset's attribute gone
    "label": ("ref", lambda f: setattr(f["weights"].dims[2], "label", "row")),  # an axis label
    "detach": ("ref", lambda f: f["scores"].dims[3].detach_scale(f["key"])),    # a scale off one axis
    "extra": ("ref", lambda f: f.__setitem__("extra", np.zeros(3, np.float32))),  # one more dataset
    "token": ("tokref", _token),                                         # one token string
    "created": ("ref", lambda f: f.attrs.__setitem__("created_utc", "1970-01-01T00:00:00Z")),
}                                                                        # (an attribute ignored)


def mutate(d):
    for name, (source, change) in MUTATIONS.items():
        path = "%s/%s.h5" % (d, name)
        shutil.copy("%s/%s.h5" % (d, source), path)
        with h5py.File(path, "r+") as f:
            change(f)


def fail(why):
    print(why)
    sys.exit(1)


def row_blocks(path):
    j = json.load(open(path))
    p, n = j["plan"], j["dims"]["n"]
    if not (p["rows_per_block"] < n and p["row_blocks"] > 1 and j["dims"]["batch"] == 1):
        fail("rows_per_block %s, row_blocks %s, n %s" % (p["rows_per_block"], p["row_blocks"], n))
    print("%d blocks of %d rows" % (p["row_blocks"], p["rows_per_block"]))


def dry_run_json(path, serial_path):
    text = open(path).read()
    try:
        j = json.loads(text)          # two documents: "Extra data"
    except ValueError as e:
        fail("not one JSON document (%s): %r" % (e, text[:200]))
    if text.strip().count("\n") != 0:
        fail("%d lines" % (text.strip().count("\n") + 1))
    s = json.load(open(serial_path))
    for k in sorted(set(s) | set(j)):
        if k != "plan" and s.get(k) != j.get(k):
            fail("%s: %r, serial %r" % (k, j.get(k), s.get(k)))
    if not isinstance(j.get("plan"), dict):
        fail("no plan")


COMMANDS = {"inputs": (inputs, 1), "mutate": (mutate, 1), "row-blocks": (row_blocks, 1),
            "dry-run-json": (dry_run_json, 2)}

if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "normalize" and "--" in sys.argv:
        normalize(sys.argv[2:])
    elif len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    else:
        COMMANDS[sys.argv[1]][0](*sys.argv[2:])
