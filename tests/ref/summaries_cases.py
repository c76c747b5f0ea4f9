"""tests/ref/summaries_cases.py - the cases of tests/cli/test_summaries.sh: the
summary outputs of `--save` (entropy, argmax, distance, mean, result) against
the float64 numpy reference of tests/ref/summaries_ref.py (written from their
definitions on top of tests/ref/models_ref.py), never against attnrun's own
output.

    python3 tests/ref/summaries_cases.py make DIR
        every fixture: DIR/<case>/in.h5 with DIR/<case>/spec.json (the
        reference's arguments, "@/NAME" for a dataset of in.h5) and
        DIR/runs.tsv ("case TAB mode TAB attnrun options")
    python3 tests/ref/summaries_cases.py verify DIR DONE
        every finished run listed in DONE ("case TAB mode TAB out TAB
        options") against the reference of DIR/<case>/spec.json, then the
        runs against each other; prints "ok ..." / "FAIL ..."
    python3 tests/ref/summaries_cases.py long-input FILE.h5
        B=1, n=16384, d_model 64 with b_O
    python3 tests/ref/summaries_cases.py long-check FILE.h5 OUT.h5
        OUT's entropy and output (--save entropy,output, 4 heads) on a few
        rows computed alone; prints "ok ..." / "FAIL ..."
"""
import math
import os
import sys

import numpy as np
import h5py

import summaries_ref as R
from case_table import (
    Gen, Table, XW, XWB, gpt2_layer, linear_weights, per_head_weights, read_done, read_spec,
    report_same_bits, shared_kv_input, variant_kwargs, xw_input, xw_weights)


OLD4 = "scores,weights,heads,output"
NEW = "entropy,argmax,distance,mean,result"
ONL = "entropy,argmax,distance"
MODES = {
    # the maps path: every summary with the old outputs, in f32 and f64
    "all":        "--save %s,%s" % (OLD4, NEW),
    "f64":        "--save %s,%s --precision f64" % (OLD4, NEW),
    # the online path: no scores, weights or mean
    "online":     "--save " + ONL,
    "online_f64": "--save %s --precision f64" % ONL,
    "online_mix": "--save %s,heads,output" % ONL,
    # the maps path through weights alone
    "maps_w":     "--save weights," + ONL,
    # bit-identity groups: default steps / row blocks / threads / batch slices
    "mix":        "--save %s,output" % NEW,
    "t1":         "--save %s,output --memory 1K --threads 1" % NEW,
    "t2":         "--save %s,output --memory 1K --threads 2" % NEW,
    "bs1":        "--save %s,output --batch-slice 1" % NEW,
    "on_mix":     "--save %s,output" % ONL,
    "on_t1":      "--save %s,output --memory 1K --threads 1" % ONL,
    "on_t2":      "--save %s,output --memory 1K --threads 2" % ONL,
    "on_bs1":     "--save %s,output --batch-slice 1" % ONL,
    # the new outputs only; each alone; mean stored as float16
    "new":        "--save " + NEW,
    "entropy":    "--save entropy",
    "argmax":     "--save argmax",
    "distance":   "--save distance",
    "mean":       "--save mean",
    "result":     "--save result",
    "f16":        "--save weights,%s --store f16" % NEW,
}
CORE = ("all", "f64", "online", "online_f64", "online_mix", "maps_w", "mix", "t1", "t2",
        "on_mix", "on_t1", "on_t2")
SLICES = ("bs1", "on_bs1")
EXTRA = ("new", "entropy", "argmax", "distance", "mean", "result", "f16")


# the table being written (set by make())
TABLE = None


def path(name):
    return TABLE.path(name)


def case(name, args, generic, H, modes, **flags):
    """flags: nonfinite (old outputs not compared), exact_argmax (no
    near-tie allowance), hand (hand-computed values to check), xarray,
    positions_matter, dry (the dry-run shapes to expect)."""
    spec = dict(flags, generic=dict({"X": "@/X"}, **generic, heads=H), H=H, args=args)
    TABLE.case(name, spec, args, modes)


