#!/usr/bin/env python3
"""tests/ref/heads_ref.py - float64 reference for `attnrun heads`, the census
of attention heads, written from its definitions (never from attnrun's
output), and the checks of tests/cli/test_heads.sh.

The scores follow the head detectors of TransformerLens
(transformer_lens.head_detector: previous-token, duplicate-token and
induction heads scored by the attention a head puts where such a head
would) and the induction and previous-token heads of Olsson et al. 2022,
"In-context Learning and Induction Heads".  For a layer's weights W (B, H,
n, m), each head's score is a mean over the (item, query) rows p = W[b, h,
q] that are not all zero (a query that sees no key is left out):

    entropy    -sum_k p_k ln p_k (0 ln 0 = 0)
    distance   sum_k p_k |q - k|
    first      p_0
    previous   p_(q-1), over the rows with 1 <= q <= m
    self       p_q, over the rows with q < m
    duplicate  sum of p_k over the keys k < q with key_token[k] ==
               query_token[q], over the rows that have such a key
    induction  sum of p_k over the keys 1 <= k <= q (k < m) with
               key_token[k-1] == query_token[q], over the rows that have one

A score no row qualifies for is empty in the CSV (NaN in the census file);
one whose rows hold a NaN is "nan".  The loops below are plain loop-nests
over every (item, head, query, key), in Python floats (float64).

    python3 tests/ref/heads_ref.py               self-checks: the cmocka case
                                                 and the constructed heads
    python3 tests/ref/heads_ref.py make DIR      the inputs of test_heads.sh
    python3 tests/ref/heads_ref.py csv RESULTS CSV GROUP...
        every field of the CSV attnrun heads printed for RESULTS against
        the reference of the groups' weights and tokens (read with h5py)
    python3 tests/ref/heads_ref.py census RESULTS CENSUS VERSION GROUP...
        the census file: datasets, shapes, axes and their dimension scales,
        layer_group, attributes, values against the reference
    python3 tests/ref/heads_ref.py masked RESULTS GROUP
        the group has a query row of weights that is all zero (the case
        of a query that sees no key is there to be left out)
    python3 tests/ref/heads_ref.py constructed CSV [CENSUS]
        the heads of DIR/induction.h5 (see `make`) against the scores
        their construction predicts, worked out by hand below
    python3 tests/ref/heads_ref.py uniform CSV
        DIR/huge.h5's one head of uniform rows against its closed form

Each command prints a detail line and exits 0, or prints why and exits 1
(tests/ref/subcommands.py).
"""
import csv
import io
import math
import os
import sys

import numpy as np
import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from subcommands import check, fail, run  # noqa: E402  (tests/ref/subcommands.py)

SCORES = ("entropy", "distance", "first", "previous", "self", "duplicate", "induction")
TOKEN_SCORES = ("duplicate", "induction")
HEADER = "layer,head," + ",".join(SCORES)
UTF8 = h5py.string_dtype("utf-8")

# CSV values carry 9 significant digits; the file's float64 values differ
# from the reference only by the order of the sums.
CSV_RTOL, H5_RTOL, ATOL = 2e-8, 1e-12, 1e-12


# ------------------------------------------------------------------ reference

def census(W, qtok=None, ktok=None):
    """{score: (sums (H,), rows (H,))} of weights W (B, H, n, m); qtok (B, n)
    and ktok (B, m) lists of strings, or None (no token scores)."""
    W = np.asarray(W, np.float64)
    B, H, n, m = W.shape
    sums = {s: [0.0] * H for s in SCORES}
    rows = {s: [0] * H for s in SCORES}

    def add(s, h, v):
        sums[s][h] += v
        rows[s][h] += 1

    for b in range(B):
        for h in range(H):
            for q in range(n):
                p = [float(x) for x in W[b, h, q]]
                if all(x == 0 for x in p):            # NaN != 0: a NaN row counts
                    continue
                add("entropy", h, -sum(x * math.log(x) for x in p if x != 0))
                add("distance", h, sum(x * abs(q - k) for k, x in enumerate(p)))
                add("first", h, p[0])
                if 1 <= q <= m:
                    add("previous", h, p[q - 1])
                if q < m:
                    add("self", h, p[q])
                if qtok is None:
                    continue
                t = qtok[b][q]
                dup = [k for k in range(min(q, m)) if ktok[b][k] == t]
                if dup:
                    add("duplicate", h, sum(p[k] for k in dup))
                ind = [k for k in range(1, min(q + 1, m)) if ktok[b][k - 1] == t]
                if ind:
                    add("induction", h, sum(p[k] for k in ind))
    return {s: (np.array(sums[s]), np.array(rows[s])) for s in SCORES}


