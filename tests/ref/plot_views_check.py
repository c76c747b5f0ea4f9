"""tests/ref/plot_views_check.py - what `attnrun plot` draws beyond a map of
weights at its linear scale, for tests/cli/test_plot.sh: the colour scales
of --color, zooms (--queries, --keys), the other maps of a results file
(norms, mean, distance, value_norm), rollout files (one panel per layer)
and the census grids of attnrun heads (one panel and one colour bar per
score).  Expected colours, ranges, tick rows and the layout come from
tests/ref/plot_check.py, written from docs/pictures.md, never from
attnrun's output; the files are written here with h5py.

    python3 tests/ref/plot_views_check.py make DIR     # after plot_check.py make DIR
    python3 tests/ref/plot_views_check.py verify DIR   # the pictures test_plot.sh drew

verify prints "ok NAME" or "FAIL NAME: WHY" per check.
"""
import sys

import numpy as np

import plot_check as pc
from plot_check import check, check_maps

# A census of attnrun heads: its grids in order, with each scale's start.
CENSUS = [("entropy", "zero"), ("distance", "zero"), ("first", "unit"), ("previous", "unit"),
          ("self", "unit"), ("duplicate", "unit"), ("induction", "unit")]
LAYERS, HEADS = 4, 6

# ------------------------------------------------------------- fixtures


def census_grids(rng):
    """The census's grids (L, H): entropy in nats, distance in positions,
    fractions for the rest; NaN where no query qualified."""
    grids = {"entropy": 3 * rng.random((LAYERS, HEADS)), "distance": 12 * rng.random((LAYERS, HEADS))}
    for name, _ in CENSUS[2:]:
        grids[name] = 0.9 * rng.random((LAYERS, HEADS))
    grids["entropy"][1, 2] = np.nan
    grids["duplicate"][0, :] = np.nan
    grids["induction"][3, 5] = np.nan
    grids["first"][2, 3] = 0.0
    return grids


def make(d):
    import h5py
    rng = np.random.default_rng(20261202)
    strings = pc.strings
    with h5py.File(f"{d}/scales.h5", "w") as f:          # four decades, zeros among them
        w = 10 ** rng.uniform(-4.5, np.log10(0.5), (1, 2, 6, 8))
        w[0, 0, 0, 0] = 3e-5                              # the smallest positive: log's bottom
        w[0, 1, 5, 7] = 0.5                               # the largest
        w[0, 0, 2, :3] = 0                                # the bottom colour on every scale
        f["weights"] = w.astype("f4")
        deep = 10 ** rng.uniform(-9, 0, (1, 1, 5, 5))     # nine decades: log keeps the top six
        deep[0, 0, 0, 0], deep[0, 0, 1, 1], deep[0, 0, 2, 2] = 1.0, 1e-9, 0.0
        f.create_group("deep")["weights"] = deep.astype("f4")
    with h5py.File(f"{d}/zoom.h5", "w") as f:            # 200 x 200, every value its own
        f.create_dataset("weights", data=rng.permutation(200 * 200).reshape(1, 1, 200, 200)
                         .astype("f4") / 40000, chunks=(1, 1, 50, 50))
    with h5py.File(f"{d}/many.h5") as f:                 # plot_check.py's: 100 tokens
        block = f["weights"][:, :, 40:44, 50:54]
    with h5py.File(f"{d}/shifted.h5", "w") as f:         # what a zoom of it must look like
        f["weights"] = block
        f["query_token"] = strings([f"t{i}" for i in range(40, 44)])
        f["key_token"] = strings([f"u{i}" for i in range(50, 54)])
        f.create_group("plain")["weights"] = block
        g = f.create_group("indexed")
        g["weights"] = block
        g["query_token"] = strings([str(i) for i in range(40, 44)])
        g["key_token"] = strings([str(i) for i in range(50, 54)])
    with h5py.File(f"{d}/maps.h5", "w") as f:            # --save norms, mean, distance, value_norm
        B, H, n, m = 2, 2, 5, 7
        w = rng.random((B, H, n, m))
        w /= w.sum(axis=-1, keepdims=True)
        f["weights"] = w.astype("f4")
        f["norms"] = (w * 3 * rng.random((B, H, 1, m))).astype("f4")
        f["mean"] = w.mean(axis=1).astype("f4")
        f["distance"] = (4 * rng.random((B, H, n))).astype("f4")
        f["value_norm"] = (3 * rng.random((B, H, m))).astype("f4")
        f["query_token"] = strings([["a", "b", "c", "d", "e"], ["v", "w", "x", "y", "z"]])
        f["key_token"] = strings([f"k{i}" for i in range(m)])
    with h5py.File(f"{d}/mean2.h5", "w") as f:           # a mean without its batch axis
        f["mean"] = rng.random((4, 9)).astype("f4")
    with h5py.File(f"{d}/rollout.h5", "w") as f:         # attnrun rollout's file
        r = rng.random((2, 3, 6, 6))
        r /= r.sum(axis=-1, keepdims=True)
        f["rollout"] = r.astype("f4")
        f["layer_group"] = strings(["/layer0", "/layer1", "/layer2"])
        f["query_token"] = strings([[f"q{i}" for i in range(6)], [f"r{i}" for i in range(6)]])
        f["key_token"] = strings([[f"q{i}" for i in range(6)], [f"r{i}" for i in range(6)]])
        f.attrs["attnrun_analysis"] = "rollout"
    with h5py.File(f"{d}/named.h5", "w") as f:           # layers named as heads would be
        f["rollout"] = r[1:2].astype("f4")
        f["layer_group"] = strings(["head 0", "head 1", "head 2"])
    with h5py.File(f"{d}/as_weights.h5", "w") as f:      # the same maps as weights
        f["weights"] = r[1:2].astype("f4")
    grids = census_grids(rng)
    for name, kept, marker in (("census", CENSUS, "vlen"), ("census5", CENSUS[:5], "fixed")):
        with h5py.File(f"{d}/{name}.h5", "w") as f:
            if marker == "vlen":
                f.attrs["attnrun_analysis"] = "heads"
            else:                                        # a fixed-length string reads the same
                f.attrs.create("attnrun_analysis", np.bytes_("heads"))
            for score, _ in kept:
                f[score] = grids[score]
            f["layer_group"] = strings([f"/layer{i}" for i in range(LAYERS)])
    with h5py.File(f"{d}/marker.h5", "w") as f:          # attnrun_analysis that is no string
        f["weights"] = np.ones((1, 1, 2, 2), np.float32)
        f.attrs["attnrun_analysis"] = 7