# The cases of the xw layout that differ only in their sizes, options and
# the datasets written after the weights: name, seed, X's shape, (D, H, G,
# d_k, d_v), biases, the datasets extra(g) draws after the weights (in
# order, from the same seed), the options, the reference's arguments beyond
# XW / XWB, the modes, the flags of case().
XW_CASES = [
    # rank-3 X, every bias
    ("r3", 1, (3, 13, 32), (32, 4, 4, 8, 8), True, None, "--heads 4", {},
     CORE + SLICES + EXTRA, dict(xarray=True)),
    # rank-2 X, rank-1 mask hiding key 0, causal: query 0 sees no key
    ("r2", 2, (11, 24), (24, 3, 3, 8, 8), False,
     lambda g: {"M": np.array([0] + [1] * 10, np.uint8)},
     "--heads 3 --causal --mask M", dict(keep="@/M", causal=True), CORE + EXTRA, dict(xarray=True)),
    # causal
    ("causal", 3, (2, 20, 32), (32, 2, 2, 16, 16), True, None, "--heads 2 --causal",
     dict(causal=True), CORE + SLICES, {}),
    # sliding windows, without and with causal
    ("window", 5, (2, 24, 32), (32, 4, 4, 8, 8), False, None, "--heads 4 --window 5",
     dict(window=5), CORE + SLICES, {}),
    ("window_causal", 6, (2, 24, 32), (32, 4, 4, 8, 8), False, None,
     "--heads 4 --window 3 --causal", dict(window=3, causal=True), CORE + SLICES, {}),
    # (n) positions without RoPE: only distance sees them
    ("positions_1d", 8, (2, 12, 32), (32, 4, 4, 8, 8), False,
     lambda g: {"P": (1000 + 7 * np.arange(12) ** 2).astype(np.int32)},
     "--heads 4 --positions P", dict(positions="@/P"), CORE + SLICES, dict(positions_matter=True)),
    # GQA: 8 query heads on 2 K/V heads, RoPE, window + causal
    ("gqa", 9, (2, 15, 64), (64, 8, 2, 8, 8), True, None,
     "--heads 8 --kv-heads 2 --rope 10000 --causal --window 6",
     dict(kv_heads=2, rope_theta=10000.0, causal=True, window=6), CORE + SLICES, dict(xarray=True)),
]


