#!/usr/bin/env python3
"""tests/ref/view_check.py - the inputs of tests/cli/test_view.sh and the
checks of the page `attnrun view` writes, read as bytes (no browser: that
is view_browser.py):

  * every map's embedded values against the results file read with h5py:
    level 0 bit for bit; a pooled level's max (exact) and mean (a float64
    numpy mean, within one float32 rounding) over its 2^k x 2^k blocks;
    the thumbnail's max over its blocks; each map's colour bars against
    plot_check.bar_range (attnrun plot's bars, written from
    docs/pictures.md);
  * the tokens (cut after 120 bytes at a character's end, with an
    ellipsis), the census against heads_ref.census (float64, from the
    scores' definitions), the layers, the items;
  * the page's safety: a Content-Security-Policy whose hashes are those of
    the inline style and script (hashlib), no URL, no element that fetches,
    the hostile tokens nowhere as markup, exactly one JSON element.

    python3 tests/ref/view_check.py                  self-checks
    python3 tests/ref/view_check.py inputs DIR       the suite's results files
    python3 tests/ref/view_check.py page PAGE RESULTS [--rollout R] [--items 0,1]
                                     [--groups /a,/b] [--level K]
    python3 tests/ref/view_check.py level PAGE K     every layer at level K
Each check prints "ok ..." or "FAIL ..."; the status is 1 on a failure.
"""
import base64
import hashlib
import html.parser
import json
import math
import os
import re
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heads_ref    # noqa: E402  the census's float64 reference
import plot_check   # noqa: E402  attnrun plot's colour bars

UTF8 = h5py.string_dtype("utf-8")
TOKEN_BYTES = 120
THUMB_SIDE = 64

HOSTILE = [
    "<img src=x onerror=window.__pwned=1>",
    "</script><script>window.__pwned=1</script>",
    "\"'&amp;<!--",
    "\u2028\U0001F600",
]

failures = 0


def verdict(ok, name, why=""):
    global failures
    if ok:
        print("ok " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))


# ----------------------------------------------------------------- inputs

def normalised(rng, shape):
    w = rng.random(shape) ** 3
    return (w / w.sum(axis=-1, keepdims=True)).astype(np.float32)


def mark(f):
    """Marks every group holding weights as results (as attnrun does)."""
    f.visit(lambda name: f[name].attrs.__setitem__("attnrun_version", "hand-made")
            if isinstance(f[name], h5py.Group) else None)


def inputs(d):
    rng = np.random.default_rng(20261206)
    B, H, n = 3, 2, 6
    words = ["the", "cat", "sat", "on", "the", "mat"]
    with h5py.File(os.path.join(d, "hand.h5"), "w") as f:
        for g in ("a", "b", "c"):
            w = normalised(rng, (B, H, n, n))
            w[:, :, :, :] *= np.tril(np.ones((n, n), np.float32))
            w /= w.sum(axis=-1, keepdims=True)
            f[g + "/weights"] = w
            toks = [list(words), HOSTILE + ["x", "y"], ["é" * 100 + "z", "\u00e9", "a", "b", "c", "d"]]
            f[g + "/query_token"] = np.array(toks, dtype=UTF8)
            f[g + "/key_token"] = np.array(toks, dtype=UTF8)
    # values no softmax gives: a NaN, -inf, a negative value, rows summing to 3
    with h5py.File(os.path.join(d, "odd.h5"), "w") as f:
        w = normalised(rng, (1, 2, 4, 4)) * 3
        w[0, 0, 1, 2] = np.nan
        w[0, 0, 2, 1] = -np.inf
        w[0, 1, 3, 0] = -0.25
        f["l/weights"] = w
    # a long one (pooled under a small --max-size), cross-attention
    with h5py.File(os.path.join(d, "long.h5"), "w") as f:
        f["x/weights"] = normalised(rng, (2, 2, 300, 277))
    # one 1 MB token, tokens of the wrong length, and unusable layers
    with h5py.File(os.path.join(d, "bigtoken.h5"), "w") as f:
        f["a/weights"] = normalised(rng, (1, 1, 3, 3))
        f["a/query_token"] = np.array(["q" * (1 << 20), "b", "c"], dtype=UTF8)
        f["a/key_token"] = np.array(["k" * (1 << 20), "b", "c"], dtype=UTF8)
    with h5py.File(os.path.join(d, "wronglen.h5"), "w") as f:
        f["a/weights"] = normalised(rng, (1, 1, 3, 3))
        f["a/query_token"] = np.array(["a", "b"], dtype=UTF8)
        f["a/key_token"] = np.array(["a", "b"], dtype=UTF8)
    with h5py.File(os.path.join(d, "heads.h5"), "w") as f:
        f["a/weights"] = normalised(rng, (1, 2, 3, 3))
        f["b/weights"] = normalised(rng, (1, 3, 3, 3))
    with h5py.File(os.path.join(d, "noweights.h5"), "w") as f:
        f["a/mean"] = normalised(rng, (1, 3, 3))
    with h5py.File(os.path.join(d, "many.h5"), "w") as f:
        f["a/weights"] = normalised(rng, (20, 1, 2, 2))
    with h5py.File(os.path.join(d, "empty.h5"), "w") as f:
        f["a/weights"] = np.zeros((1, 2, 0, 0), np.float32)
    for name in os.listdir(d):
        if name.endswith(".h5"):
            with h5py.File(os.path.join(d, name), "a") as f:
                mark(f)


