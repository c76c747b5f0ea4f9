"""tests/ref/plot_check.py - what docs/pictures.md requires of `attnrun plot`,
written here from that page's words (never from attnrun's output), for
tests/cli/test_plot.sh.

  * png_read: a PNG decoder of its own (zlib and struct only): IHDR,
    IDAT, the five row filters, 8-bit RGB and RGBA, no interlacing.
  * colour_at: the colour map, viridis as the nine control points
    docs/pictures.md lists (R's viridisLite::viridis(9)), interpolated
    linearly in sRGB and rounded to the nearest integer.
  * layout: docs/pictures.md's layout formulas (cell, panel, grid,
    picture, panel origin, colour bar, legend).
  * pool: max-pooling with numpy (NaN wins, -inf only when a whole cell is).

    python3 tests/ref/plot_check.py              # self-checks
    python3 tests/ref/plot_check.py make DIR     # the fixtures of test_plot.sh
    python3 tests/ref/plot_check.py verify DIR   # checks the pictures test_plot.sh drew

verify prints "ok NAME" or "FAIL NAME: WHY" per check.
"""
import math
import os
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

import numpy as np

# ------------------------------------------------------------------ PNG


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_read(path):
    """(height, width, 3) uint8 array of an 8-bit RGB or RGBA PNG (alpha dropped)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG signature")
    at, idat, header = 8, [], None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        crc, = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"{path}: bad CRC in {kind!r}")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        at += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    if len(raw) != height * (stride + 1):
        raise ValueError(f"{path}: {len(raw)} bytes of rows, expected {height * (stride + 1)}")
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.int64)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) % 256
        elif kind == 1:                       # Sub: a running sum per channel
            cur = line.reshape(width, bpp).cumsum(axis=0).reshape(-1) % 256
        elif kind in (3, 4):
            cur, p, l = [0] * stride, prev.tolist(), line.tolist()
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                c = p[i - bpp] if i >= bpp else 0
                pred = (a + p[i]) // 2 if kind == 3 else paeth(a, p[i], c)
                cur[i] = (l[i] + pred) % 256
            cur = np.array(cur, np.int64)
        else:
            raise ValueError(f"{path}: row {y} has filter {kind}")
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)[:, :, :3]


def png_write(path, pixels, filters):
    """An RGB PNG whose row y uses filter filters[y % len(filters)] (self-check)."""
    h, w, _ = pixels.shape
    rows, prev = [], np.zeros(w * 3, np.int64)
    for y in range(h):
        cur, kind = pixels[y].reshape(-1).astype(np.int64), filters[y % len(filters)]
        enc = []
        for i in range(w * 3):
            a = int(cur[i - 3]) if i >= 3 else 0
            c = int(prev[i - 3]) if i >= 3 else 0
            b = int(prev[i])
            pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
            enc.append((int(cur[i]) - pred) % 256)
        rows.append(bytes([kind]) + bytes(enc))
        prev = cur

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))

# ---------------------------------------------------------- colour map

VIRIDIS = [0x440154, 0x472D7B, 0x3B528B, 0x2C728E, 0x21908C, 0x27AD81, 0x5DC863, 0xAADC32, 0xFDE725]
NEG_INF, POS_INF, NAN = (0xCC, 0xCC, 0xCC), (0xE4, 0x1A, 0x1C), (0xFF, 0x00, 0xFF)
WHITE = (255, 255, 255)


def rgb(word):
    return ((word >> 16) & 255, (word >> 8) & 255, word & 255)


def colour_at(t):
    t = min(max(t, 0.0), 1.0)
    x = t * 8
    i = min(int(math.floor(x)), 7)
    u = x - i
    a, b = rgb(VIRIDIS[i]), rgb(VIRIDIS[i + 1])
    return tuple(int(math.floor(a[c] + u * (b[c] - a[c]) + 0.5)) for c in range(3))


def position(v, lo, hi, colour="linear"):
    """Where a finite value sits on a bar of --color `colour` (not clamped):
    linear (v - lo) / (hi - lo); sqrt its square root (0 below lo); log
    (log10 v - log10 lo) / (log10 hi - log10 lo), 0 at or below lo."""
    if colour == "log":
        return 0.0 if v <= lo else (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
    t = (v - lo) / (hi - lo)
    if colour == "sqrt":
        return math.sqrt(t) if t > 0 else 0.0
    return t


def colour_of(v, lo, hi, colour="linear"):
    v = float(v)
    if math.isnan(v):
        return NAN
    if math.isinf(v):
        return NEG_INF if v < 0 else POS_INF
    return colour_at(position(v, lo, hi, colour))


def bar_range(values, start, colour="linear"):
    """A colour bar's range over the values drawn.  start: "zero" (weights,
    norms, mean, rollout: from 0), "min" (scores, entropy: from the
    smallest finite value), "unit" (a census's fractions: 0..1, widened to
    values outside).  Linear and sqrt: to the largest finite value, one wide
    when that would be empty.  Log: from the smallest positive value, but
    no lower than 1e-6 of the top, to the largest (1 at least for "unit");
    a decade when the two meet; 1e-6..1 when nothing is positive."""
    v = np.asarray(values, np.float64)
    fin = v[np.isfinite(v)]
    if colour == "log":
        pos = fin[fin > 0]
        if pos.size == 0:
            return 1e-6, 1.0
        hi = float(fin.max())
        hi = max(1.0, hi) if start == "unit" else hi
        lo = max(float(pos.min()), hi * 1e-6)
        return (lo, hi) if lo < hi else (hi / 10, hi)
    if start == "zero":
        lo = 0.0
    elif start == "unit":
        lo = min(0.0, float(fin.min())) if fin.size else 0.0
    else:
        lo = float(fin.min()) if fin.size else 0.0
    hi = float(fin.max()) if fin.size else lo
    hi = max(1.0, hi) if start == "unit" else hi
    return (lo, hi) if hi > lo else (lo, lo + max(1.0, abs(lo) * 2.0 ** -20))


def scale(values, from_zero, colour="linear"):
    """The colour scale's range: 0 (weights) or the smallest finite value,
    to the largest; one wide when that would be empty."""
    return bar_range(values, "zero" if from_zero else "min", colour)


def tick_rows(colour, lo, hi):
    """The pixel rows of a bar's ticks, 0 on top: top, middle, bottom
    (linear); top, the quarters, bottom (sqrt); the ends and every power of
    ten between that is not on an end's row (log)."""
    def row(t):
        return int(math.floor((BAR_H - 1) * (1 - t) + 0.5))
    if colour == "linear":
        return [row(t) for t in (1, 0.5, 0)]
    if colour == "sqrt":
        return [row(t) for t in (1, 0.75, 0.5, 0.25, 0)]
    top, bottom = math.log10(hi), math.log10(lo)
    rows = [row(1)]
    for k in range(math.floor(top), math.ceil(bottom) - 1, -1):
        r = row((k - bottom) / (top - bottom))
        if r not in (row(1), row(0)):
            rows.append(r)
    return rows + [row(0)]