def write_cases():
    for name, seed, X, (D, H, G, dk, dv), bias, extra, options, more, modes, flags in XW_CASES:
        xw_input(path(name), seed, X, D, H, G, dk, dv, bias, extra)
        case(name, options, dict(XWB if bias else XW, **more), H, modes, **flags)

    # key-padding mask: item 1 fully masked; item 0 hides key 0, so with
    # --causal its query 0 sees nothing; item 2 hides every third key
    for name in ("mask", "mask_nc"):
        g = Gen(4)
        with h5py.File(path(name), "w") as f:
            f["X"] = g(3, 12, 32)
            xw_weights(f, g, 32, 4, 4, 8, 8, bias=True)
            M = np.ones((3, 12), bool)
            M[0, 0] = M[0, 9:] = False
            M[1, :] = False
            M[2, ::3] = False
            f["M"] = M
    case("mask", "--heads 4 --causal --mask M", dict(XWB, keep="@/M", causal=True), 4,
         CORE + SLICES + EXTRA)
    case("mask_nc", "--heads 4 --mask M", dict(XWB, keep="@/M"), 4, CORE + SLICES)

    # an attention bias that hides keys with -inf: key 3 from every query,
    # every key from query 5 of head 1 only (the other heads still see it, so
    # mean's row there averages the other heads' weights with 0)
    g = Gen(19)
    with h5py.File(path("bias_inf"), "w") as f:
        f["X"] = g(2, 10, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8)
        AB = g(4, 10, 10, s=0.5)
        AB[:, :, 3] = -np.inf
        AB[1, 5, :] = -np.inf
        f["AB"] = AB
    case("bias_inf", "--heads 4 --attn-bias AB", dict(XW, attn_bias="@/AB"), 4, CORE + SLICES)

    # --positions (B, n): a shifted spread run, sorted randoms, all equal (every
    # distance 0); with RoPE and causal.
    g = Gen(7)
    with h5py.File(path("positions"), "w") as f:
        f["X"] = g(3, 14, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8)
        P = np.zeros((3, 14), np.int64)
        P[0] = 100 + 3 * np.arange(14)
        P[1] = np.sort(np.random.default_rng(7).integers(0, 500, 14))
        P[2] = 42
        f["P"] = P
    case("positions", "--heads 4 --positions P --rope 10000 --causal",
         dict(XW, positions="@/P", rope_theta=10000.0, causal=True), 4, CORE + SLICES,
         positions_matter=True)

    # cross-attention, m = 17 != n = 9: both positions given, a mask
    g = Gen(10)
    with h5py.File(path("cross"), "w") as f:
        f["X"] = g(2, 9, 32)
        f["Y"] = g(2, 17, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8, bias=True)
        f["P"] = np.array([[5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 4, 8, 12, 16, 20, 24, 28, 32]],
                          np.int64)
        f["KP"] = (3 * np.arange(17)).astype(np.int64)
        M = np.ones((2, 17), np.int8)
        M[0, 0] = 0
        M[1, 12:] = 0
        f["M"] = M
    case("cross", "--heads 4 --kv Y --positions P --kv-positions KP --mask M",
         dict(XWB, Y="@/Y", positions="@/P", kv_positions="@/KP", keep="@/M"), 4,
         CORE + SLICES + EXTRA, xarray=True, positions_matter=True)

    # cross-attention, a rank-2 --kv (m = 21) for every item, query positions
    # only (keys at 0..20), causal (top-left: query q sees keys 0..q)
    g = Gen(11)
    shared_kv_input(path("cross_defpos"), g, 21, 50)
    case("cross_defpos", "--heads 4 --kv Y --positions P --causal",
         dict(XW, Y="@/Y", positions="@/P", causal=True), 4, CORE + SLICES, positions_matter=True)

    # --layout linear, d_v != d_k, b_O
    g = Gen(12)
    with h5py.File(path("linear"), "w") as f:
        f["X"] = g(2, 11, 40)
        linear_weights(f, g, 40, 4, 8, 5)
    case("linear", "--heads 4 --layout linear", dict(XWB, layout="linear"), 4, CORE + SLICES)

    # 3-D per-head weights, d_v != d_k
    g = Gen(13)
    with h5py.File(path("perhead"), "w") as f:
        f["X"] = g(2, 10, 32)
        per_head_weights(f, g, 32, 4, 4, 8, 6, wo_scale=24 ** -0.5)
        f["b_O"] = g(32, s=0.2)
    case("perhead", "--causal", dict(XW, bo="@/b_O", causal=True), 4, CORE + SLICES)

    # --preset gpt2: fused Conv1D c_attn, c_proj under a group
    g = Gen(14)
    case("gpt2", "--preset gpt2 --weights-group /transformer/h.0/attn --heads 4",
         gpt2_layer(path("gpt2"), g, 2, 16, 64, 4), 4, CORE + SLICES + ("result",))

    # a NaN in two query rows (cross-attention, so no key or value is NaN):
    # those rows NaN / -1 in every head, the others finite
    g = Gen(15)
    with h5py.File(path("nan"), "w") as f:
        X = g(2, 8, 32)
        X[0, 3, 5] = np.nan
        X[1, 0, 0] = np.nan
        f["X"] = X
        f["Y"] = g(2, 11, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8, bias=True)
    case("nan", "--heads 4 --kv Y --allow-nonfinite", dict(XWB, Y="@/Y"), 4, CORE + SLICES,
         nonfinite=True)

    # ties: d_model = d_k = 1, every weight 1, so logit[q, k] = x_q x_k exactly.
    # x = 1, 3, -2, 3, 0.5, 0: the largest logit of a positive x_q is at keys 1
    # and 3 (-> 1), of x_q = -2 at key 2, and x_q = 0 sees only equal logits (-> 0).
    xs = np.array([1, 3, -2, 3, 0.5, 0], np.float32)
    for name, causal, want in (("ties", False, [1, 1, 2, 1, 1, 0]),
                               ("ties_causal", True, [0, 1, 2, 1, 1, 0])):
        with h5py.File(path(name), "w") as f:
            f["X"] = xs.reshape(1, 6, 1)
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                f[w] = np.ones((1, 1), np.float32)
        case(name, "--heads 1" + (" --causal" if causal else ""), dict(XW, causal=causal), 1,
             CORE, exact_argmax=True, hand={"argmax": [[want]]})

    # ties across key blocks: n = 600 (the online softmax takes 512 keys at a
    # time); x in multiples of 1/64 within (-1, 1), except x_10 = x_550 = 2 and
    # x_20 = x_530 = -2: positive queries -> 10, negative -> 20, zero -> 0.
    # With keys 10 and 20 masked: 550 and 530, found in the second block.
    rng = np.random.default_rng(16)
    xl = (rng.integers(-60, 61, 600) / 64.0).astype(np.float32)
    xl[[10, 550]] = 2.0
    xl[[20, 530]] = -2.0
    xl[[100, 333]] = 0.0
    for name, hide in (("ties_long", None), ("ties_long_mask", (10, 20))):
        with h5py.File(path(name), "w") as f:
            f["X"] = xl.reshape(1, 600, 1)
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                f[w] = np.ones((1, 1), np.float32)
            if hide:
                keep = np.ones(600, np.uint8)
                keep[list(hide)] = 0
                f["M"] = keep
        pos, neg = (550, 530) if hide else (10, 20)
        want = np.where(xl > 0, pos, np.where(xl < 0, neg, 0)).astype(int)
        if hide:
            want[(xl == 0)] = 0
        generic = dict(XW, keep="@/M") if hide else dict(XW)
        case(name, "--heads 1" + (" --mask M" if hide else ""), generic, 1,
             ("all", "online", "maps_w", "mix", "t1", "t2", "on_mix", "on_t1", "on_t2"),
             exact_argmax=True, hand={"argmax": [[want.tolist()]]})

    # uniform attention: W_Q = 0, so every logit is 0; causal.  By hand:
    # entropy log(q+1), argmax 0, distance q/2, mean 1/(q+1) on keys 0..q
    g = Gen(17)
    with h5py.File(path("uniform"), "w") as f:
        f["X"] = g(2, 10, 16)
        xw_weights(f, g, 16, 2, 2, 8, 8)
        f["W_Q"][...] = 0
    case("uniform", "--heads 2 --causal", dict(XW, causal=True), 2, CORE + SLICES,
         exact_argmax=True, hand={"uniform_causal": True})

    # long: n = 1100 (three key blocks of the online softmax; under --memory 1K
    # the maps path takes query rows in blocks of 256), (n) positions, a mask
    g = Gen(18)
    with h5py.File(path("long"), "w") as f:
        f["X"] = g(2, 1100, 32)
        xw_weights(f, g, 32, 2, 2, 16, 16, bias=True)
        f["P"] = (2 * np.arange(1100) + 9).astype(np.int64)
        M = np.ones((2, 1100), bool)
        M[1, 1000:] = False
        M[0, 0] = False
        f["M"] = M
    case("long", "--heads 2 --positions P --mask M --causal",
         dict(XWB, positions="@/P", keep="@/M", causal=True), 2,
         ("online", "maps_w", "mix", "t1", "t2", "bs1", "on_mix", "on_t1", "on_t2", "on_bs1"))