def score(c, s):
    """The means of score s of census c: (H,), NaN where no row qualified."""
    total, count = c[s]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def read_layer(path, group):
    """(W (B, H, n, m) float64, qtok, ktok) of the group, read with h5py.
    attnrun heads reads the weights as float32 (attn_results_read), so
    float64 weights are rounded to float32 first."""
    with h5py.File(path, "r") as f:
        g = f[group]
        W = np.asarray(g["weights"][...], np.float32).astype(np.float64)
        if W.ndim == 3:
            W = W[None]
        B, _, n, m = W.shape
        if "query_token" not in g or "key_token" not in g:
            return W, None, None

        def tokens(name, length):
            t = g[name][...]
            rows = [t] * B if t.ndim == 1 else list(t)
            return [[text(v) for v in r] for r in rows]
        return W, tokens("query_token", n), tokens("key_token", m)


# ------------------------------------------------------------------ self-checks

def close(a, b, tol=1e-12):
    return abs(a - b) <= tol * max(1.0, abs(b))


def self_test():
    # the cmocka case of tests/unit/test_math.c, worked by hand there
    W = np.array([[[[1, 0, 0], [0.75, 0.25, 0], [0.25, 0.5, 0.25]]],
                  [[[0, 0, 0], [0, 1, 0], [0.5, 0, 0.5]]]])
    tok = [["A", "B", "A"]] * 2
    c = census(W, tok, tok)
    h = (-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
         - (0.5 * math.log(0.25) + 0.5 * math.log(0.5)) - math.log(0.5)) / 5
    want = {"entropy": h, "distance": 0.55, "first": 0.5, "previous": 0.3125, "self": 0.6,
            "duplicate": 0.375, "induction": 0.25}
    for s, v in want.items():
        if not close(score(c, s)[0], v):
            fail("self-check: %s is %r, by hand %r" % (s, score(c, s)[0], v))
    # no tokens: the token scores qualify no row
    c = census(W)
    if not all(np.isnan(score(c, s)[0]) for s in TOKEN_SCORES):
        fail("self-check: token scores without tokens")
    # the constructed heads against their closed forms
    W, tok = constructed_weights(np.random.default_rng(5))
    c = census(W, tok, tok)
    why = constructed_problem({s: score(c, s) for s in SCORES}, 1e-12)
    check(why and "self-check, constructed heads: " + why)
    print("the reference agrees with the hand-worked case and the constructed heads")


# ------------------------------------------------------------------ inputs

L_HALF = 8          # the constructed heads' sequence: L_HALF tokens, then again
CONSTRUCTED_B = 2
HUGE = (256, 1, 1024, 1024)     # huge.h5: (B, H, n, m) of uniform rows, mostly fill


def constructed_weights(rng):
    """Weights (B, 3, 2L, 2L) of three heads built from their definitions
    and the tokens (B, 2L): per item, L distinct random tokens then the
    same L again.
      head 0, induction: query q = L + i (second half) puts 1 on key i + 1,
        the key after the previous occurrence of its token; the first half
        puts 1 on key 0;
      head 1, previous token: 1 on key q - 1, query 0 on itself;
      head 2, uniform causal: 1 / (q + 1) on each key k <= q."""
    L, n = L_HALF, 2 * L_HALF
    W = np.zeros((CONSTRUCTED_B, 3, n, n))
    tok = []
    for b in range(CONSTRUCTED_B):
        first = ["w%d" % t for t in rng.choice(1000, L, replace=False)]
        tok.append(first + first)
        for q in range(n):
            W[b, 0, q, q - L + 1 if q >= L else 0] = 1
            W[b, 1, q, max(q - 1, 0)] = 1
            W[b, 2, q, :q + 1] = 1 / (q + 1)
    return W, tok