# ------------------------------------------------------------- checks


def read(path):
    try:
        return pc.png_read(path)
    except (OSError, ValueError) as e:
        check(path, False, str(e))
        return None


def ticks_at(d, name, L, first, count, step, rows):
    """Index labels' ticks at the multiples of step from the zoom's first
    index, placed at their cells: left of the panel (rows) or under it."""
    img = read(f"{d}/{name}.png")
    if img is None:
        return
    x0, y0 = L["panels"][0]
    labelled = [i for i in range(first, first + count) if i % step == 0]
    if rows:
        got = [y0 + g for g in pc.ink_runs(img[y0:y0 + L["panel_h"], x0 - 2])]
        want = [y0 + (i - first + 0.5) * L["cell_h"] - 0.5 for i in labelled]
    else:
        got = [x0 + g for g in pc.ink_runs(img[y0 + L["panel_h"] + 2, x0:x0 + L["panel_w"]])]
        want = [x0 + (i - first + 0.5) * L["cell_w"] - 0.5 for i in labelled]
    check(f"{name}: a tick at {'query' if rows else 'key'} {labelled[0]}, {labelled[1]}, ... "
          f"{labelled[-1]} (the true indices)", got == want, f"{got} vs {want}")


def same_region(name, a_path, b_path, region, equal=True):
    a, b = read(a_path), read(b_path)
    if a is None or b is None:
        return
    if a.shape != b.shape:
        check(name, False, f"sizes {a.shape} and {b.shape}")
        return
    same = np.array_equal(a[region], b[region])
    check(name, same == equal, "the pixels differ" if equal else "the pixels are the same")


def scales(d):
    import h5py
    with h5py.File(f"{d}/scales.h5") as f:
        w, deep = f["weights"][0], f["deep/weights"][0]
    for colour in ("linear", "sqrt", "log"):
        check_maps(f"--color {colour}", f"{d}/scales_{colour}.png", w, True, colour=colour)
    check_maps("--color log over nine decades: six kept, 1e-9 and 0 at the bottom",
               f"{d}/scales_deep.png", deep, True, colour="log")
    lo, hi = pc.bar_range(deep, "zero", "log")
    check("--color log: the bottom of nine decades is 1e-6 of the top", lo == 1e-6 * float(deep.max()),
          f"{lo}")
    # The bar's title states the scale: its strip differs between the scales.
    L = pc.layout(2, 6, 8)
    bx, by = L["bar"]
    strip = (slice(by - pc.HEAD_TITLE_H, by), slice(bx, bx + pc.BAR_COLUMN_W - pc.BAR_OFFSET))
    same_region("the bar's title says sqrt scale", f"{d}/scales_linear.png", f"{d}/scales_sqrt.png",
                strip, equal=False)
    same_region("the bar's title says log scale", f"{d}/scales_sqrt.png", f"{d}/scales_log.png",
                strip, equal=False)