def make(top):
    global TABLE
    TABLE = Table(top, MODES)
    write_cases()
    TABLE.close()


# ------------------------------------------------------------------ verify

OLD = ("scores", "weights", "heads", "output", "q", "k", "v")
SUMMARIES = R.SUMMARIES
TYPES = {"entropy": "p", "distance": "p", "result": "p", "argmax": "i4", "mean": "store"}
CHECKED_SUM = []         # the runs whose result added up to their output


def reference(top, case):
    spec = read_spec(top, case)
    with h5py.File(os.path.join(top, case, "in.h5"), "r") as f:
        kw = variant_kwargs(f, spec["generic"], spec["H"])
    ref = R.variant(**kw)
    bo = np.zeros(ref["output"].shape[-1]) if kw.get("bo") is None else \
        np.asarray(kw["bo"], np.float64)
    S = ref["scores"]
    fin = np.isfinite(S)
    m = S.shape[-1]
    ref["_smax"] = float(np.abs(S[fin]).max()) if fin.any() else 0.0
    ref["_logm"] = max(1.0, math.log(m))
    ref["_bo"] = bo
    ref["_kw"] = kw
    # the rows that see no key, and the NaN rows
    W = ref["weights"]
    ref["_nan"] = R.nan_rows(S, W)
    ref["_none"] = ~ref["_nan"] & ~(S > -np.inf).any(-1)
    return spec, ref