# -------------------------------------------------------------- layout

MARGIN, TITLE_H, HEAD_TITLE_H, ROW_LABEL_W, COL_LABEL_H, GAP = 16, 28, 20, 80, 80, 16
BAR_COLUMN_W, BAR_OFFSET, BAR_W, BAR_H = 150, 24, 16, 160
LEGEND_OFFSET, LEGEND_STEP, SWATCH, FOOT_H, MIN_CONTENT_H, TARGET, POOL = 24, 18, 12, 36, 260, 256, 512
PANEL_BAR_W, PANEL_BAR_OFFSET = 96, 12


def pool_shape(length):
    f = -(-length // POOL)
    return f, -(-length // f)


def layout(panels, rows, cols, bar_per_panel=False):
    """docs/pictures.md's formulas for `panels` source maps of (rows, cols);
    bar_per_panel: each panel its own colour bar at its right (a census)."""
    fq, out_rows = pool_shape(rows)
    fk, out_cols = pool_shape(cols)
    L = dict(fq=fq, fk=fk, out_rows=out_rows, out_cols=out_cols)
    L["cell_w"] = max(1, TARGET // out_cols)
    L["cell_h"] = max(1, TARGET // out_rows)
    L["panel_w"], L["panel_h"] = L["cell_w"] * out_cols, L["cell_h"] * out_rows
    gc = math.ceil(math.sqrt(panels))
    gr = math.ceil(panels / gc)
    L["grid_cols"], L["grid_rows"] = gc, gr
    slot_w = ROW_LABEL_W + L["panel_w"] + (PANEL_BAR_W if bar_per_panel else 0)
    slot_h = HEAD_TITLE_H + L["panel_h"] + COL_LABEL_H
    grid_w = gc * slot_w + (gc - 1) * GAP
    grid_h = gr * slot_h + (gr - 1) * GAP
    L["width"] = MARGIN + grid_w + BAR_COLUMN_W + MARGIN
    L["height"] = MARGIN + TITLE_H + max(grid_h, MIN_CONTENT_H) + FOOT_H + MARGIN
    L["panels"] = [(MARGIN + (p % gc) * (slot_w + GAP) + ROW_LABEL_W,
                    MARGIN + TITLE_H + (p // gc) * (slot_h + GAP) + HEAD_TITLE_H) for p in range(panels)]
    L["bar"] = (MARGIN + grid_w + BAR_OFFSET, MARGIN + TITLE_H + HEAD_TITLE_H)
    L["bars"] = [(x + L["panel_w"] + PANEL_BAR_OFFSET, y) for x, y in L["panels"]]
    L["legend"] = (L["bar"][0], L["bar"][1] + (0 if bar_per_panel else BAR_H + LEGEND_OFFSET))
    return L


def pool(a, fq, fk):
    """Max-pooling of a 2-D map by fq x fk, the last cells partial."""
    a = np.asarray(a, np.float64)
    n, m = a.shape
    pad = np.full((-(-n // fq) * fq, -(-m // fk) * fk), -np.inf)
    pad[:n, :m] = a
    return pad.reshape(pad.shape[0] // fq, fq, pad.shape[1] // fk, fk).max(axis=(1, 3))

# ------------------------------------------------------------ self-test


def self_test():
    import tempfile
    assert colour_at(0) == (0x44, 0x01, 0x54) and colour_at(1) == (0xFD, 0xE7, 0x25)
    assert colour_at(0.5) == (0x21, 0x90, 0x8C) and colour_at(-3) == colour_at(0)
    # halfway between the first two points: (69.5, 23, 103.5) rounded half up
    assert colour_at(1 / 16) == (70, 23, 104), colour_at(1 / 16)
    assert colour_of(float("nan"), 0, 1) == NAN and colour_of(-np.inf, 0, 1) == NEG_INF
    L = layout(1, 4, 4)
    assert (L["cell_w"], L["panel_w"], L["width"], L["height"]) == (64, 256, 518, 452), L
    L = layout(3, 2000, 1100)
    assert (L["fq"], L["out_rows"], L["fk"], L["out_cols"], L["grid_cols"], L["grid_rows"]) == (4, 500, 3, 367, 2, 2)
    a = np.array([[1, -np.inf, -np.inf], [2, -np.inf, -np.inf], [np.nan, 0, -np.inf]])
    p = pool(a, 2, 2)
    assert p[0, 0] == 2 and p[0, 1] == -np.inf and np.isnan(p[1, 0]) and p[1, 1] == -np.inf
    assert scale([0.5, 0.5], False) == (0.5, 1.5) and scale([-np.inf, 2.0, 0.25], True) == (0.0, 2.0)
    assert bar_range([0, 1e-9, 0.5], "zero", "log") == (0.5e-6, 0.5)
    assert bar_range([0, 3e-5, 0.5], "zero", "log") == (3e-5, 0.5) and bar_range([0.0], "zero", "log") == (1e-6, 1)
    assert bar_range([0.25, np.nan], "unit") == (0.0, 1.0) and bar_range([0.25], "unit", "log") == (0.25, 1.0)
    assert position(0.25, 0, 1, "sqrt") == 0.5 and position(1e-3, 1e-6, 1, "log") == 0.5
    assert position(0, 1e-6, 1, "log") == 0 and position(-1, 0, 1, "sqrt") == 0
    assert tick_rows("linear", 0, 1) == [0, 80, 159] and tick_rows("sqrt", 0, 1) == [0, 40, 80, 119, 159]
    # decades 1e-1 .. 1e-4 of 3e-5 .. 0.5, 4.22 decades: 159 (k - log 3e-5) / 4.22 rows up
    assert tick_rows("log", 3e-5, 0.5) == [0, 26, 64, 102, 139, 159], tick_rows("log", 3e-5, 0.5)
    rng = np.random.default_rng(7)
    px = rng.integers(0, 256, (9, 7, 3)).astype(np.uint8)
    with tempfile.TemporaryDirectory() as d:
        png_write(f"{d}/x.png", px, [0, 1, 2, 3, 4])
        assert np.array_equal(png_read(f"{d}/x.png"), px)
    print("plot_check self-check: PNG decoder, colour map, layout, pooling: ok")

# ------------------------------------------------------------- fixtures


def strings(rows):
    import h5py
    return np.array(rows, dtype=h5py.string_dtype("utf-8"))


def make(d):
    import h5py
    rng = np.random.default_rng(20261201)
    B, H, n, m = 2, 3, 5, 7
    with h5py.File(f"{d}/known.h5", "w") as f:
        w = np.arange(B * H * n * m, dtype=np.float64).reshape(B, H, n, m) / 1000
        f["weights"] = w.astype("f4")            # all distinct; 0 at [0, 0, 0, 0]
        s = rng.standard_normal((B, H, n, m)).astype("f4")
        s[0, 0][np.triu_indices(n, 1, m)] = -np.inf
        s[0, 1, 2, 3] = np.nan
        s[0, 2, 1, 1] = np.inf
        s[0, 2, 3, 0] = np.nan
        f["scores"] = s
        f["entropy"] = (3 * rng.random((B, H, n))).astype("f4")
        f["query_token"] = strings([["The", "cat", "sat", "down", "."], ["a", "b", "c", "d", "e"]])
        f["key_token"] = strings([[f"k{i}" for i in range(m)]] * B)
        f["ints"] = np.zeros((B, H, n, m), np.int32)
        f["flat"] = np.zeros((n, m), np.float32)
        g = f.create_group("badtok")
        g["weights"] = w.astype("f4")
        g["query_token"] = strings([["x"] * (n + 1)] * B)
        g = f.create_group("numtok")
        g["weights"] = w.astype("f4")
        g["query_token"] = np.zeros((B, n), np.int32)
        g = f.create_group("intmap")
        g["weights"] = np.zeros((B, H, n, m), np.int32)
        g = f.create_group("flatmap")
        g["weights"] = np.zeros((n, m), np.float32)
    with open(f"{d}/outside.bin", "wb") as raw:      # what external storage would draw
        raw.write(np.ones(2 * 4 * 4, np.float32).tobytes())
    with h5py.File(f"{d}/external.h5", "w") as f:
        f.create_dataset("weights", (1, 2, 4, 4), np.float32,
                         external=[(f"{d}/outside.bin", 0, 2 * 4 * 4 * 4)])
    with h5py.File(f"{d}/damaged.h5", "w") as f:     # a deflated chunk, then garbled
        f.create_dataset("weights", data=rng.random((1, 2, 64, 64)).astype("f4"),
                         chunks=(1, 1, 64, 64), compression="gzip")
        at = f["weights"].id.get_chunk_info(0).byte_offset
    with open(f"{d}/damaged.h5", "r+b") as raw:
        raw.seek(at + 8)
        raw.write(b"\xff" * 64)
    with h5py.File(f"{d}/constant.h5", "w") as f:     # one large value: an empty range
        f["scores"] = np.full((1, 2, 4, 4), 1e20, np.float32)
    with h5py.File(f"{d}/rank3.h5", "w") as f:        # no batch axis: (H, n, m)
        f["weights"] = rng.random((2, 4, 6)).astype("f4")
        f["scores"] = rng.standard_normal((2, 4, 6)).astype("f8")
        f["entropy"] = rng.random((2, 4)).astype("f2")
    with h5py.File(f"{d}/big.h5", "w") as f:          # pooled 4 x 3, partial edge cells
        w = np.full((1, 1, 2000, 1100), 1e-4, np.float32)
        w[0, 0, 1234, 567] = 1.0
        w[0, 0, 1999, 1099] = 0.5
        f.create_dataset("weights", data=w, chunks=(1, 1, 256, 256))
        s = (0.01 * rng.standard_normal((1, 1, 2000, 1100))).astype("f4")
        s[0, 0][np.triu_indices(2000, 1, 1100)] = -np.inf
        s[0, 0, 10, 20] = np.nan
        f.create_dataset("scores", data=s, chunks=(1, 1, 256, 256))
    with h5py.File(f"{d}/elink.h5", "w") as f:        # a group in another file: not followed
        f["layer0"] = h5py.ExternalLink("known.h5", "/")
    # an index of --append (docs/append.md): /layer0 is an external link to
    # the group /layer0 of its part, which holds known.h5's datasets
    os.makedirs(f"{d}/index.h5.parts", exist_ok=True)
    with h5py.File(f"{d}/known.h5", "r") as src, \
            h5py.File(f"{d}/index.h5.parts/layer0.1.h5", "w") as part:
        group = part.create_group("layer0")
        for name in src:
            src.copy(src[name], group, name=name)
    with h5py.File(f"{d}/index.h5", "w") as f:
        f.attrs["attnrun_index"] = np.int64(1)
        f.attrs["attnrun_version"] = "1.6.0"
        f["layer0"] = h5py.ExternalLink("index.h5.parts/layer0.1.h5", "/layer0")
    with h5py.File(f"{d}/wide.h5", "w") as f:         # entropy of 600 heads: rows pooled too
        e = rng.random((2, 600, 700)).astype("f4")
        e[1, 0, 0] = np.nan
        f["entropy"] = e
    with h5py.File(f"{d}/huge.h5", "w") as f:         # 1 GiB of float32, nearly all fill
        ds = f.create_dataset("weights", shape=(1, 16384, 16384), dtype="f4", chunks=(1, 256, 256),
                              fillvalue=np.float32(1e-4))
        block = np.full((1, 256, 256), 1e-4, np.float32)
        for r in range(0, 16384, 256):           # a tile of each row of tiles, as
            ds[:, r:r + 256, r:r + 256] = block  # attnrun's maps in tiles hold
        block[0, 9000 - 8960, 7000 - 6912] = 1.0
        ds[:, 8960:9216, 6912:7168] = block
    with h5py.File(f"{d}/tokens.h5", "w") as f:       # the same maps, other tokens
        w = rng.random((1, 1, 4, 4)).astype("f4")
        f["weights"] = np.concatenate([w, w])
        f["query_token"] = strings([["a", "b", "c", "d"], ["wwwwww", "xxxxxx", "yyyyyy", "zzzzzz"]])
        f["key_token"] = strings(["k", "l", "m", "n"])
        g = f.create_group("same")
        g["weights"] = np.concatenate([w, w])
        g["query_token"] = strings([["a", "b", "c", "d"], ["a", "b", "c", "d"]])
    with h5py.File(f"{d}/many.h5", "w") as f:         # 100 tokens: every 10th label
        w = rng.random((1, 1, 100, 100)).astype("f4")
        f["weights"] = w
        f["query_token"] = strings([f"t{i}" for i in range(100)])
        f["key_token"] = strings([f"u{i}" for i in range(100)])
        f.create_group("plain")["weights"] = w        # no tokens: every 20th index

# ------------------------------------------------------------- checks

RESULTS = []


def check(name, good, why=""):
    RESULTS.append(good)
    print(f"ok {name}" if good else f"FAIL {name}: {why}")


def cell_colours(img, L, p):
    """The colour at the centre of every pooled cell of panel p: (out_rows, out_cols, 3)."""
    x0, y0 = L["panels"][p]
    ys = y0 + np.arange(L["out_rows"]) * L["cell_h"] + L["cell_h"] // 2
    xs = x0 + np.arange(L["out_cols"]) * L["cell_w"] + L["cell_w"] // 2
    return img[ys][:, xs].astype(np.int64)


def expected_colours(values, lo, hi, colour="linear"):
    return np.array([[colour_of(v, lo, hi, colour) for v in row] for row in values], np.int64)


def bar_ticks(img, bx, by):
    """The rows (0 on top) of the tick marks right of the bar at (bx, by)."""
    return [int(r) if r == int(r) else r for r in ink_runs(img[by:by + BAR_H, bx + BAR_W + 2])]


def check_maps(name, path, maps, from_zero, specials=None, colour="linear", start=None, ticks=True):
    """The picture at path shows maps (panels, rows, cols), in this order:
    its size, every pooled cell's colour on the --color scale, uniform
    cells, the colour bar and its ticks (unless not ticks), and the
    legend.  start: the scale's start ("zero", "min", "unit"), by default
    from_zero's."""
    try:
        img = png_read(path)
    except (OSError, ValueError) as e:
        check(name, False, str(e))
        return None
    maps = np.asarray(maps, np.float64)
    L = layout(len(maps), maps.shape[1], maps.shape[2])
    if img.shape[:2] != (L["height"], L["width"]):
        check(f"{name}: size", False, f"{img.shape[1]}x{img.shape[0]}, layout says {L['width']}x{L['height']}")
        return None
    check(f"{name}: size {L['width']}x{L['height']} as the layout says", True)
    lo, hi = bar_range(maps, start or ("zero" if from_zero else "min"), colour)
    worst, blocks = 0, True
    for p, a in enumerate(maps):
        pooled = pool(a, L["fq"], L["fk"])
        got = cell_colours(img, L, p)
        worst = max(worst, int(np.abs(got - expected_colours(pooled, lo, hi, colour)).max()))
        x0, y0 = L["panels"][p]
        panel = img[y0:y0 + L["panel_h"], x0:x0 + L["panel_w"]].astype(np.int64)
        cells = panel.reshape(L["out_rows"], L["cell_h"], L["out_cols"], L["cell_w"], 3)
        blocks = blocks and bool((cells == cells[:, :1, :, :1]).all())
    check(f"{name}: every cell's colour ({colour} range {lo:.6g}..{hi:.6g})", worst <= 1,
          f"a channel off by {worst}")
    check(f"{name}: each cell a block of equal pixels (no smoothing)", blocks, "pixels differ inside a cell")
    bx, by = L["bar"]
    bar = [tuple(int(c) for c in img[by + j, bx + BAR_W // 2]) for j in range(BAR_H)]
    want = [colour_at((BAR_H - 1 - j) / (BAR_H - 1)) for j in range(BAR_H)]
    off = max(abs(a - b) for g, w in zip(bar, want) for a, b in zip(g, w))
    check(f"{name}: colour bar from the top colour down to the bottom one", off <= 1, f"off by {off}")
    got, want = bar_ticks(img, bx, by), tick_rows(colour, lo, hi)
    if ticks:
        check(f"{name}: the bar's ticks at rows {want} ({colour})", got == want, f"ticks at {got}")
    if specials is not None:
        at = by + BAR_H + LEGEND_OFFSET + SWATCH // 2
        got = [tuple(int(c) for c in img[at + i * LEGEND_STEP, bx + SWATCH // 2]) for i in range(3)]
        want = list(specials) + [WHITE] * (3 - len(specials))
        check(f"{name}: legend swatches {len(specials)}", got == want, f"{got}, expected {want}")
    return img, L


def ink_runs(line):
    """Runs of non-white pixels along a line of pixels: their centres."""
    inked = (line < 200).any(axis=-1)
    runs, start = [], None
    for i, v in enumerate(list(inked) + [False]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            runs.append((start + i - 1) / 2)
            start = None
    return runs


def verify(d):
    import h5py
    with h5py.File(f"{d}/known.h5") as f:
        w, s, e = f["weights"][...], f["scores"][...], f["entropy"][...]
    check_maps("weights item 1", f"{d}/known_w1.png", w[1], True, specials=[])
    check_maps("weights item 0 heads 1", f"{d}/known_w0h1.png", w[0, 1:2], True)
    check_maps("scores heads 2,0", f"{d}/known_s.png", s[0, [0, 2]], False,
               specials=[NEG_INF, POS_INF, NAN])
    check_maps("scores of a group of an index of --append", f"{d}/index_s.png", s[0, [0, 2]], False,
               specials=[NEG_INF, POS_INF, NAN])
    check_maps("entropy item 1 heads 0,2", f"{d}/known_e.png", e[1, [0, 2]][None], False)
    with h5py.File(f"{d}/wide.h5") as f:
        check_maps("entropy of 600 heads by 700 queries, max-pooled 2x2", f"{d}/wide_e.png",
                   f["entropy"][1][None], False, specials=[NAN])
    with h5py.File(f"{d}/constant.h5") as f:
        check_maps("scores all 1e20 (an empty range past 2^53)", f"{d}/constant_s.png",
                   f["scores"][0], False)
    with h5py.File(f"{d}/rank3.h5") as f:
        check_maps("rank-3 weights", f"{d}/rank3_w.png", f["weights"][...], True)
        check_maps("rank-3 f64 scores", f"{d}/rank3_s.png", f["scores"][...], False)
        check_maps("rank-3 f16 entropy", f"{d}/rank3_e.png", f["entropy"][...][None], False)
    for store in ("f16", "bf16"):
        with h5py.File(f"{d}/toy_{store}.h5") as f:
            maps = f["scores"].astype("f4")[...]
        check_maps(f"--store {store} scores, as h5py reads them", f"{d}/toy_{store}.png", maps, False,
                   specials=[NEG_INF])
    with h5py.File(f"{d}/big.h5") as f:
        w, s = f["weights"][0], f["scores"][0]
    r = check_maps("max-pooled 4x3 weights", f"{d}/big_w.png", w, True)
    if r is not None:
        img, L = r
        x0, y0 = L["panels"][0]
        got = tuple(int(c) for c in img[y0 + 1234 // 4, x0 + 567 // 3])
        check("max-pooling keeps the single largest weight (top colour)", got == colour_at(1),
              f"{got}")
        got = tuple(int(c) for c in img[y0 + 499, x0 + 366])
        check("a partial edge cell keeps its largest weight", got == colour_at(0.5), f"{got}")
    r = check_maps("max-pooled causal scores with a NaN", f"{d}/big_s.png", s, False,
                   specials=[NEG_INF, NAN])
    if r is not None:
        img, L = r
        x0, y0 = L["panels"][0]
        # pooled cell (0, 2) holds rows 0-3, keys 6-8: all masked (k > q)
        check("a wholly masked pooled cell is -inf's colour",
              tuple(int(c) for c in img[y0, x0 + 2]) == NEG_INF, "")
        check("a partly masked pooled cell has its largest finite score's colour",
              tuple(int(c) for c in img[y0, x0]) != NEG_INF, "")
    try:
        img = png_read(f"{d}/huge.png")
        L = layout(1, 16384, 16384)
        x0, y0 = L["panels"][0]
        ok = img.shape[:2] == (L["height"], L["width"]) and (L["fq"], L["out_rows"]) == (32, 512)
        panel = img[y0:y0 + 512, x0:x0 + 512].astype(np.int64)
        top = np.argwhere((panel == colour_at(1)).all(axis=-1))
        low = colour_at(1e-4)
        rest = (np.abs(panel - low).max(axis=-1) <= 1).sum()
        check("16384 x 16384 under a memory limit: pooled 32x32, the one high cell at (281, 218)",
              ok and top.tolist() == [[9000 // 32, 7000 // 32]] and rest == 512 * 512 - 1,
              f"size {img.shape}, top cells {top.tolist()[:4]}, {rest} low cells")
    except (OSError, ValueError) as e:
        check("16384 x 16384 under a memory limit", False, str(e))
    tokens(d)
    vector(d)
    readme_picture(d)


def tokens(d):
    """Labels: item b's tokens, every k-th when they do not fit, indices without."""
    try:
        a, b, same = (png_read(f"{d}/{x}.png") for x in ("tok0", "tok1", "tok_same1"))
        base = png_read(f"{d}/tok_same0.png")
    except (OSError, ValueError) as e:
        check("token pictures", False, str(e))
        return
    L = layout(1, 4, 4)
    x0, y0 = L["panels"][0]
    rows = slice(y0, y0 + L["panel_h"])
    gutter = (rows, slice(x0 - ROW_LABEL_W + 20, x0 - 5))
    keys = (slice(y0 + L["panel_h"] + 6, y0 + L["panel_h"] + COL_LABEL_H - 20), slice(x0, x0 + L["panel_w"]))
    panel = (rows, slice(x0, x0 + L["panel_w"]))
    check("query labels come from item b's row of query_token (B, n)",
          not np.array_equal(a[gutter], b[gutter]) and np.array_equal(a[panel], b[panel]), "")
    check("the same tokens in both items give the same labels", np.array_equal(same[gutter], base[gutter]), "")
    check("key labels from key_token (m), the same for every item", np.array_equal(a[keys], b[keys]), "")
    inked = [bool((a[y0 + L["cell_h"] * i + L["cell_h"] // 2 - 4:y0 + L["cell_h"] * i + L["cell_h"] // 2 + 4,
                     x0 - ROW_LABEL_W + 20:x0 - 5] < 128).any()) for i in range(4)]
    check("a label beside each of the 4 query rows", all(inked), f"{inked}")
    L = layout(1, 100, 100)
    x0, y0 = L["panels"][0]
    for name, step, what in (("many", 10, "tokens"), ("many_plain", 20, "indices")):
        try:
            img = png_read(f"{d}/{name}.png")
        except (OSError, ValueError) as e:
            check(name, False, str(e))
            continue
        want = [y0 + (i + 0.5) * L["cell_h"] - 0.5 for i in range(0, 100, step)]
        got = ink_runs(img[y0:y0 + L["panel_h"], x0 - 2])
        got = [y0 + g for g in got]
        check(f"100 {what}: a tick on every {step}th query row only", got == want, f"{got} vs {want}")
        want = [x0 + (j + 0.5) * L["cell_w"] - 0.5 for j in range(0, 100, step)]
        got = [x0 + g for g in ink_runs(img[y0 + L["panel_h"] + 2, x0:x0 + L["panel_w"]])]
        check(f"100 {what}: a tick on every {step}th key column only", got == want, f"{got} vs {want}")


def vector(d):
    L = layout(3, 5, 7)
    try:
        root = ET.parse(f"{d}/known.svg").getroot()
        size = (root.get("width"), root.get("height"))
        images = sum(1 for el in root.iter() if el.tag.endswith("}image") or el.tag == "image")
        check("SVG parses as XML, an <svg> of the layout's size in points, one image per panel and the bar",
              root.tag.endswith("svg") and size == (f"{L['width']}pt", f"{L['height']}pt") and images == 4,
              f"tag {root.tag}, size {size}, {images} images")
    except (OSError, ET.ParseError) as e:
        check("SVG parses", False, str(e))
    with open(f"{d}/known.pdf", "rb") as f:
        pdf = f.read()
    box = re.search(rb"/MediaBox\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)\s*\]", pdf)
    check("PDF: %PDF- ... %%EOF, a page of the layout's size, images not interpolated",
          pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF") and box is not None
          and (float(box.group(1)), float(box.group(2))) == (L["width"], L["height"])
          and b"/Interpolate false" in pdf and b"/Interpolate true" not in pdf,
          f"head {pdf[:8]!r}, tail {pdf.rstrip()[-8:]!r}, box {box.group(0) if box else None}")


def readme_picture(d):
    """README's picture is the toy example's weights (fixtures/toy.expected.h5).
    `make pictures` draws it, perhaps with an earlier build than the one
    under test: its cells and bar are checked, not the ticks' rows."""
    import h5py
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with h5py.File(f"{top}/fixtures/toy.expected.h5") as f:
        w = f["weights"][...]
    check_maps("docs/images/toy-weights.png shows the toy's weights", f"{top}/docs/images/toy-weights.png",
               w, True, specials=[], ticks=False)


if __name__ == "__main__":
    if len(sys.argv) == 1:
        self_test()
    elif sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "verify":
        verify(sys.argv[2])
        sys.exit(0 if all(RESULTS) else 1)
    else:
        sys.exit(f"usage: {sys.argv[0]} [make DIR | verify DIR]")
