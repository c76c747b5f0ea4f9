"""tests/ref/store_cases.py - the stored form of attnrun's outputs (--store,
masked tiles, --compress, --threads, --memory), for tests/cli/test_store.sh.
Every expected value comes from numpy: the float64 reference of
tests/ref/models_ref.py, the roundings and tile counts of tests/ref/store_ref.py,
or another run of attnrun whose equality docs/outputs.md or docs/running.md
requires (the same computation stored another way, with other threads or
compression).

    python3 tests/ref/store_cases.py make DIR
        the fixtures DIR/<fixture>.h5, DIR/runs.tsv ("name TAB fixture TAB
        o|inplace TAB attnrun options") and DIR/runs.json (what verify needs
        of each run)
    python3 tests/ref/store_cases.py verify DIR DONE
        every finished run listed in DONE ("name TAB out"): types, provenance,
        values, filters and stored chunks, then the runs against each other,
        the roundings of the store types and the readers (xarray, $H5DUMP);
        prints "ok ..." / "FAIL ..."
    python3 tests/ref/store_cases.py dry-input FILE
        one item of n = 1024 for the --dry-run byte counts
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import h5py

import models_ref
import same_file   # tests/ref/same_file.py, the one comparer
import store_ref as S


def layer(path, X, D, ws=1.0, seed=0, Y=None):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f["X"] = X.astype(np.float32)
        if Y is not None:
            f["Y"] = Y.astype(np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (ws * rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)


def make(top):
    rng = np.random.default_rng(20261201)
    FIX = {
        # causal tiles: n = m = 600 > 2 * 256, partial edge tiles
        "big": dict(B=2, n=600, D=32, H=2),
        # scores beyond binary16's range with --scale 1000
        "ovf": dict(B=1, n=48, D=16, H=2),
        # small maps: a chunk may hold several heads / items
        "small": dict(B=3, n=37, D=24, H=4),
        # compressible: every query and key repeats a period of 5 tokens
        "flat": dict(B=2, n=300, D=16, H=2),
        # rank-2 X: maps (H, n, m), no batch axis
        "rank2": dict(B=0, n=520, D=24, H=3),
        # cross-attention, causal (top-left): keys 300 ... 699 are hidden from every query
        "cross": dict(B=2, n=300, m=700, D=16, H=2),
        # one row and one key past a tile
        "edge": dict(B=1, n=257, D=16, H=1),
    }
    for name, p in FIX.items():
        B, n, D = p["B"], p["n"], p["D"]
        Y = None
        if name == "rank2":
            X = rng.standard_normal((n, D))
        elif name == "cross":
            X = rng.standard_normal((B, n, D))
            Y = rng.standard_normal((B, p["m"], D))
        elif name == "flat":
            base = rng.standard_normal((B, 5, D))
            X = base[:, np.arange(n) % 5, :]
        elif name == "ovf":
            X = 4.0 * rng.standard_normal((B, n, D))
        else:
            X = rng.standard_normal((B, n, D))
        layer(os.path.join(top, name + ".h5"), X, D, ws=1.5 if name == "big" else 1.0,
              seed=len(name), Y=Y)
        p.setdefault("m", n)
    # ties: d_model = d_k = 1, every weight 1, so scores[0, 0, 0, j] = x_0 x_j =
    # x_j exactly (x_0 = 1); x holds values just off the binary16 and bfloat16
    # rounding ties and range ends, where rounding once from the double and
    # rounding through float32 disagree.  ties32: float32 values on the ties.
    T16, TB = 2.0 ** -11, 2.0 ** -8
    ties = [1.0]
    for d in (2.0 ** -40, -(2.0 ** -40)):
        ties += [1 + T16 + d, 1 + 3 * T16 + d, -(1 + T16 + d), 0.75 + T16 / 2 + d,
                 2.0 ** -25 + d * 2.0 ** -25, 3 * 2.0 ** -25 + d * 2.0 ** -25,
                 65520 + d * 65536, 2.0 ** -14 * (1 + T16 + d),
                 1 + TB + d, 1 + 3 * TB + d, -(1 + TB + d),
                 2.0 ** -134 + d * 2.0 ** -134,
                 (2 - 2.0 ** -8) * 2.0 ** 127 * (1 + d)]
    ties += [3.5e38, -3.5e38, 1e-3, 7.0]
    xt = np.array(ties, np.float64)
    with np.errstate(over="ignore"):
        assert (xt.astype(np.float16) != xt.astype(np.float32).astype(np.float16)).sum() >= 8
        assert (S.bf16_bits_from_f64(xt) != S.bf16_bits_from_f32(xt.astype(np.float32))).sum() >= 4
    ties32 = np.array([1.0, 1 + T16, 1 + 3 * T16, -(1 + T16), 2.0 ** -25, 3 * 2.0 ** -25, 65520.0,
                       65519.996, 65512.0, 1 + TB, 1 + 3 * TB, -(1 + 3 * TB), 2.0 ** -14 * (1 + T16),
                       0.1, 3.0], np.float32)
    for name, x in (("ties", xt), ("ties32", ties32)):
        with h5py.File(os.path.join(top, name + ".h5"), "w") as f:
            f["X"] = x.reshape(1, -1, 1)                  # float64 for ties: --precision f64 reads it whole
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                f[w] = np.ones((1, 1), x.dtype)
        FIX[name] = dict(B=1, n=x.size, m=x.size, D=1, H=1)

    # --in-place writes into a copy of its input: the same "big", in HDF5's
    # newest format (other chunk indexes than the default one)
    with h5py.File(os.path.join(top, "big.h5"), "r") as a, \
            h5py.File(os.path.join(top, "big_latest.h5"), "w", libver="latest") as b:
        for k in a:
            b[k] = a[k][...]
    FIX["big_latest"] = FIX["big"]

    runs = {}
    tsv = open(os.path.join(top, "runs.tsv"), "w")

    def run(name, fix, causal=False, window=0, scale=None, precision="f32", store=None,
            compress=0, threads=None, memory=None, save=None, inplace=False):
        args = ["--heads", str(FIX[fix]["H"])]
        if fix == "cross":
            args += ["--kv", "Y"]
        if causal:
            args.append("--causal")
        if window:
            args += ["--window", str(window)]
        if scale is not None:
            args += ["--scale", repr(scale)]
        if precision != "f32":
            args += ["--precision", precision]
        if store is not None:
            args += ["--store", store]
        if compress:
            args += ["--compress", str(compress)]
        if threads is not None:
            args += ["--threads", str(threads)]
        if memory is not None:
            args += ["--memory", memory]
        if save is not None:
            args += ["--save", save]
        runs[name] = dict(fix=fix, causal=causal, window=window, scale=scale,
                          precision=precision, store=store or precision, compress=compress,
                          save=(save or "scores,weights,heads,output").split(","),
                          args=" ".join(args) + (" --in-place" if inplace else ""), **FIX[fix])
        tsv.write("%s\t%s\t%s\t%s\n" % (name, fix, "inplace" if inplace else "o", " ".join(args)))

    # the causal fixture, every store, compression level and thread count
    run("c32", "big", causal=True, threads=2)
    run("c32_t1", "big", causal=True, threads=1)
    run("c32_t4", "big", causal=True, threads=4)
    run("c32_mem", "big", causal=True, threads=2, memory="1M")
    run("c32_s32", "big", causal=True, store="f32")
    run("c32_z1", "big", causal=True, compress=1, threads=2)
    run("c32_z9", "big", causal=True, compress=9, threads=1)
    run("c32_z9t2", "big", causal=True, compress=9, threads=2)
    run("c16", "big", causal=True, store="f16", threads=2)
    run("c16_t1", "big", causal=True, store="f16", threads=1)
    run("c16_mem", "big", causal=True, store="f16", threads=4, memory="512K")
    run("c16_z1", "big", causal=True, store="f16", compress=1, threads=2)
    run("c16_z9", "big", causal=True, store="f16", compress=9, threads=1)
    run("c16_z1m", "big", causal=True, store="f16", compress=1, threads=4, memory="512K")
    run("c16_sw", "big", causal=True, store="f16", save="weights,output")
    run("c16_ip", "big_latest", causal=True, store="f16", compress=1, inplace=True)
    # every output saved: q, k, v keep the compute type like heads and output
    ALL = "scores,weights,heads,output,q,k,v"
    run("a32", "big", causal=True, save=ALL)
    run("ab16z", "big", causal=True, store="bf16", compress=1, save=ALL, threads=1)
    run("a64", "big", causal=True, precision="f64", save=ALL)
    run("a64_16z", "big", causal=True, precision="f64", store="f16", compress=9, save=ALL)
    # the online softmax (no map saved), compressed
    run("on_z0", "big", causal=True, save="heads,output", threads=2)
    run("on_z9", "big", causal=True, save="heads,output", compress=9, threads=1)
    run("cb16", "big", causal=True, store="bf16", threads=2)
    run("cb16_t1", "big", causal=True, store="bf16", threads=1, memory="1M")
    run("cb16_z1", "big", causal=True, store="bf16", compress=1, threads=2)
    run("cb16_z9", "big", causal=True, store="bf16", compress=9, threads=1)
    run("c64", "big", causal=True, precision="f64")
    run("c64_16", "big", causal=True, precision="f64", store="f16")
    run("c64_b16", "big", causal=True, precision="f64", store="bf16")
    run("c64_32", "big", causal=True, precision="f64", store="f32")
    run("c64_64", "big", causal=True, precision="f64", store="f64")
    # other masks on the same fixture
    run("w32", "big", causal=True, window=100)
    run("w16z", "big", causal=True, window=100, store="f16", compress=1)
    run("w32_mem", "big", causal=True, window=100, threads=2, memory="1K")
    run("wo32", "big", window=100)
    run("wo32_mem", "big", window=100, threads=1, memory="1K")
    run("d32", "big")
    # overflow of binary16
    run("o32", "ovf", scale=1000.0)
    run("o16", "ovf", scale=1000.0, store="f16")
    run("ob16", "ovf", scale=1000.0, store="bf16")
    run("o64", "ovf", scale=1000.0, precision="f64")
    run("o64_16", "ovf", scale=1000.0, precision="f64", store="f16")
    run("o64_b16", "ovf", scale=1000.0, precision="f64", store="bf16")
    # small maps
    run("s32", "small", causal=True)
    run("s16", "small", causal=True, store="f16")
    run("sb16", "small", causal=True, store="bf16")
    run("s16_z9", "small", causal=True, store="f16", compress=9, threads=1)
    run("s64", "small", causal=True, precision="f64")
    run("s64_b16", "small", causal=True, precision="f64", store="bf16")
    # rank-2 X and causal cross-attention (m > n)
    run("r32", "rank2", causal=True)
    run("r16z", "rank2", causal=True, store="f16", compress=1)
    run("x32", "cross", causal=True)
    run("x16", "cross", causal=True, store="f16", threads=1)
    run("xb16z", "cross", causal=True, store="bf16", compress=9)
    run("t64", "ties", precision="f64")
    run("t64_16", "ties", precision="f64", store="f16")
    run("t64_b16", "ties", precision="f64", store="bf16")
    run("t64_32", "ties", precision="f64", store="f32")
    run("t32", "ties32")
    run("t32_16", "ties32", store="f16")
    run("t32_b16", "ties32", store="bf16")
    run("e32", "edge", causal=True)
    run("eb16", "edge", causal=True, store="bf16")
    # compressible
    run("f_z0", "flat")
    run("f_z1", "flat", compress=1)

    tsv.close()
    with open(os.path.join(top, "runs.json"), "w") as f:
        json.dump(runs, f, indent=1)


# ------------------------------------------------------------------ verify

# set by verify(): the runs made and the finished ones ("name" -> out)
top = None
RUNS = {}
DONE = {}
H5DUMP = os.environ.get("H5DUMP", "h5dump")
MAPS = ("scores", "weights")
RESULTS = ("scores", "weights", "heads", "output", "q", "k", "v")


def say(ok_, name, why=""):
    if ok_:
        print("ok %s" % name)
    else:
        print("FAIL %s: %s" % (name, str(why).replace("\n", " ")[:700]))


def check(name, *needs):
    """Used as a decorator: runs the function at once; it returns the
    problem ('' = ok).  FAIL without running it when a run it needs did not
    finish."""
    def wrap(fn):
        missing = [r for r in needs if r not in DONE]
        if missing:
            say(False, name, "not checked: run %s failed" % ", ".join(missing))
            return
        try:
            why = fn()
        except Exception as e:                     # a check that cannot even read counts as failed
            why = "%s: %s" % (type(e).__name__, e)
        say(not why, name, why)
    return wrap


def open_(run):
    return h5py.File(DONE[run], "r")


def raw(ds):
    """Values as stored: 2-byte types as their uint16 patterns, others as read."""
    if ds.id.get_type().get_size() == 2:
        return S.read_raw_u16(ds)
    return ds[...]


def values(ds):
    """float64 values of a dataset, bf16 decoded from its bits by store_ref."""
    t = ds.id.get_type()
    if t.get_size() == 2 and t.get_fields() == (15, 7, 8, 0, 7):
        return S.bf16_to_f64(S.read_raw_u16(ds))
    return ds[...].astype(np.float64)


def first_diff(a, b):
    d = np.argwhere(a != b)
    if d.size == 0:
        return ""
    i = tuple(int(j) for j in d[0])
    return "%d of %d differ, first at %s: %r vs %r" % (len(d), a.size, i, a[i], b[i])


# ----------------------------------------------------------- the reference

REF = {}


def ref(run):
    r = RUNS[run]
    key = (r["fix"], r["causal"], r["window"], r["scale"])
    if key not in REF:
        with h5py.File(os.path.join(top, r["fix"] + ".h5"), "r") as f:
            g = {k: f[k][...] for k in ("X", "W_Q", "W_K", "W_V", "W_O", "Y") if k in f}
        REF[key] = models_ref.attention_variant(
            g["X"], g["W_Q"], g["W_K"], g["W_V"], g["W_O"], heads=r["H"],
            causal=r["causal"], window=r["window"], scale=r["scale"], Y=g.get("Y"))
    return REF[key]


STORE_REL = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8, "f32": 2.0 ** -24, "f64": 0.0}
STORE_ABS = {"f16": 2.0 ** -25, "bf16": 2.0 ** -134, "f32": 2.0 ** -150, "f64": 0.0}
STORE_MAX = {"f16": S.F16_MAX, "bf16": (2 - 2.0 ** -7) * 2.0 ** 127,
             "f32": float(np.finfo(np.float32).max), "f64": np.inf}


def compare_ref(name, got, want, compute, store):
    """got (stored) against the float64 reference: -inf exactly where the
    reference masks, within compute tolerance (models' tolerances) plus the
    store type's rounding (relative 2^-11 f16, 2^-8 bf16; half a subnormal
    step absolute).  f16 values beyond its range are checked elsewhere."""
    if got.shape != want.shape:
        return "%s has shape %s, expected %s" % (name, got.shape, want.shape)
    if np.isnan(got).any():
        return "%s has %d NaN" % (name, int(np.isnan(got).sum()))
    fin = np.isfinite(want)
    if not np.array_equal(got[~fin], want[~fin]):
        i = tuple(int(j) for j in np.argwhere(~fin & (got != want))[0])
        return "%s is %r at %s where the reference is %r" % (name, got[i], i, want[i])
    if not fin.any():
        return ""
    big = float(np.abs(want[fin]).max())
    f64 = compute == "f64"
    if name == "weights":
        tol = 1e-12 if f64 else 1e-5
    else:
        tol = 1e-12 * max(big, 1.0) if f64 else 1e-4 * big
    st = store if name in MAPS else compute
    rel, absl = STORE_REL[st], STORE_ABS[st]
    # beyond the type's largest value the stored value may be +-inf
    # (checked exactly against numpy's rounding of another run elsewhere)
    check_at = fin & (np.abs(want) < STORE_MAX[st] * (1 - 2.0 ** -9))
    if not np.isfinite(got[check_at]).all():
        i = tuple(int(j) for j in np.argwhere(check_at & ~np.isfinite(got))[0])
        return "%s is %r at %s where the reference is %r" % (name, got[i], i, want[i])
    bound = tol * (1 + 2.0 ** -7) + rel * np.abs(want) + absl
    diff = np.where(check_at, np.abs(got - np.where(fin, want, 0.0)), 0.0)
    over = check_at & (diff > bound)
    if over.any():
        i = tuple(int(j) for j in np.argwhere(over)[0])
        return ("%s: %d values beyond the bound, e.g. at %s: %r vs reference %r (bound %.3g; "
                "compute tol %.3g + %s rel %.3g)" % (name, int(over.sum()), i, got[i], want[i],
                                                    bound[i], tol, st, rel))
    return ""


# ------------------------------------------------------- per-run checks

def type_problem(ds, store):
    t = ds.id.get_type()
    size, fields = t.get_size(), t.get_fields()
    want = {"f16": (2, (15, 10, 5, 0, 10), 15), "bf16": (2, (15, 7, 8, 0, 7), 127),
            "f32": (4, (31, 23, 8, 0, 23), 127), "f64": (8, (63, 52, 11, 0, 52), 1023)}[store]
    if t.get_class() != h5py.h5t.FLOAT:
        return "%s is not a float type" % ds.name
    if (size, fields, t.get_ebias()) != want:
        return "%s: size %d, fields %s, bias %d; expected %s for %s" % (
            ds.name, size, fields, t.get_ebias(), want, store)
    npt = {"f16": np.float16, "f32": np.float32, "f64": np.float64}.get(store)
    if npt is not None and ds.dtype != npt:
        return "%s: h5py reads it as %s, expected %s" % (ds.name, ds.dtype, np.dtype(npt))
    return ""


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def check_each_run():
    for run in RUNS:
        r = RUNS[run]
        compute, store = r["precision"], r["store"]
        label = "%s (%s)" % (run, r["args"])

        saved = [k for k in RESULTS if k in r["save"]]
        maps = [k for k in MAPS if k in saved]

        @check("%s: dtypes (maps %s, other outputs %s)" % (label, store, compute), run)
        def _():
            with open_(run) as f:
                missing = [k for k in saved if k not in f]
                if missing:
                    return "no %s" % ", ".join(missing)
                p = [type_problem(f[k], store if k in MAPS else compute) for k in saved]
            return "; ".join(x for x in p if x)

        @check("%s: provenance store = %r" % (label, store), run)
        def _():
            with open_(run) as f:
                if "store" not in f.attrs:
                    return "no attribute store (attributes: %s)" % ", ".join(sorted(f.attrs))
                got = text(f.attrs["store"])
                return "" if got == store else "store = %r" % (got,)

        # (the ties fixtures are ill-conditioned on purpose, scores up to 1e77:
        # they are checked against the rounding of another run only)
        if not r["fix"].startswith("ties"):
            @check("%s: every value against the float64 reference" % label, run)
            def _():
                want = ref(run)
                p = []
                with open_(run) as f:
                    for k in saved:
                        why = compare_ref(k, values(f[k]), want[k], compute, store)
                        if why:
                            p.append(why)
                return "; ".join(p)

        @check("%s: filters (compress %d)" % (label, r["compress"]), run)
        def _():
            p = []
            with open_(run) as f:
                for k in saved:
                    ds = f[k]
                    if r["compress"]:
                        if ds.compression != "gzip" or ds.compression_opts != r["compress"] or not ds.shuffle:
                            p.append("%s: compression %r level %r shuffle %r" % (
                                k, ds.compression, ds.compression_opts, ds.shuffle))
                    elif ds.compression or ds.shuffle:
                        p.append("%s: compression %r shuffle %r without --compress" % (
                            k, ds.compression, ds.shuffle))
            return "; ".join(p)

        if maps and r["n"] >= 256 and r["m"] >= 256:
            mask = "causal" if r["causal"] else ""
            mask += (" window %d" % r["window"]) if r["window"] else ""

            @check("%s: stored chunks of the maps = tiles with a visible pair (%s)" % (
                label, mask.strip() or "no mask"), run)
            def _():
                p = []
                with open_(run) as f:
                    for k in maps:
                        ds = f[k]
                        tile = (1,) * (ds.ndim - 2) + (256, 256)
                        if ds.chunks != tile:
                            p.append("%s chunk shape %s, expected %s" % (k, ds.chunks, tile))
                            continue
                        want, total = S.chunks_expected(ds.shape, ds.chunks, r["causal"], r["window"])
                        got = ds.id.get_num_chunks()
                        if got != want:
                            p.append("%s stores %d chunks, expected %d of %d" % (k, got, want, total))
                        fv = ds.fillvalue
                        fv_want = -np.inf if k == "scores" else 0.0
                        if not (float(fv) == fv_want):
                            p.append("%s fill value %r, expected %r" % (k, fv, fv_want))
                return "; ".join(p)


# ------------------------------------------------------- between runs

# docs/running.md: the results are bit-identical for every --threads and
# --memory; docs/outputs.md: --compress N stores the bits of --compress 0,
# --store f32 is the default for f32, --store f64 for f64.
SAME = [
    ("f32: --threads 1, 2, 4, --memory 1M row blocks", ["c32", "c32_t1", "c32_t4", "c32_mem"]),
    ("f32: --compress 0, 1, 9 (threads 2, 2, 1)", ["c32", "c32_z1", "c32_z9"]),
    ("f32 --compress 9: --threads 1 and 2", ["c32_z9", "c32_z9t2"]),
    ("--store f32 is the f32 default", ["c32", "c32_s32"]),
    ("f16: --threads 1, 2, 4 with --memory 512K", ["c16", "c16_t1", "c16_mem"]),
    ("f16: --compress 0, 1, 9 (threads 2, 2, 1)", ["c16", "c16_z1", "c16_z9"]),
    ("f16 --compress 1: --threads 2 and 4 with --memory 512K", ["c16_z1", "c16_z1m"]),
    ("f16 --compress 1: -o and --in-place into a libver='latest' file", ["c16_z1", "c16_ip"]),
    ("bf16: --threads 1 (--memory 1M) and 2", ["cb16", "cb16_t1"]),
    ("bf16: --compress 0, 1, 9 (threads 2, 2, 1)", ["cb16", "cb16_z1", "cb16_z9"]),
    ("--store f64 is the f64 default", ["c64", "c64_64"]),
    ("--causal --window 100: whole rows and --memory 1K row blocks", ["w32", "w32_mem"]),
    ("--window 100 alone: whole rows and --memory 1K row blocks", ["wo32", "wo32_mem"]),
    ("small maps f16: --compress 0 and 9", ["s16", "s16_z9"]),
    ("f16 --save weights,output: the weights and output of all four saved", ["c16", "c16_sw"]),
    ("every output saved: the outputs of the default --save", ["c32", "a32"]),
    ("online softmax (--save heads,output): --compress 0 and 9, threads 2 and 1", ["on_z0", "on_z9"]),
    ("compressible fixture: --compress 0 and 1", ["f_z0", "f_z1"]),
]


def check_same_bits():
    for what, group in SAME:
        @check("bit-identical: %s (%s)" % (what, ", ".join(group)), *group)
        def _():
            p = []
            files = [open_(g) for g in group]
            try:
                for k in RESULTS:
                    if not all(k in RUNS[g]["save"] for g in group):
                        continue
                    a = raw(files[0][k])
                    for g, f in zip(group[1:], files[1:]):
                        b = raw(f[k])
                        if a.dtype != b.dtype or a.shape != b.shape:
                            p.append("%s: %s %s in %s, %s %s in %s" % (k, a.dtype, a.shape, group[0],
                                                                        b.dtype, b.shape, g))
                        elif same_file.value_difference(a, b) is not None:
                            p.append("%s: %s vs %s: %s" % (k, group[0], g, first_diff(a, b)))
            finally:
                for f in files:
                    f.close()
            return "; ".join(p)


# The stored maps are the computed ones rounded once: the maps of a run
# with the default store hold the computed values (the same computation),
# so --store T must equal numpy's rounding of them; heads and output do not
# change at all.
def rounded(kind, a):
    if kind == "f16":
        return np.asarray(a).astype(np.float16).view(np.uint16)
    if kind == "bf16_of_f32":
        return S.bf16_bits_from_f32(a)
    if kind == "bf16_of_f64":
        return S.bf16_bits_from_f64(a)
    if kind == "f32":
        return np.asarray(a, dtype=np.float64).astype(np.float32)
    raise ValueError(kind)


DERIVED = [
    ("c32", "c16", "f16", "float32 maps -> float16 (numpy astype)"),
    ("c32", "cb16", "bf16_of_f32", "float32 maps -> bf16 by (bits + 0x7FFF + lsb) >> 16"),
    ("c64", "c64_16", "f16", "float64 maps -> float16 directly (numpy astype)"),
    ("c64", "c64_b16", "bf16_of_f64", "float64 maps -> bf16 directly (frexp/rint, 8 bits)"),
    ("c64", "c64_32", "f32", "float64 maps -> float32 (numpy astype)"),
    ("w32", "w16z", "f16", "window + causal, compressed: float32 maps -> float16"),
    ("o32", "o16", "f16", "scores beyond 65504: float32 -> float16"),
    ("o32", "ob16", "bf16_of_f32", "scores beyond 65504: float32 -> bf16"),
    ("o64", "o64_16", "f16", "scores beyond 65504: float64 -> float16 directly"),
    ("o64", "o64_b16", "bf16_of_f64", "scores beyond 65504: float64 -> bf16 directly"),
    ("s32", "s16", "f16", "small maps: float32 -> float16"),
    ("s32", "sb16", "bf16_of_f32", "small maps: float32 -> bf16"),
    ("s64", "s64_b16", "bf16_of_f64", "small maps: float64 -> bf16 directly"),
    ("r32", "r16z", "f16", "rank-2 X, compressed: float32 -> float16"),
    ("x32", "x16", "f16", "causal cross-attention: float32 -> float16"),
    ("x32", "xb16z", "bf16_of_f32", "causal cross-attention, compressed: float32 -> bf16"),
    ("e32", "eb16", "bf16_of_f32", "n = m = 257 (one row and key past a tile): float32 -> bf16"),
    ("t64", "t64_16", "f16", "scores just off binary16 ties and 65520: float64 -> float16 once"),
    ("t64", "t64_b16", "bf16_of_f64", "scores just off bf16 ties and its overflow: float64 -> bf16 once"),
    ("t64", "t64_32", "f32", "scores beyond float32's range: float64 -> float32 (+-inf)"),
    ("t32", "t32_16", "f16", "scores on binary16 ties, 65520, subnormals: float32 -> float16"),
    ("t32", "t32_b16", "bf16_of_f32", "scores on bf16 ties: float32 -> bf16"),
    ("a32", "ab16z", "bf16_of_f32", "every output saved, compressed: float32 -> bf16; q, k, v unchanged"),
    ("a64", "a64_16z", "f16", "every output saved, f64, compressed: float64 -> float16; q, k, v unchanged"),
]


def check_derived():
    for src, dst, kind, what in DERIVED:
        @check("%s is exactly %s: %s" % (dst, src, what), src, dst)
        def _():
            p = []
            with open_(src) as a, open_(dst) as b:
                for k in MAPS:
                    want = rounded(kind, a[k][...])
                    got = raw(b[k])
                    if got.shape != want.shape or got.dtype != want.dtype:
                        p.append("%s: %s %s, expected %s %s" % (k, got.dtype, got.shape,
                                                                want.dtype, want.shape))
                        continue
                    if kind.startswith("bf16") or kind == "f16":
                        nan = np.isnan(S.bf16_to_f64(want) if kind != "f16"
                                       else want.view(np.float16))
                        if nan.any():
                            p.append("%s: the default run holds NaN" % k)
                            continue
                    if got.tobytes() != want.tobytes():
                        p.append("%s: %s (stored vs rounded)" % (k, first_diff(got, want)))
                for k in RESULTS[2:]:
                    if k not in RUNS[src]["save"] or k not in RUNS[dst]["save"]:
                        continue
                    x, y = a[k][...], b[k][...]
                    if x.dtype != y.dtype or same_file.value_difference(x, y) is not None:
                        p.append("%s changed with the store type (%s vs %s%s)" % (
                            k, x.dtype, y.dtype, "" if x.dtype != y.dtype else ": " + first_diff(x, y)))
            return "; ".join(p)


# The ties fixtures hold their cases only if scores[0, 0, 0, :] are x
# itself: x_0 x_j with x_0 = 1 and every weight 1 is exact in IEEE
# arithmetic (the reference's value).
def check_ties_reach_store():
    for run in ("t64", "t32"):
        @check("%s: scores[0, 0, 0, :] = x exactly (the tie cases reach the store)" % run, run)
        def _():
            with h5py.File(os.path.join(top, RUNS[run]["fix"] + ".h5"), "r") as fi, open_(run) as f:
                x = fi["X"][0, :, 0]
                got = f["scores"][0, 0, 0, :]
            return "" if got.dtype == x.dtype and got.tobytes() == x.tobytes() else first_diff(got, x)


# Beyond binary16's range: +-inf in f16 (from 65520 on, RNE), finite in bf16.
def check_overflow():
    for run, st in (("o16", "f16"), ("o64_16", "f16"), ("ob16", "bf16"), ("o64_b16", "bf16")):
        @check("%s: scores beyond 65504 stored as %s" % (
            run, "+inf / -inf" if st == "f16" else "finite bf16"), run)
        def _():
            want = ref(run)["scores"]
            hi = want > S.F16_OVERFLOW * 1.001
            lo = want < -S.F16_OVERFLOW * 1.001
            inside = np.abs(want) < S.F16_MAX * 0.999
            if hi.sum() < 5 or lo.sum() < 5 or inside.sum() < 5:
                return "the fixture does not reach beyond the range (%d above, %d below)" % (
                    hi.sum(), lo.sum())
            with open_(run) as f:
                got = values(f["scores"])
            if st == "f16":
                p = []
                if not np.isposinf(got[hi]).all():
                    p.append("%d of %d scores above 65520 are not +inf" % ((~np.isposinf(got[hi])).sum(), hi.sum()))
                if not np.isneginf(got[lo]).all():
                    p.append("%d of %d scores below -65520 are not -inf" % ((~np.isneginf(got[lo])).sum(), lo.sum()))
                if not np.isfinite(got[inside]).all():
                    p.append("scores inside the range are not finite")
                return "; ".join(p)
            if not np.isfinite(got).all():
                return "%d bf16 scores are not finite" % (~np.isfinite(got)).sum()
            err = np.abs(got - want) / np.abs(want)
            return "" if (err <= 2.0 ** -8 + 1e-4).all() else "relative error %.3g" % err.max()


# Readers: xarray (h5netcdf) sees what h5py sees -- -inf and 0 in the
# tiles never written, no NaN.
def check_xarray():
    for run in ("c32", "c16", "cb16", "w16z", "c64_b16", "ab16z"):
        @check("%s: xarray (h5netcdf) reads the same values as h5py, no NaN" % run, run)
        def _():
            import xarray as xr
            p = []
            with xr.open_dataset(DONE[run], engine="h5netcdf") as ds, open_(run) as f:
                for k in [k for k in RESULTS if k in RUNS[run]["save"]]:
                    x = np.asarray(ds[k].values, dtype=np.float64)
                    y = values(f[k])
                    if np.isnan(x).any():
                        p.append("%s: %d NaN" % (k, np.isnan(x).sum()))
                    elif x.shape != y.shape or not np.array_equal(x, y):
                        p.append("%s: %s" % (k, first_diff(x, y) if x.shape == y.shape else "shape"))
                if not np.isneginf(np.asarray(ds["scores"].values)[0, 0, 0, 300:]).all():
                    p.append("scores[0, 0, 0, 300:] (a tile never written) is not -inf")
            return "; ".join(p)


# h5dump: the masked entries of a tile never written, and visible ones.
def h5dump_data(path, dset, start, count):
    out = subprocess.run([H5DUMP, "-d", dset, "-s", ",".join(map(str, start)),
                          "-c", ",".join(map(str, count)), path],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("h5dump exit %d: %s" % (out.returncode, out.stderr.strip()[:200]))
    m = re.search(r"DATA \{(.*?)\}", out.stdout, re.S)
    if not m:
        raise RuntimeError("no DATA in h5dump's output: %s" % out.stdout[:300])
    body = re.sub(r"\([0-9,]+\):", "", m.group(1))
    return np.array([float(v) for v in body.replace("\n", " ").split(",") if v.strip()])


def check_h5dump():
    for run in ("c32", "c32_z9", "c16", "c16_z9"):
        @check("%s: h5dump reads -inf / 0 in a tile never written and the visible values" % run, run)
        def _():
            p = []
            r = ref(run)
            st = RUNS[run]["store"]
            for k, masked in (("scores", -np.inf), ("weights", 0.0)):
                got = h5dump_data(DONE[run], "/" + k, (0, 0, 0, 300), (1, 1, 1, 4))
                if got.size != 4 or not (got == masked).all():
                    p.append("/%s[0, 0, 0, 300:304] reads %s, expected %r" % (k, got, masked))
                got = h5dump_data(DONE[run], "/" + k, (1, 1, 599, 0), (1, 1, 1, 6))
                want = r[k][1, 1, 599, :6]
                big = np.abs(r[k][1, 1]).max() if k == "scores" else 0
                tol = (1e-4 * big if k == "scores" else 1e-5) + (2.0 ** -11 if st == "f16" else 1e-5) * np.abs(want)
                if got.size != 6 or not (np.abs(got - want) <= tol + 1e-6 * np.abs(want)).all():
                    p.append("/%s[1, 1, 599, :6] reads %s, reference %s" % (k, got, want))
            return "; ".join(p)

    for run in ("c32", "c16"):
        @check("%s: h5dump -p shows the fill values -inf (scores) and 0 (weights)" % run, run)
        def _():
            p = []
            for k, fv in (("scores", "-inf"), ("weights", "0")):
                out = subprocess.run([H5DUMP, "-p", "-H", "-d", "/" + k, DONE[run]],
                                     capture_output=True, text=True, timeout=60).stdout
                m = re.search(r"FILLVALUE \{.*?VALUE\s+(\S+)", out, re.S)
                if not m or m.group(1) != fv:
                    p.append("/%s fill value %s, expected %s" % (k, m.group(1) if m else "absent", fv))
            return "; ".join(p)


# store.h: a chunk is whole even past the dataset's end, the padding the
# fill; what a file stores there is visible to any reader of its chunks
# (h5py's read_direct_chunk).  Each chunk as stored must equal the
# dataset's values padded with its HDF5 fill value (-inf scores, 0 the
# others) -- the edge rows and keys of the tiles (n = 257, 300, 520, 600;
# m = 700), compressed or not, every output of a64_16z.
PADDED = ("e32", "eb16", "c32", "c16_z1", "w16z", "r16z", "x16", "a64_16z")


def check_padding():
    for run in PADDED:
        @check("%s: every chunk stored holds the values and, past the dataset's end, the fill "
               "(read_direct_chunk)" % run, run)
        def _():
            p, edges = [], 0
            with open_(run) as f:
                for k in [k for k in RESULTS if k in RUNS[run]["save"]]:
                    ds = f[k]
                    want = S.padded_bits(ds)
                    for off, chunk in S.stored_chunks(ds):
                        region = tuple(slice(o, o + c) for o, c in zip(off, ds.chunks))
                        edges += any(o + c > s for o, c, s in zip(off, ds.chunks, ds.shape))
                        if not np.array_equal(chunk, want[region]):
                            bad = np.argwhere(chunk != want[region])
                            at = tuple(int(o + j) for o, j in zip(off, bad[0]))
                            past = any(a >= s for a, s in zip(at, ds.shape))
                            p.append("%s chunk at %s: %d of %d elements differ, first at %s (%s): "
                                     "0x%x, expected 0x%x" % (
                                         k, off, len(bad), chunk.size, at,
                                         "past the end" if past else "inside",
                                         int(chunk[tuple(bad[0])]), int(want[region][tuple(bad[0])])))
                            break
            if not p and edges == 0:
                p.append("no chunk stored reaches past the dataset's end: the check checks nothing")
            return "; ".join(p)


def check_sizes():
    @check("compressible fixture: --compress 1 file smaller than --compress 0", "f_z0", "f_z1")
    def _():
        a, b = os.path.getsize(DONE["f_z0"]), os.path.getsize(DONE["f_z1"])
        return "" if b < a else "%d bytes compressed, %d uncompressed" % (b, a)

    @check("--window 100 with --causal stores fewer chunks than --causal alone", "c32", "w32")
    def _():
        with open_("c32") as a, open_("w32") as b:
            x, y = a["scores"].id.get_num_chunks(), b["scores"].id.get_num_chunks()
            n = a["scores"]
            total = np.prod([-(-s // c) for s, c in zip(n.shape, n.chunks)])
        return "" if y < x < total else "window %d, causal %d, all %d" % (y, x, total)


def verify(top_, done_path):
    global top, RUNS, DONE
    top = top_
    with open(os.path.join(top, "runs.json")) as f:
        RUNS = json.load(f)
    with open(done_path) as f:
        DONE = dict(l.rstrip("\n").split("\t") for l in f if l.strip())
    np.seterr(over="ignore", invalid="ignore")

    check_each_run()
    check_same_bits()
    check_derived()
    check_ties_reach_store()
    check_overflow()
    check_xarray()
    check_h5dump()
    check_padding()
    check_sizes()


def dry_input(path):
    """One item of n = 1024 queries (maps of (1, 2, 1024, 1024)), d_model 16."""
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        f["X"] = rng.standard_normal((1, 1024, 16)).astype("f4")
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (rng.standard_normal((16, 16)) / 4).astype("f4")


COMMANDS = {"make": (make, 1), "verify": (verify, 2), "dry-input": (dry_input, 1)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]][0](*sys.argv[2:])