def tolerances(ref, f64):
    e = 1e-12 if f64 else 1e-5
    dist = ref["distance"][np.isfinite(ref["distance"])]
    res = ref["result"][np.isfinite(ref["result"])]
    return {
        "entropy": e * ref["_logm"],
        "distance": e * max(1.0, float(np.abs(dist).max()) if dist.size else 0.0),
        "mean": e,
        "result": e * max(1e-30, float(np.abs(res).max()) if res.size else 0.0),
        "logit": e * max(1.0, ref["_smax"]),
    }


def labels(name, rank2):
    lab = R.LABELS[name]
    return lab[1:] if rank2 else lab


def where(a):
    return tuple(int(j) for j in a)


def compare_float(name, got, want, tol):
    """got against want: NaN exactly where want is NaN, |error| <= tol."""
    if got.shape != want.shape:
        return "%s has shape %s, expected %s" % (name, got.shape, want.shape)
    g = got.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(want)
    if (gn != wn).any():
        i = where(np.argwhere(gn != wn)[0])
        return "%s is %r at %s where the reference has %r" % (name, g[i], i, want[i])
    ok = ~wn
    if not np.isfinite(g[ok]).all():
        return "%s has infinite values" % name
    diff = np.where(ok, np.abs(g - np.where(ok, want, 0.0)), 0.0)
    err = float(diff.max()) if diff.size else 0.0
    if err > tol:
        i = where(np.unravel_index(np.argmax(diff), diff.shape))
        return "%s: max error %.3g > %.3g at %s (%r vs reference %r)" % (
            name, err, tol, i, g[i], want[i])
    return ""


def compare_argmax(got, ref, tol, exact):
    """argmax exactly; a mismatch is allowed only at a float64 near-tie (not
    an exact one) within tol, and never in the crafted cases."""
    want = ref["argmax"]
    if got.shape != want.shape:
        return "argmax has shape %s, expected %s" % (got.shape, want.shape), 0
    bad = np.argwhere(got != want)
    S = ref["scores"]
    near = 0
    for i in bad:
        i = where(i)
        g, w = int(got[i]), int(want[i])
        row = S[i]
        if not exact and g >= 0 and w >= 0 and g < row.shape[-1] and row[g] > -np.inf \
                and row[g] != row[w] and row[w] - row[g] <= tol:
            near += 1
            continue
        return ("argmax is %d at %s, reference %d (logits there: %r and %r)" % (
            g, i, w, row[g] if 0 <= g < row.shape[-1] else None, row[w] if w >= 0 else None),
            near)
    return "", near


def special_rows(f, ref):
    """Rows that see no key: entropy and distance exactly 0, argmax -1, mean 0
    where every head sees none; NaN rows: argmax -1 (NaN values are checked
    by compare_float)."""
    problems = []
    none, nan = ref["_none"], ref["_nan"]
    for name, want in (("entropy", 0.0), ("distance", 0.0), ("argmax", -1)):
        if name in f and none.any():
            got = f[name][...][none]
            if not (got == want).all():
                problems.append("%s is %r on a row that sees no key (expected %r)" % (
                    name, got[got != want][0], want))
    if "argmax" in f and nan.any() and not (f["argmax"][...][nan] == -1).all():
        problems.append("argmax is not -1 on a NaN row")
    if "mean" in f:
        allnone = none.all(axis=-2)               # (B, n): every head sees no key
        if allnone.any() and not (f["mean"][...][allnone] == 0).all():
            problems.append("mean is not 0 on a row that no head sees")
    return problems