def constructed_problem(got, tol):
    """'' when got ({score: (3,)}) holds the constructed heads' scores, else
    why.  By hand, with N = 2L queries per item (every item alike) and
    H_j the harmonic numbers:
      induction head: one-hot rows, entropy 0; first half on key 0 (L rows
        of distance q), second half at distance L - 1; first = L / N; the
        first half's tokens are distinct, so only the second half has an
        earlier occurrence (key i, weight 0: duplicate 0) and a key after
        one (key i + 1, weight 1: induction 1); previous: only q = 1 (q - 1
        = 0), as L > 2; self: only q = 0.
      previous-token head: previous 1, first 2 / N (q = 0 and 1), self
        1 / N, distance (N - 1) / N; key i and key i + 1 are never q - 1
        when L > 2: duplicate 0, induction 0.
      uniform head: entropy mean of ln(q + 1), distance mean of q / 2,
        first = self = H_N / N, previous = (H_N - 1) / (N - 1); duplicate
        and induction, second half only, one key each of weight
        1 / (q + 1): (H_N - H_L) / L."""
    L, N = L_HALF, 2 * L_HALF
    harmonic = lambda j: sum(1.0 / i for i in range(1, j + 1))  # noqa: E731
    want = {
        "entropy": [0, 0, sum(math.log(q + 1) for q in range(N)) / N],
        "distance": [(L * (L - 1) / 2 + L * (L - 1)) / N, (N - 1) / N,
                     sum(q / 2 for q in range(N)) / N],
        "first": [L / N, 2 / N, harmonic(N) / N],
        "previous": [1 / (N - 1), 1, (harmonic(N) - 1) / (N - 1)],
        "self": [1 / N, 1 / N, harmonic(N) / N],
        "duplicate": [0, 0, (harmonic(N) - harmonic(L)) / L],
        "induction": [1, 0, (harmonic(N) - harmonic(L)) / L],
    }
    for s in SCORES:
        for h in range(3):
            v = got[s][h]
            if not (abs(v - want[s][h]) <= tol * max(1.0, abs(want[s][h]))):
                return "head %d: %s is %r, the construction gives %r" % (h, s, v, want[s][h])
    return ""