def zooms(d):
    import h5py
    with h5py.File(f"{d}/zoom.h5") as f:
        w = f["weights"][0, 0]
    L = pc.layout(1, 64, 64)
    check("a 64 x 64 zoom is drawn unpooled, 4 x 4 pixels a value", (L["fq"], L["fk"], L["cell_w"]) == (1, 1, 4),
          f"{L['fq']}, {L['fk']}, {L['cell_w']}")
    check_maps("--queries 100-163 --keys 37-100 of 200 x 200: the values at the true indices",
               f"{d}/zoom.png", w[100:164, 37:101][None], True)
    ticks_at(d, "zoom", L, 100, 64, 10, rows=True)
    ticks_at(d, "zoom", L, 37, 64, 10, rows=False)
    with h5py.File(f"{d}/big.h5") as f:
        big = f["weights"][0, 0]
    check_maps("--queries 600-1799 of 2000 x 1100: pooled 3 x 3 from the zoom's first row",
               f"{d}/zoom_pooled.png", big[600:1800][None], True)
    with h5py.File(f"{d}/many.h5") as f:
        many = f["weights"][0, 0]
    check_maps("a zoom of a map with tokens", f"{d}/zoom_tok.png", many[40:44, 50:54][None], True)
    L = pc.layout(1, 4, 4)
    x0, y0 = L["panels"][0]
    labels = (slice(y0, y0 + L["panel_h"] + pc.COL_LABEL_H), slice(x0 - pc.ROW_LABEL_W, x0 + L["panel_w"]))
    same_region("a zoom's axes show the tokens of its range (t40.., u50..)", f"{d}/zoom_tok.png",
                f"{d}/shifted.png", labels)
    same_region("a zoom's axes show the indices of its range (40.., 50..)", f"{d}/zoom_idx.png",
                f"{d}/shifted_idx.png", labels)
    same_region("... which are not 0.., as a map of its own would show", f"{d}/zoom_idx.png",
                f"{d}/shifted_plain.png", labels, equal=False)
    with h5py.File(f"{d}/known.h5") as f:
        e = f["entropy"][0]
    check_maps("entropy --queries 1-3: heads by queries 1 to 3", f"{d}/zoom_e.png", e[:, 1:4][None], False)


def maps(d):
    import h5py
    with h5py.File(f"{d}/maps.h5") as f:
        norms, mean = f["norms"][...], f["mean"][...]
        distance, value_norm = f["distance"][...], f["value_norm"][...]
    check_maps("--what norms, item 1: a panel per head from 0", f"{d}/norms.png", norms[1], True)
    check_maps("--what norms --color sqrt", f"{d}/norms_sqrt.png", norms[0], True, colour="sqrt")
    check_maps("--what mean: one map from 0", f"{d}/mean.png", mean[0][None], True)
    check_maps("--what distance: heads by queries", f"{d}/distance.png", distance[0][None], False)
    check_maps("--what value_norm --heads 1: heads by keys from 0", f"{d}/value_norm.png",
               value_norm[0, 1:2][None], True)
    with h5py.File(f"{d}/mean2.h5") as f:
        check_maps("--what mean without a batch axis", f"{d}/mean2.png", f["mean"][...][None], True)


def rollouts(d):
    import h5py
    with h5py.File(f"{d}/rollout.h5") as f:
        r = f["rollout"][...]
    check_maps("a rollout file, item 1: a panel per layer (rollout by default)", f"{d}/rollout.png",
               r[1], True)
    check_maps("rollout --color log", f"{d}/rollout_log.png", r[0], True, colour="log")
    L = pc.layout(3, 6, 6)
    for p in range(3):
        x0, y0 = L["panels"][p]
        title = (slice(y0 - pc.HEAD_TITLE_H, y0), slice(x0 - 16, x0 + L["panel_w"] + 16))
        same_region(f"rollout panel {p} is titled with layer_group[{p}]", f"{d}/named.png",
                    f"{d}/as_weights.png", title)
        same_region(f"... not 'head {p}' when the group is /layer{p}", f"{d}/rollout.png",
                    f"{d}/as_weights.png", title, equal=False)