def check_run(case, mode, out, args, spec, ref):
    f64 = "--precision f64" in args
    f16 = "--store f16" in args
    save = args.split("--save ")[1].split()[0].split(",")
    rank2 = ref["scores"].ndim == 3
    tol = tolerances(ref, f64)
    p_type = np.dtype("<f8" if f64 else "<f4")
    problems, near = [], 0
    with h5py.File(out, "r") as f:
        results = sorted(k for k in f if isinstance(f[k], h5py.Dataset)
                         and f[k].attrs.get("attnrun_role") in (b"result", "result"))
        if results != sorted(save):
            problems.append("result datasets %s, expected %s" % (results, sorted(save)))
        for name in SUMMARIES:
            if name not in save or name not in f:
                continue
            ds = f[name]
            want_type = {"p": p_type, "i4": np.dtype("<i4"),
                         "store": np.dtype("<f2") if f16 else p_type}[TYPES[name]]
            if ds.dtype != want_type:
                problems.append("%s stored as %s, expected %s" % (name, ds.dtype, want_type))
            lab = tuple(d.label for d in ds.dims)
            if lab != labels(name, rank2):
                problems.append("%s axis labels %s, expected %s" % (name, lab, labels(name, rank2)))
            unattached = [d.label for d in ds.dims if len(d) == 0]
            if unattached:
                problems.append("%s: no dimension scale on %s" % (name, unattached))
            got = ds[...]
            if name == "argmax":
                why, near = compare_argmax(got, ref, tol["logit"], spec.get("exact_argmax"))
            elif name == "mean" and f16:
                why = compare_float(name, got, ref["mean"], 2.0 ** -12 + tol["mean"])
            else:
                why = compare_float(name, got, ref[name], tol[name])
            if why:
                problems.append(why)
        problems += special_rows(f, ref)
        # the old outputs, except where the reference cannot follow (NaN
        # rows) or the maps are stored narrower
        if not spec.get("nonfinite"):
            for name in ("scores", "weights", "heads", "output"):
                if name not in save or name not in f or (f16 and name in ("scores", "weights")):
                    continue
                got, want = f[name][...].astype(np.float64), ref[name]
                fin = np.isfinite(want)
                if got.shape != want.shape or not np.array_equal(got[~fin], want[~fin]):
                    problems.append("%s: shape or masked entries differ" % name)
                    continue
                big = float(np.abs(want[fin]).max()) if fin.any() else 0.0
                t = (1e-12 if f64 else 1e-5) if name == "weights" else \
                    (1e-12 * max(big, 1.0) if f64 else 1e-4 * big)
                err = float(np.abs(got[fin] - want[fin]).max()) if fin.any() else 0.0
                if err > t:
                    problems.append("%s: max error %.3g > %.3g" % (name, err, t))
        # result adds up to the saved output
        if "result" in save and "output" in save and "result" in f and "output" in f:
            res, outp = f["result"][...].astype(np.float64), f["output"][...].astype(np.float64)
            total = res.sum(axis=-2) + ref["_bo"]
            ok = ~np.isnan(outp)
            scale = max(np.abs(outp[ok]).max() if ok.any() else 0.0,
                        np.abs(res[~np.isnan(res)]).max() if res.size else 0.0)
            t = (1e-12 if f64 else 1e-5) * max(scale, 1e-30)
            if (np.isnan(total) != np.isnan(outp)).any():
                problems.append("sum_h result + b_O is NaN where output is not (or back)")
            else:
                err = float(np.abs(total[ok] - outp[ok]).max()) if ok.any() else 0.0
                if err > t:
                    problems.append("sum_h result + b_O differs from output by %.3g > %.3g" % (err, t))
                else:
                    CHECKED_SUM.append("%s %s" % (case, mode))
        # hand-computed values
        hand = spec.get("hand") or {}
        if "argmax" in hand and "argmax" in f:
            want = np.array(hand["argmax"]).reshape(f["argmax"].shape)
            if not np.array_equal(f["argmax"][...], want):
                i = where(np.argwhere(f["argmax"][...] != want)[0])
                problems.append("argmax %d at %s, by hand %d" % (f["argmax"][i], i, want[i]))
        if hand.get("uniform_causal"):
            n = ref["scores"].shape[-2]
            q = np.arange(n)
            for name, want, t in (("entropy", np.log(q + 1.0), tol["entropy"]),
                                  ("distance", q / 2.0, tol["distance"]),
                                  ("argmax", np.zeros(n), 0)):
                if name in f:
                    err = float(np.abs(f[name][...] - want).max())
                    if err > t:
                        problems.append("%s differs from its hand value by %.3g" % (name, err))
            if "mean" in f:
                want = np.tril(np.ones((n, n))) / (q[:, None] + 1.0)
                err = float(np.abs(f["mean"][...] - want).max())
                if err > (0.5 * 2.0 ** -11 + tol["mean"] if f16 else tol["mean"]):
                    problems.append("mean differs from 1/(q+1) by %.3g" % err)
    return problems, near