def layer_inputs(f, rng, D, X, Y=None, kv_heads=None):
    """X (and Y) with weights W_Q, W_O (D, D) and W_K, W_V (D, D / 4 * G)
    for H = 4 heads of d = D / 4 and G K/V heads (default 4)."""
    G = kv_heads or 4
    f["X"] = X.astype(np.float32)
    if Y is not None:
        f["Y"] = Y.astype(np.float32)
    for name, cols in (("W_Q", D), ("W_K", D // 4 * G), ("W_V", D // 4 * G), ("W_O", D)):
        f[name] = (rng.standard_normal((D, cols)) / np.sqrt(D)).astype(np.float32)


def make(d):
    rng = np.random.default_rng(20260512)
    D = 8
    # self-attention, B = 3, n = 9; GQA: 2 K/V heads for 4 query heads
    with h5py.File(os.path.join(d, "in_self.h5"), "w") as f:
        layer_inputs(f, rng, D, rng.standard_normal((3, 9, D)), kv_heads=2)
        f["tok"] = np.array([["a", "b", "c", "a", "b", "d", "a", "b", "c"],
                             ["x", "x", "x", "y", "x", "y", "y", "z", "x"],
                             ["p", "q", "r", "s", "p", "q", "r", "s", "t"]], dtype=UTF8)
        f["tok1"] = np.array(["the", "cat", "the", "dog", "cat", "the", "end", "the", "cat"],
                             dtype=UTF8)
        f["distinct"] = np.array([["t%d%d" % (b, i) for i in range(9)] for b in range(3)],
                                 dtype=UTF8)
        # item 0 hides key 0: under --causal its query 0 sees no key
        mask = np.ones((3, 9), np.int8)
        mask[0, 0] = 0
        mask[1, 3] = 0
        mask[2, [2, 5]] = 0
        f["mask"] = mask
    # cross-attention: n = 7 queries, m = 4 keys, B = 2
    with h5py.File(os.path.join(d, "in_cross.h5"), "w") as f:
        layer_inputs(f, rng, D, rng.standard_normal((2, 7, D)), Y=rng.standard_normal((2, 4, D)))
        f["qt"] = np.array([["u", "v", "u", "w", "v", "u", "w"],
                            ["a", "a", "b", "a", "c", "b", "a"]], dtype=UTF8)
        f["kt"] = np.array([["v", "u", "w", "u"], ["a", "b", "a", "c"]], dtype=UTF8)
    # rank-2 X: weights (H, n, m)
    with h5py.File(os.path.join(d, "in_rank2.h5"), "w") as f:
        layer_inputs(f, rng, D, rng.standard_normal((6, D)))
        f["tok"] = np.array(["a", "b", "a", "b", "a", "c"], dtype=UTF8)
    # a layer of 2 heads (d = 4), for a census of layers that differ
    with h5py.File(os.path.join(d, "in_two.h5"), "w") as f:
        f["X"] = rng.standard_normal((3, 9, D)).astype(np.float32)
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            f[name] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    # the constructed heads, written by hand at the root (no attribute of attnrun's)
    W, tok = constructed_weights(rng)
    with h5py.File(os.path.join(d, "induction.h5"), "w") as f:
        f["weights"] = W
        f["query_token"] = np.array(tok, dtype=UTF8)
        f["key_token"] = np.array(tok, dtype=UTF8)
    # by hand: a NaN in a row, weights of the wrong rank, tokens of another length
    with h5py.File(os.path.join(d, "odd.h5"), "w") as f:
        w = np.array([[[[1, 0, 0], [0.5, np.nan, 0], [0.25, 0.25, 0.5]],
                       [[0, 0, 0], [0.5, 0.5, 0], [0, 0.5, 0.5]]]], np.float32)
        f["nan/weights"] = w
        f["nan/query_token"] = np.array(["a", "b", "a"], dtype=UTF8)
        f["nan/key_token"] = np.array(["a", "b", "a"], dtype=UTF8)
        f["flat/weights"] = np.zeros((5, 7), np.float32)
        f["badtok/weights"] = w
        f["badtok/query_token"] = np.array(["a", "b"], dtype=UTF8)
        f["badtok/key_token"] = np.array(["a", "b", "a"], dtype=UTF8)
        f["ints/weights"] = np.zeros((1, 2, 3, 3), np.int32)
    # a group of results whose name a CSV field must quote
    with h5py.File(os.path.join(d, "quoted.h5"), "w") as f:
        g = f.create_group('a,"b"')
        g.attrs["attnrun_version"] = "1.6.0"
        g["weights"] = rng.dirichlet(np.ones(5), (2, 3, 4)).astype(np.float32)
    # uniform rows of 1/1024, B * n * m = 2^28 values (1 GiB), written as a
    # map in tiles is: one tile of each row of tiles (the diagonal's; a
    # results file whose rows of tiles are all unwritten is damaged), the
    # rest the fill value; deflated, the file stays small
    with h5py.File(os.path.join(d, "huge.h5"), "w") as f:
        ds = f.create_dataset("weights", HUGE, np.float32, chunks=(1, 1, 256, 256),
                              fillvalue=1 / 1024, compression="gzip", compression_opts=1)
        tile = np.full((1, 1, 256, 256), 1 / 1024, np.float32)
        for b in range(HUGE[0]):
            for r in range(0, HUGE[2], 256):
                ds[b:b + 1, :, r:r + 256, r:r + 256] = tile


# ------------------------------------------------------------------ the checks

def parse_csv(path):
    """(header line, [(layer, head, {score: field})]) of attnrun's CSV."""
    with open(path, newline="", encoding="utf-8") as f:
        content = f.read()
    lines = content.split("\n")
    if not content.endswith("\n"):
        fail("the CSV does not end with a newline")
    rows = []
    for r in list(csv.reader(io.StringIO(content)))[1:]:
        if len(r) != 2 + len(SCORES):
            fail("a CSV line of %d fields, not %d: %r" % (len(r), 2 + len(SCORES), r))
        rows.append((r[0], int(r[1]), dict(zip(SCORES, r[2:]))))
    return lines[0], rows


def field_problem(field, total, count, rtol):
    """'' when the CSV field states the mean total / count, else why."""
    if count == 0:
        return "" if field == "" else "%r where no row qualifies (expected empty)" % field
    want = total / count
    if math.isnan(want):
        return "" if field == "nan" else "%r, expected nan (a NaN in the weights)" % field
    try:
        got = float(field)
    except ValueError:
        return "%r is not a number (expected %.12g)" % (field, want)
    if not abs(got - want) <= ATOL + rtol * abs(want):
        return "%r, expected %.12g" % (field, want)
    return ""


def csv_check(results, csv_path, *groups):
    header, rows = parse_csv(csv_path)
    if header != HEADER:
        fail("header %r, expected %r" % (header, HEADER))
    at, counted, empty = 0, 0, 0
    for g in groups:
        W, qtok, ktok = read_layer(results, g)
        c = census(W, qtok, ktok)
        for h in range(W.shape[1]):
            if at >= len(rows):
                fail("the CSV ends before %s head %d" % (g, h))
            layer, head, fields = rows[at]
            at += 1
            if (layer, head) != (g, h):
                fail("line %d is %s head %d, expected %s head %d" % (at + 1, layer, head, g, h))
            for s in SCORES:
                why = field_problem(fields[s], c[s][0][h], c[s][1][h], CSV_RTOL)
                check(why and "%s head %d, %s: %s" % (g, h, s, why))
                counted += fields[s] != ""
                empty += fields[s] == ""
    if at != len(rows):
        fail("%d CSV lines more than the %d heads of %s" % (len(rows) - at, at, " ".join(groups)))
    print("%d lines, %d values, %d empty fields" % (at, counted, empty))


def scale_problem(f, d, axis, label, length):
    """'' when axis `axis` of dataset d is labelled and has the scale `label`
    (0 .. length-1) attached."""
    if d.dims[axis].label != label:
        return "%s: axis %d is labelled %r, not %r" % (d.name, axis, d.dims[axis].label, label)
    scales = list(d.dims[axis].values())
    if len(scales) != 1 or scales[0].name != "/" + label:
        return "%s: axis %d has the scales %r, not /%s" % (d.name, axis,
                                                          [s.name for s in scales], label)
    if not h5py.h5ds.is_scale(scales[0].id) or \
            not np.array_equal(scales[0][...], np.arange(length)):
        return "%s: /%s is not the scale 0 .. %d" % (d.name, label, length - 1)
    return ""


def census_check(results, path, version, *groups):
    layers = [read_layer(results, g) for g in groups]
    heads = {W.shape[1] for W, _, _ in layers}
    if len(heads) != 1:
        fail("the groups have different numbers of heads %s" % sorted(heads))
    H = heads.pop()
    tokens = all(q is not None for _, q, _ in layers)
    names = [s for s in SCORES if tokens or s not in TOKEN_SCORES]
    with h5py.File(path, "r") as f:
        found = sorted(f)
        want = sorted(names + ["layer_group", "layer", "head"])
        if found != want:
            fail("the census holds %s, expected %s" % (found, want))
        attrs = {k: text(f.attrs[k]) for k in f.attrs}
        expect = {"attnrun_version": version, "attnrun_analysis": "heads", "source": results}
        for k, v in expect.items():
            if attrs.get(k) != v:
                fail("root attribute %s is %r, expected %r" % (k, attrs.get(k), v))
        lg = f["layer_group"]
        if lg.dtype.kind != "O" or h5py.check_string_dtype(lg.dtype).encoding != "utf-8" or \
                [text(v) for v in lg[...]] != list(groups):
            fail("layer_group is %r (%s), expected %r" % (lg[...], lg.dtype, list(groups)))
        check(scale_problem(f, lg, 0, "layer", len(groups)))
        refs = [census(*layer) for layer in layers]
        for s in names:
            d = f[s]
            if d.dtype != np.float64 or d.shape != (len(groups), H):
                fail("%s is %s %s, expected float64 (%d, %d)" % (s, d.dtype, d.shape,
                                                                len(groups), H))
            check(scale_problem(f, d, 0, "layer", len(groups)) or
                  scale_problem(f, d, 1, "head", H))
            if text(d.attrs.get("coordinates", "")) != "layer_group":
                fail("%s: coordinates attribute %r" % (s, d.attrs.get("coordinates")))
            desc = text(d.attrs.get("description", ""))
            if "mean" not in desc or "not all zero" not in desc:
                fail("%s: its description does not state the definition: %r" % (s, desc))
            got = d[...]
            want = np.array([score(c, s) for c in refs])
            same = np.isclose(got, want, rtol=H5_RTOL, atol=ATOL) | (np.isnan(got) & np.isnan(want))
            if not same.all():
                i = tuple(int(j) for j in np.argwhere(~same)[0])
                fail("%s%s is %r, expected %r" % (s, list(i), got[i], want[i]))
    print("%d datasets of (%d, %d)" % (len(names), len(groups), H))


def masked(results, group):
    W, _, _ = read_layer(results, group)
    zero = int((W == 0).all(-1).sum())
    if zero == 0:
        fail("%s has no query row that is all zero" % group)
    print("%d all-zero rows" % zero)


def constructed(csv_path, census_path=None):
    header, rows = parse_csv(csv_path)
    if header != HEADER or [(r[0], r[1]) for r in rows] != [("/", 0), ("/", 1), ("/", 2)]:
        fail("lines %r, expected the three heads of /" % [(r[0], r[1]) for r in rows])
    got = {s: [float(r[2][s]) if r[2][s] not in ("", "nan") else math.nan for r in rows]
           for s in SCORES}
    check(constructed_problem(got, 1e-6))
    if census_path is not None:
        with h5py.File(census_path, "r") as f:
            check(constructed_problem({s: f[s][0] for s in SCORES}, 1e-6))


def uniform(csv_path):
    """Uniform rows 1/N over N = n = m keys: entropy ln N, first, previous
    and self 1/N, distance sum_q sum_k |q - k| / N^2 = (N^2 - 1) / (3N)."""
    _, rows = parse_csv(csv_path)
    N = HUGE[2]
    want = {"entropy": math.log(N), "distance": (N * N - 1) / (3 * N), "first": 1 / N,
            "previous": 1 / N, "self": 1 / N, "duplicate": math.nan, "induction": math.nan}
    if len(rows) != 1:
        fail("%d lines, expected 1" % len(rows))
    for s, v in want.items():
        field = rows[0][2][s]
        if math.isnan(v):
            if field != "":
                fail("%s is %r without tokens" % (s, field))
        elif not abs(float(field) - v) <= 1e-7 * v:
            fail("%s is %s, expected %.12g" % (s, field, v))


if __name__ == "__main__":
    if len(sys.argv) == 1:
        self_test()
    else:
        run({"make": make, "csv": csv_check, "census": census_check, "masked": masked,
             "constructed": constructed, "uniform": uniform}, __doc__)