def census(d, name, scores, colour="linear"):
    """The census picture at d/name.png: a grid per score of `scores`
    (names), each (layers, heads) with its own colour bar and range."""
    import h5py
    img = read(f"{d}/{name}.png")
    if img is None:
        return
    with h5py.File(f"{d}/census.h5") as f:
        grids = [f[s][...] for s in scores]
    starts = dict(CENSUS)
    L = pc.layout(len(scores), LAYERS, HEADS, bar_per_panel=True)
    check(f"{name}: size {L['width']}x{L['height']}, {len(scores)} panels with a bar each",
          img.shape[:2] == (L["height"], L["width"]), f"{img.shape[1]}x{img.shape[0]}")
    if img.shape[:2] != (L["height"], L["width"]):
        return
    for p, (score, grid) in enumerate(zip(scores, grids)):
        lo, hi = pc.bar_range(grid, starts[score], colour)
        got = pc.cell_colours(img, L, p)
        worst = int(np.abs(got - pc.expected_colours(grid, lo, hi, colour)).max())
        check(f"{name}: {score}'s cells on its own {colour} scale {lo:.4g}..{hi:.4g}", worst <= 1,
              f"a channel off by {worst}")
        bx, by = L["bars"][p]
        bar = np.array([img[by + j, bx + pc.BAR_W // 2] for j in range(pc.BAR_H)], np.int64)
        want = np.array([pc.colour_at((pc.BAR_H - 1 - j) / (pc.BAR_H - 1)) for j in range(pc.BAR_H)])
        ticks, want_ticks = pc.bar_ticks(img, bx, by), pc.tick_rows(colour, lo, hi)
        check(f"{name}: {score}'s own colour bar right of its panel, ticks at {want_ticks}",
              int(np.abs(bar - want).max()) <= 1 and ticks == want_ticks, f"ticks at {ticks}")
        if any(np.isnan(grid).ravel()):
            x0, y0 = L["panels"][p]
            r, c = np.argwhere(np.isnan(grid))[0]
            at = img[y0 + r * L["cell_h"] + L["cell_h"] // 2, x0 + c * L["cell_w"] + L["cell_w"] // 2]
            check(f"{name}: {score}'s NaN cell ({r}, {c}) is magenta", tuple(int(v) for v in at) == pc.NAN,
                  f"{tuple(at)}")
    lx, ly = L["legend"]
    nan = any(np.isnan(g).any() for g in grids)
    at = tuple(int(v) for v in img[ly + pc.SWATCH // 2, lx + pc.SWATCH // 2])
    check(f"{name}: the legend at the top of the right column {'shows' if nan else 'has no'} NaN",
          at == (pc.NAN if nan else pc.WHITE), f"{at}")


def censuses(d):
    every = [s for s, _ in CENSUS]
    census(d, "census", every)
    census(d, "census5", every[:5])
    census(d, "census_induction", ["induction"])
    census(d, "census_sqrt", every, "sqrt")
    census(d, "census_log", every, "log")
    L = pc.layout(1, LAYERS, HEADS, bar_per_panel=True)
    bx, by = L["bars"][0]
    # above the bar, left of where the top tick's label starts
    strip = (slice(by - pc.HEAD_TITLE_H, by - 2), slice(bx, bx + pc.BAR_W + 4))
    lin, log = read(f"{d}/census.png"), read(f"{d}/census_log.png")
    if lin is not None and log is not None:
        check("a census bar's title says log scale (none for linear)",
              not (lin[strip] < 200).any() and (log[strip] < 200).any(), "")


def census_svg(d):
    """The SVG of a census: the layout's size, an image per grid and per bar."""
    import xml.etree.ElementTree as ET
    L = pc.layout(len(CENSUS), LAYERS, HEADS, bar_per_panel=True)
    try:
        root = ET.parse(f"{d}/census.svg").getroot()
    except (OSError, ET.ParseError) as e:
        check("census SVG parses", False, str(e))
        return
    size = (root.get("width"), root.get("height"))
    images = sum(1 for el in root.iter() if el.tag.endswith("}image") or el.tag == "image")
    check(f"census SVG: {L['width']}x{L['height']} points, {2 * len(CENSUS)} images (a grid and a bar each)",
          size == (f"{L['width']}pt", f"{L['height']}pt") and images == 2 * len(CENSUS),
          f"size {size}, {images} images")


def verify(d):
    scales(d)
    zooms(d)
    maps(d)
    rollouts(d)
    censuses(d)
    census_svg(d)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "verify":
        verify(sys.argv[2])
        sys.exit(0 if all(pc.RESULTS) else 1)
    else:
        sys.exit(f"usage: {sys.argv[0]} make DIR | verify DIR")