def check_runs(top, done):
    """Each finished run against the reference; the references and the
    finished runs by (case, mode)."""
    refs, finished = {}, {}
    for case, mode, out, args in read_done(done):
        finished[(case, mode)] = out
        if case not in refs:
            refs[case] = reference(top, case)
        spec, ref = refs[case]
        problems, near = check_run(case, mode, out, args, spec, ref)
        saved = args.split("--save ")[1].split()[0]
        if problems:
            print("FAIL %s %s (%s): %s" % (case, mode, args, "; ".join(problems)[:700]))
        else:
            print("ok %s %s: %s match the reference%s" % (
                case, mode, saved, " (%d float32 near-ties in argmax)" % near if near else ""))

    if CHECKED_SUM:
        print("ok sum over heads of result + b_O equals the saved output (%d runs)" % len(CHECKED_SUM))
    return refs, finished


# the same bits whatever the steps, threads and slices, on each softmax path
def check_same_bits(refs, finished):
    report_same_bits((("mix", "t1", "t2", "bs1"), ("on_mix", "on_t1", "on_t2", "on_bs1")),
                     refs, finished, SUMMARIES + ("output",))


# the online path against the maps path: values within the tolerances, the
# same argmax
def check_paths_agree(refs, finished):
    for case in sorted(refs):
        spec, ref = refs[case]
        on = finished.get((case, "online"))
        for maps_mode in ("all", "maps_w", "mix"):
            mp = finished.get((case, maps_mode))
            if not on or not mp:
                continue
            tol = tolerances(ref, False)
            problems = []
            with h5py.File(on, "r") as a, h5py.File(mp, "r") as b:
                for k in ("entropy", "distance"):
                    why = compare_float(k, a[k][...], b[k][...].astype(np.float64), tol[k])
                    if why:
                        problems.append(why)
                x, y = a["argmax"][...], b["argmax"][...]
                if not np.array_equal(x, y):
                    i = where(np.argwhere(x != y)[0])
                    problems.append("argmax %d online, %d on the maps path at %s" % (x[i], y[i], i))
            if problems:
                print("FAIL %s online vs %s: %s" % (case, maps_mode, "; ".join(problems)))
            else:
                print("ok %s online and %s paths agree (same argmax)" % (case, maps_mode))


# --store f16: mean float16, within half a float16 step of the float32 mean
def check_store_f16(refs, finished):
    for case in sorted(refs):
        a, b = finished.get((case, "f16")), finished.get((case, "mix"))
        if not a or not b:
            continue
        with h5py.File(a, "r") as x, h5py.File(b, "r") as y:
            m16, m32 = x["mean"][...], y["mean"][...]
            problems = []
            if m16.dtype != np.float16 or x["weights"].dtype != np.float16:
                problems.append("mean %s, weights %s: expected float16" % (m16.dtype, x["weights"].dtype))
            if x["entropy"].dtype != np.float32 or x["result"].dtype != np.float32:
                problems.append("entropy %s, result %s: expected float32" % (
                    x["entropy"].dtype, x["result"].dtype))
            if m16.dtype == np.float16:
                v = m32.astype(np.float64)
                step = np.spacing(np.abs(m32).astype(np.float16)).astype(np.float64)
                err = np.abs(m16.astype(np.float64) - v)
                lim = 0.5 * step + np.spacing(np.abs(m32)).astype(np.float64)
                if (err > lim).any():
                    i = where(np.argwhere(err > lim)[0])
                    problems.append("mean %r at %s is not the float32 mean %r rounded" % (
                        m16[i], i, m32[i]))
            if problems:
                print("FAIL %s --store f16: %s" % (case, "; ".join(problems)))
            else:
                print("ok %s --store f16: mean float16 (the float32 mean rounded), entropy float32"
                      % case)