# ----------------------------------------------------------------- the page

class Elements(html.parser.HTMLParser):
    """The page's elements: their tags and attributes, and the text of
    each script and style element."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.tags = []
        self.text = {}
        self.open = None
        self.scripts = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag in ("script", "style"):
            self.open = (tag, attrs, [])

    def handle_data(self, data):
        if self.open is not None:
            self.open[2].append(data)

    def handle_endtag(self, tag):
        if self.open is not None and tag == self.open[0]:
            self.scripts.append((self.open[0], self.open[1], "".join(self.open[2])))
            self.open = None


def parse(path):
    raw = open(path, "rb").read()
    p = Elements()
    p.feed(raw.decode("utf-8"))
    p.close()
    return raw, p


def decode(text):
    data = base64.b64decode(text.strip(), validate=True)
    return np.frombuffer(data, dtype="<f4")


def pool(values, k, how):
    """values (n, m) float64 pooled over 2^k x 2^k blocks (the last ones
    smaller): their max (NaN wins) or mean."""
    n, m = values.shape
    s = 1 << k
    rows, cols = -(-n // s), -(-m // s)
    out = np.empty((rows, cols), np.float64)
    for r in range(rows):
        for c in range(cols):
            block = values[r * s:(r + 1) * s, c * s:(c + 1) * s]
            if how == "max":
                out[r, c] = np.nan if np.isnan(block).any() else block.max()
            else:
                out[r, c] = block.sum() / block.size
    return out


def thumb_level(n, m):
    k = 0
    while -(-n // (1 << k)) > THUMB_SIDE or -(-m // (1 << k)) > THUMB_SIDE:
        k += 1
    return k


def shown_token(t):
    b = t.encode("utf-8")
    if len(b) <= TOKEN_BYTES:
        return t
    cut = TOKEN_BYTES
    while cut > 0 and (b[cut] & 0xC0) == 0x80:
        cut -= 1
    return b[:cut].decode("utf-8") + "\u2026"


def same_f32(got, want):
    """got (float32) against want (float64): equal, within one float32
    rounding, NaN where NaN, the same infinities."""
    want32 = want.astype(np.float32)
    both_nan = np.isnan(got) & np.isnan(want32)
    eq = (got == want32) | both_nan
    close = np.abs(got.astype(np.float64) - want) <= np.spacing(np.abs(want32)).astype(np.float64)
    return bool(np.all(eq | (close & np.isfinite(want))))


def check_map(name, meta, elements, mid, values, level, start):
    n, m = values.shape
    e = meta["maps"][mid]
    tl = thumb_level(n, m)
    detail = min(level, tl)
    verdict(e["n"] == n and e["m"] == m and e["level"] == detail and e["thumb"] == tl,
            name + ": shape and levels", "%r, expected (%d, %d) at %d, thumb %d" % (e, n, m, detail, tl))
    got = decode(elements.get("m%d" % mid, ""))
    v64 = values.astype(np.float64)
    if detail == 0:
        want = values.astype(np.float32).reshape(-1)
        ok = got.size == want.size and np.array_equal(got.view(np.uint32), want.view(np.uint32))
        verdict(ok, name + ": full resolution, bit for bit", "%d values, expected %d" % (got.size, want.size))
    else:
        mx, mean = pool(v64, detail, "max"), pool(v64, detail, "mean")
        means = decode(elements.get("a%d" % mid, ""))
        ok = got.size == mx.size and means.size == mean.size and \
            same_f32(got, mx.reshape(-1)) and same_f32(means, mean.reshape(-1))
        verdict(ok, name + ": level %d, each block's max and mean" % detail,
                "%d and %d values, expected %d" % (got.size, means.size, mx.size))
    if tl > detail:
        t = decode(elements.get("t%d" % mid, ""))
        want = pool(v64, tl, "max").reshape(-1)
        verdict(t.size == want.size and same_f32(t, want), name + ": thumbnail, max of level %d" % tl,
                "%d values, expected %d" % (t.size, want.size))
    else:
        verdict(("t%d" % mid) not in elements, name + ": no thumbnail beside a small level")
    for i, colour in enumerate(("linear", "sqrt", "log")):
        want = plot_check.bar_range(values, start, colour)
        got_bar = e["bars"][i]
        ok = all(math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300) for a, b in zip(got_bar, want))
        verdict(ok, name + ": %s colour bar" % colour, "%r, expected %r" % (got_bar, want))
    specials = (1 if np.isneginf(values).any() else 0) | (2 if np.isposinf(values).any() else 0) | \
        (4 if np.isnan(values).any() else 0)
    verdict(e["specials"] == specials, name + ": special values named", "%r, expected %r" % (e["specials"], specials))


def check_page(page, results, rollout=None, items=None, groups=None, level=None):
    raw, p = parse(page)
    jsons = [s for s in p.scripts if s[1].get("type") == "application/json"]
    verdict(len(jsons) == 1 and jsons[0][1].get("id") == "attnrun-meta", "one JSON element, attnrun-meta")
    meta = json.loads(jsons[0][2])
    elements = {s[1]["id"]: s[2] for s in p.scripts if s[1].get("type") == "application/octet-stream"}
    groups = groups or [x["group"] for x in meta["layers"]]
    verdict([x["group"] for x in meta["layers"]] == groups, "the layers, in order",
            "%r, expected %r" % ([x["group"] for x in meta["layers"]], groups))
    with h5py.File(results, "r") as f:
        B = f[groups[0].rstrip("/") + "/weights"].shape[0]
        items = items if items is not None else list(range(min(B, 16)))
        verdict(meta["items"] == items and meta["batch"] == B, "the items shown",
                "%r of %r, expected %r of %d" % (meta["items"], meta["batch"], items, B))
        H = meta["heads"]
        RL = len(meta["rollout"]["groups"]) if meta["rollout"] else 0
        per = len(groups) * H + RL
        verdict(len(meta["maps"]) == len(items) * per, "an entry per map",
                "%d, expected %d" % (len(meta["maps"]), len(items) * per))
        lv = level if level is not None else meta["level"]
        for i, b in enumerate(items):
            for l, g in enumerate(groups):
                W = f[g.rstrip("/") + "/weights"]
                for h in range(H):
                    check_map("item %d %s head %d" % (b, g, h), meta, elements, i * per + l * H + h,
                              np.asarray(W[b, h]), lv, "zero")
                check_tokens(meta, f, g, i, l, b)
        census_check(meta, f, groups)
    if rollout:
        with h5py.File(rollout, "r") as r:
            R = r["rollout"]
            for i, b in enumerate(items):
                for l in range(RL):
                    check_map("item %d rollout %d" % (b, l), meta, elements, i * per + len(groups) * H + l,
                              np.asarray(R[b, l]), lv, "zero")
    check_safety(raw, p)
    return meta


def check_tokens(meta, f, g, i, l, b):
    grp = f[g.rstrip("/")] if g != "/" else f
    slot = meta["itemTokens"][i][l]
    for axis, name in enumerate(("query_token", "key_token")):
        if name not in grp:
            verdict(slot[axis] == -1, "item %d %s: no %s" % (b, g, name))
            continue
        t = grp[name]
        want = [x.decode("utf-8") if isinstance(x, bytes) else x
                for x in (t[b] if t.ndim == 2 else t[()])]
        got = meta["tokens"][slot[axis]] if slot[axis] >= 0 else None
        verdict(got == [shown_token(x) for x in want], "item %d %s: %s as text" % (b, g, name),
                "%r" % (got[:3] if got else got))


def census_check(meta, f, groups):
    names = meta["census"]["names"]
    for l, g in enumerate(groups):
        grp = f[g.rstrip("/")] if g != "/" else f
        W = np.asarray(grp["weights"], np.float64)
        if W.ndim == 3:
            W = W[None]
        qtok = ktok = None
        if "query_token" in grp:
            def strings(d):
                rows = d[()] if d.ndim == 2 else [d[()]] * W.shape[0]
                return [[heads_ref.text(x) for x in row] for row in rows]
            qtok, ktok = strings(grp["query_token"]), strings(grp["key_token"])
        try:
            ref = heads_ref.census(W, qtok, ktok)
        except ValueError:
            print("skip %s: the census of values no softmax gives (heads_ref takes logs)" % g)
            continue
        bad = []
        for k, name in enumerate(names):
            means = heads_ref.score(ref, name)
            for h in range(W.shape[1]):
                want = None if ref[name][1][h] == 0 else float(means[h])
                got = meta["census"]["scores"][l][h][k]
                if want is None:
                    ok = got is None
                elif math.isnan(want):
                    ok = got == "nan"
                else:
                    ok = isinstance(got, (float, int)) and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
                if not ok:
                    bad.append("head %d %s %r, expected %r" % (h, name, got, want))
        verdict(not bad, "%s: the census, each score against heads_ref" % g, "; ".join(bad[:3]))


def check_safety(raw, p):
    text = raw.decode("utf-8")
    metas = [a for t, a in p.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    csp = metas[0]["content"] if metas else ""
    verdict("default-src 'none'" in csp, "a Content-Security-Policy forbids everything by default", csp)
    inline = {t: s for t, a, s in p.scripts if t == "style" or (t == "script" and "type" not in a)}
    for tag, directive in (("script", "script-src"), ("style", "style-src")):
        digest = base64.b64encode(hashlib.sha256(inline.get(tag, "").encode("utf-8")).digest()).decode()
        verdict(("%s 'sha256-%s'" % (directive, digest)) in csp, "the CSP allows the inline %s by its hash" % tag, csp)
    fetching = [(t, a) for t, a in p.tags if (t in ("img", "link", "iframe", "object", "embed", "audio", "video", "source")
                or (t == "script" and "src" in a))]
    verdict(not fetching, "no element that fetches", repr(fetching[:3]))
    urls = re.findall(r"(?:https?|ftp|wss?)://[^\s\"'<>]+", text)
    verdict(not urls, "no URL anywhere in the page", repr(urls[:3]))
    for h in HOSTILE:
        if "<" in h or ">" in h or "&" in h:
            verdict(h not in text, "hostile token %r is not in the page as written" % h[:20])
    verdict(text.rstrip().endswith("</html>") and text.count("</html>") == 1, "the page is whole: one </html>, at its end")


def check_level(page, level):
    raw, p = parse(page)
    meta = json.loads([s for s in p.scripts if s[1].get("type") == "application/json"][0][2])
    verdict(meta["level"] == level, "the page's maps at level %d" % level, repr(meta["level"]))


def self_test():
    v = np.arange(15, dtype=np.float64).reshape(3, 5)
    assert pool(v, 1, "max").tolist() == [[6, 8, 9], [11, 13, 14]]
    assert pool(v, 1, "mean").tolist() == [[3, 5, 6.5], [10.5, 12.5, 14]]
    w = v.copy()
    w[0, 0] = np.nan
    assert math.isnan(pool(w, 1, "max")[0, 0]) and math.isnan(pool(w, 1, "mean")[0, 0])
    assert thumb_level(64, 64) == 0 and thumb_level(65, 3) == 1 and thumb_level(300, 277) == 3
    assert shown_token("a" * 120) == "a" * 120
    assert shown_token("é" * 61) == "é" * 60 + "\u2026"       # 122 bytes: cut at 120
    assert shown_token("a" + "é" * 60) == "a" + "é" * 59 + "\u2026"
    assert decode(base64.b64encode(np.array([1.5, -2], "<f4").tobytes()).decode()).tolist() == [1.5, -2]
    print("view_check self-test: pooling, levels, tokens, base64")


def main(argv):
    if len(argv) == 1:
        self_test()
        return 0
    if argv[1] == "inputs":
        inputs(argv[2])
        return 0
    if argv[1] == "level":
        check_level(argv[2], int(argv[3]))
        return 1 if failures else 0
    if argv[1] == "page":
        opts = {"rollout": None, "items": None, "groups": None, "level": None}
        rest = argv[4:]
        while rest:
            key, value = rest[0].lstrip("-"), rest[1]
            rest = rest[2:]
            if key == "items":
                opts["items"] = [int(x) for x in value.split(",")]
            elif key == "groups":
                opts["groups"] = value.split(",")
            elif key == "level":
                opts["level"] = int(value)
            else:
                opts[key] = value
        check_page(argv[2], argv[3], **opts)
        return 1 if failures else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