# positions do change distance: the check above could tell them from indices
def check_positions_matter(refs, finished):
    for case in sorted(refs):
        spec, ref = refs[case]
        if not spec.get("positions_matter"):
            continue
        kw = ref["_kw"]
        plain = R.summarize(ref, kw["Wo"], kw.get("layout", "xw"), None, None, kw.get("Y") is not None)
        d = np.nanmax(np.abs(plain["distance"] - ref["distance"]))
        t = tolerances(ref, False)["distance"]
        if d > 100 * t:
            print("ok %s: positions move distance by up to %.3g (tolerance %.3g)" % (case, d, t))
        else:
            print("FAIL %s: positions move distance by only %.3g: the fixture cannot tell" % (case, d))


# xarray reads the summaries with their dimensions
def check_xarray(refs, finished):
    import xarray
    for case in sorted(refs):
        spec, ref = refs[case]
        out = finished.get((case, "all"))
        if not spec.get("xarray") or not out:
            continue
        rank2 = ref["scores"].ndim == 3
        problems = []
        try:
            with xarray.open_dataset(out, engine="h5netcdf") as ds, h5py.File(out, "r") as f:
                for name in SUMMARIES:
                    if name not in ds:
                        problems.append("no %s" % name)
                        continue
                    if tuple(ds[name].dims) != labels(name, rank2):
                        problems.append("%s dims %s" % (name, ds[name].dims))
                    if not np.array_equal(ds[name].values, f[name][...], equal_nan=True) \
                            or ds[name].dtype != f[name].dtype:
                        problems.append("%s reads as %s %s, h5py %s" % (
                            name, ds[name].dtype, ds[name].values.ravel()[:4], f[name].dtype))
        except Exception as e:                                   # noqa: BLE001
            problems.append("%s: %s" % (type(e).__name__, e))
        if problems:
            print("FAIL %s: xarray: %s" % (case, "; ".join(problems)[:600]))
        else:
            print("ok %s: xarray opens it, the summaries with their dimensions and values" % case)


def verify(top, done):
    refs, finished = check_runs(top, done)
    for check in (check_same_bits, check_paths_agree, check_store_f16, check_positions_matter,
                  check_xarray):
        check(refs, finished)


def long_input(path):
    """B=1, n=16384, d_model 64: --save entropy,output keeps no map (n^2
    float32 per head would be 1 GiB each)."""
    g = np.random.default_rng(19)
    D, n = 64, 16384
    with h5py.File(path, "w") as f:
        f["X"] = g.standard_normal((1, n, D)).astype(np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (g.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
        f["b_O"] = (0.2 * g.standard_normal(D)).astype(np.float32)


def long_check(src, out):
    rows = [0, 1, 2, 777, 8191, 12345, 16383]
    with h5py.File(src, "r") as f:
        a = {k: f[k][...] for k in ("X", "W_Q", "W_K", "W_V", "W_O", "b_O")}
    ref = R.self_attention_rows(a["X"], a["W_Q"], a["W_K"], a["W_V"], a["W_O"], rows,
                                bo=a["b_O"], heads=4)
    with h5py.File(out, "r") as f:
        names = sorted(k for k in f if f[k].attrs.get("attnrun_role") in (b"result", "result"))
        if names != ["entropy", "output"]:
            print("FAIL n=16384: result datasets %s" % names)
        if f["entropy"].shape != (1, 4, 16384) or f["entropy"].dtype != np.float32:
            print("FAIL n=16384: entropy %s %s" % (f["entropy"].shape, f["entropy"].dtype))
            return
        ent = f["entropy"][:, :, rows].astype(np.float64)
        outp = f["output"][:, rows].astype(np.float64)
    tol = 1e-5 * math.log(16384)
    err = float(np.abs(ent - ref["entropy"]).max())
    if err <= tol:
        print("ok n=16384: entropy of rows %s within %.2g of the reference (error %.2g; values %.3f..%.3f)"
              % (rows, tol, err, ref["entropy"].min(), ref["entropy"].max()))
    else:
        print("FAIL n=16384: entropy error %.3g > %.3g" % (err, tol))
    big = float(np.abs(ref["output"]).max())
    err = float(np.abs(outp - ref["output"]).max())
    if err <= 1e-4 * big:
        print("ok n=16384: output of the same rows within 1e-4 of their largest magnitude")
    else:
        print("FAIL n=16384: output error %.3g > %.3g" % (err, 1e-4 * big))


COMMANDS = {"make": (make, 1), "verify": (verify, 2), "long-input": (long_input, 1),
            "long-check": (long_check, 2)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]][0](*sys.argv[2:])
