"""tests/ref/blocks_ref.py - the cases of tests/cli/test_blocks.sh: every
variant (RoPE with and without --positions, sliding window, ALiBi, GQA,
biases, --attn-bias, QK-norm) and every summary (entropy, argmax, distance,
mean, result, norms, value_norm) at sequence lengths that cross attnrun's
internal blocks, on both softmax paths and in --memory row blocks, against
the float64 references of tests/ref/models_ref.py and
tests/ref/summaries_ref.py (written from the published formulas), never
against attnrun's own output.

The block sizes are not copied here: tests/cli/test_blocks.sh reads them
from the source (lib/math/math.c, include/attn/attn_plan.h) and passes
them in the environment:

    BLOCK_CONSTANTS  "NAME=VALUE ..." (PROJECT_ROWS, ATTN_MAP_TILE, ...)
    BLOCK_NS         the sequence lengths, "255 256 257 513" today

    python3 tests/ref/blocks_ref.py make DIR
        every fixture DIR/<case>_n<N>/in.h5 with its spec.json, and
        DIR/runs.tsv ("case TAB mode TAB attnrun options"): each case at
        each n on the full rows (maps) and online; where n exceeds
        ATTN_MAP_TILE also with --batch-slice 1 (whole rows) and under
        --memory 1K (blocks of one tile of rows), and with sliding keys
        for a causal window
    python3 tests/ref/blocks_ref.py verify DIR DONE
        every finished run listed in DONE ("case TAB mode TAB out TAB
        options", its --dry-run --json plan beside OUT as OUT.plan.json)
        against the reference; its plan (the softmax path, the row blocks,
        sliding keys); the runs of one path the same bits whatever the
        --memory cap (docs/contract.md, section 2); prints "ok ..." / "FAIL ..."

Tolerances are those of the other suites: tests/ref/outputs_compare.py for
scores, weights, heads, output, q, k, v (weights 1e-5 absolute, the rest
1e-4 of the dataset's largest magnitude); tests/ref/summaries_cases.py for
entropy, argmax, distance, mean, result; tests/ref/norms_check.py's 2e-4
of the largest value for norms and value_norm.
"""
import json
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models_ref as M                                     # noqa: E402
from case_table import Gen, Table, read_done, report_same_bits, xw_weights  # noqa: E402
from outputs_compare import compare                        # noqa: E402
from summaries_cases import (compare_argmax, compare_float, reference,  # noqa: E402
                             special_rows, tolerances)

OLD = ("scores", "weights", "heads", "output", "q", "k", "v")
SUMS = ("entropy", "argmax", "distance", "mean", "result")
KEYS = ("norms", "value_norm")

MAPS_ALL = "scores,weights,heads,output,q,k,v,entropy,argmax,distance,mean,result,norms,value_norm"
ONLINE_ALL = "heads,output,q,k,v,entropy,argmax,distance,result,value_norm"
# sliding keys need no k, v and no per-key summary (lib/run/run.c, slide_window)
MAPS_SLIDE = "scores,weights,heads,output,q,entropy,argmax,distance,mean,result"
ONLINE_SLIDE = "heads,output,q,entropy,argmax,distance,result"
MEMORY = "--memory 1K"               # below the least step: one tile of rows a step
WHOLE = "--batch-slice 1"            # whole query rows always (docs/running.md, Steps)
MODES = {
    "maps":         "--save " + MAPS_ALL,
    "online":       "--save " + ONLINE_ALL,
    "maps_whole":   "--save %s %s" % (MAPS_ALL, WHOLE),
    "online_whole": "--save %s %s" % (ONLINE_ALL, WHOLE),
    "maps_mem":     "--save %s %s" % (MAPS_ALL, MEMORY),
    "online_mem":   "--save %s %s" % (ONLINE_ALL, MEMORY),
    "maps_slide":   "--save %s %s" % (MAPS_SLIDE, MEMORY),
    "online_slide": "--save %s %s" % (ONLINE_SLIDE, MEMORY),
}
# the runs of one softmax path whose common outputs must be the same bits
SAME_PATH = (("maps", "maps_whole", "maps_mem", "maps_slide"),
             ("online", "online_whole", "online_mem", "online_slide"))

WINDOW = 100      # keys; in blocks of rows the window drops whole 256-row blocks of keys


def constants():
    """The block sizes test_blocks.sh read from the source, and the lengths."""
    try:
        const = dict((k, int(v)) for k, v in
                     (item.split("=") for item in os.environ["BLOCK_CONSTANTS"].split()))
        ns = [int(v) for v in os.environ["BLOCK_NS"].split()]
    except (KeyError, ValueError) as e:
        sys.exit("blocks_ref.py: BLOCK_CONSTANTS / BLOCK_NS not set by test_blocks.sh (%s)" % e)
    for need in ("PROJECT_ROWS", "ATTN_MAP_TILE"):
        if need not in const:
            sys.exit("blocks_ref.py: BLOCK_CONSTANTS lacks %s" % need)
    return const, ns


def positions(B, n, seed):
    """(B, n) int64 positions that are not the indices: an offset with gaps
    every 37 rows, a stride of 3 from 17, then sorted randoms.  A row that
    takes another row's position (say the one PROJECT_ROWS before) gets a
    different number."""
    rng = np.random.default_rng(seed)
    i = np.arange(n)
    P = np.empty((B, n), np.int64)
    P[0] = 1000 + i + 5 * (i // 37)
    if B > 1:
        P[1] = 17 + 3 * i
    for b in range(2, B):
        P[b] = np.sort(rng.integers(0, 4 * n, n))
    return P


# name, seed, B, (D, H, G, d_k, d_v), projection biases, what else the input
# holds (drawn after the weights), the options, the reference's arguments.
# Each variant crosses the blocks in at least one case:
#   rope        RoPE (neox, no positions), QK-norm, GQA 4 on 2, biases; H d_k >
#               d_model, so a block of query rows projects its own q rows
#   rope_pos    RoPE (gptj, 6 of 8 features) at --positions, ALiBi at the
#               positions, causal, biases; two items of different positions
#   alibi_bias  ALiBi of 6 heads (not a power of two), GQA 6 on 3, d_v != d_k,
#               a (B, H, n, m) --attn-bias (read a block of rows at a time), causal
#   window_causal  --window with --causal (sliding keys in blocks of rows),
#               RoPE at --positions, MQA (G = 1), biases
#   window      --window alone (keys ahead seen), biases; the last row of X
#               made large so that its key (in the second KEY_BLOCK at
#               n = 513) is the largest logit of many rows
CASES = [
    ("rope", 901, 1, (16, 4, 2, 8, 8), True, None,
     "--heads 4 --kv-heads 2 --rope 10000 --q-norm QN --k-norm KN",
     dict(kv_heads=2, rope_theta=10000.0, q_norm="@/QN", k_norm="@/KN")),
    ("rope_pos", 902, 2, (32, 4, 4, 8, 8), True, "P",
     "--heads 4 --rope 500 --rope-dim 6 --rope-style gptj --positions P --alibi --causal",
     dict(rope_theta=500.0, rope_dim=6, rope_style="gptj", positions="@/P",
          alibi_slopes="slopes", causal=True)),
    ("alibi_bias", 903, 2, (24, 6, 3, 4, 6), False, "AB",
     "--heads 6 --kv-heads 3 --alibi --attn-bias AB --causal",
     dict(kv_heads=3, alibi_slopes="slopes", attn_bias="@/AB", causal=True)),
    ("window_causal", 904, 2, (32, 4, 1, 8, 8), True, "P",
     "--heads 4 --kv-heads 1 --rope 10000 --positions P --window %d --causal" % WINDOW,
     dict(kv_heads=1, rope_theta=10000.0, positions="@/P", window=WINDOW, causal=True)),
    ("window", 905, 1, (32, 2, 2, 16, 16), True, "big_last",
     "--heads 2 --window %d" % WINDOW,
     dict(window=WINDOW)),
]

TABLE = None


def make(top):
    global TABLE
    const, ns = constants()
    tile = const["ATTN_MAP_TILE"]
    TABLE = Table(top, MODES)
    for name, seed, B, (D, H, G, dk, dv), bias, extra, options, more in CASES:
        for n in ns:
            case = "%s_n%d" % (name, n)
            g = Gen(seed + n)
            with h5py.File(TABLE.path(case), "w") as f:
                X = g(B, n, D)
                if extra == "big_last":
                    X[:, -1] *= 3
                f["X"] = X
                xw_weights(f, g, D, H, G, dk, dv, bias=bias)
                if "q_norm" in more:
                    f["QN"] = (1 + g(dk, s=0.3)).astype(np.float32)
                    f["KN"] = (1 + g(dk, s=0.3)).astype(np.float32)
                if extra == "P":
                    f["P"] = positions(B, n, seed)
                if extra == "AB":
                    f["AB"] = g(B, H, n, n)
            generic = dict({"X": "@/X", "Wq": "@/W_Q", "Wk": "@/W_K", "Wv": "@/W_V",
                            "Wo": "@/W_O"}, **more, heads=H)
            if bias:
                generic.update(bq="@/b_Q", bk="@/b_K", bv="@/b_V", bo="@/b_O")
            modes = ["maps", "online"]
            if n > tile:                  # one tile of rows is the least step
                modes += ["maps_whole", "online_whole", "maps_mem", "online_mem"]
                if more.get("window") and more.get("causal"):
                    modes += ["maps_slide", "online_slide"]
            spec = {"generic": generic, "H": H, "G": G, "n": n, "layout": "xw", "args": options}
            TABLE.case(case, spec, options, modes)
    TABLE.close()


# ------------------------------------------------------------------ verify

def value_norm(ref, H, G, layout):
    """|| v[b, h G / H, k] @ W_O[h] ||_2, (B, H, m), from the float64 v
    (b_V included) and the head's rows of W_O (Kobayashi et al. 2020)."""
    Wo3 = M._per_head_out(ref["_kw"]["Wo"], H, layout)            # (H, dv, D)
    V = np.asarray(ref["v"], np.float64)
    return np.stack([np.linalg.norm(V[:, h * G // H] @ Wo3[h], axis=-1) for h in range(H)],
                    axis=1)


def within_norms(name, got, exp):
    """norms_check.py's tolerance: 2e-4 of max(1, the largest value)."""
    if got.shape != exp.shape:
        return "%s has shape %s, expected %s" % (name, got.shape, exp.shape)
    if got.dtype != np.float32:
        return "%s stored as %s, expected float32" % (name, got.dtype)
    tol = 2e-4 * max(1.0, float(np.abs(exp).max()))
    diff = np.abs(got.astype(np.float64) - exp)
    if not diff.max() <= tol:
        at = tuple(int(j) for j in np.unravel_index(np.argmax(diff), exp.shape))
        return "%s: off by %.3g at %s (%r vs reference %r; tolerance %.3g)" % (
            name, diff.max(), at, got[at], exp[at], tol)
    return ""


def check_values(f, ref, spec, save):
    problems = []
    tol = tolerances(ref, False)
    for name in save:
        if name not in f:
            problems.append("no %s" % name)
            continue
        got = f[name][...]
        if name in OLD:
            why = compare(name, got, ref[name], False)
        elif name == "argmax":
            if got.dtype != np.int32:
                why = "argmax stored as %s, expected int32" % got.dtype
            else:
                why, _ = compare_argmax(got, ref, tol["logit"], False)
        elif name in SUMS:
            why = "%s stored as %s, expected float32" % (name, got.dtype) \
                if got.dtype != np.float32 else compare_float(name, got, ref[name], tol[name])
        else:
            why = within_norms(name, got, ref[name])
        if why:
            problems.append(why)
    problems += special_rows(f, ref)
    return problems


def check_plan(path, mode, n, const):
    """The plan of the run (--dry-run --json): the softmax path the mode
    means; under --memory 1K blocks of one tile of rows, with --batch-slice 1
    whole items (without either the planner takes whole items or blocks as
    it sees fit); sliding keys or not.  Returns the problems and the plan's blocks, as words."""
    try:
        with open(path) as fp:
            plan = json.load(fp)["plan"]
    except (OSError, ValueError, KeyError) as e:
        return ["no plan (%s)" % e], "no plan"
    problems = []
    online = mode.startswith("online")
    if plan.get("online_softmax") is not online:
        problems.append("plan.online_softmax is %r, expected %r" % (plan.get("online_softmax"), online))
    if mode.endswith(("_mem", "_slide")):
        rows, tile = plan.get("rows_per_block"), const["ATTN_MAP_TILE"]
        want = -(-n // tile)
        if rows != tile or plan.get("row_blocks") != want:
            problems.append("plan: %r blocks of %r rows, expected %d of ATTN_MAP_TILE = %d" % (
                plan.get("row_blocks"), rows, want, tile))
        elif rows % const["PROJECT_ROWS"]:
            problems.append("plan: blocks of %d rows do not start on PROJECT_ROWS boundaries" % rows)
    if mode.endswith("_whole") and (plan.get("row_blocks") != 1 or plan.get("rows_per_block") != n):
        problems.append("plan: %r blocks of %r rows, expected whole items of %d rows" % (
            plan.get("row_blocks"), plan.get("rows_per_block"), n))
    slide = plan.get("slide_keys")
    if mode.endswith("_slide") and not slide:
        problems.append("plan.slide_keys is %r: the keys do not slide" % slide)
    if not mode.endswith("_slide") and slide:
        problems.append("plan.slide_keys is %r where they cannot slide" % slide)
    blocks = "%s softmax, %s block%s of %s rows%s" % (
        "online" if plan.get("online_softmax") else "full-row", plan.get("row_blocks"),
        "" if plan.get("row_blocks") == 1 else "s", plan.get("rows_per_block"),
        ", sliding keys" if slide else "")
    return problems, blocks


def verify(top, done):
    const, _ = constants()
    refs, finished = {}, {}
    for case, mode, out, args in read_done(done):
        finished[(case, mode)] = out
        if case not in refs:
            spec, ref = reference(top, case)
            ref["value_norm"] = value_norm(ref, spec["H"], spec["G"], spec["layout"])
            ref["norms"] = ref["weights"] * ref["value_norm"][:, :, None, :]
            refs[case] = spec, ref
        spec, ref = refs[case]
        save = args.split("--save ")[1].split()[0].split(",")
        problems, blocks = check_plan(out + ".plan.json", mode, spec["n"], const)
        with h5py.File(out, "r") as f:
            results = sorted(k for k in f if isinstance(f[k], h5py.Dataset)
                             and f[k].attrs.get("attnrun_role") in (b"result", "result"))
            if results != sorted(save):
                problems.append("result datasets %s, expected %s" % (results, sorted(save)))
            problems += check_values(f, ref, spec, save)
        if problems:
            print("FAIL %s %s (%s): %s" % (case, mode, args, "; ".join(problems)[:900]))
        else:
            print("ok %s %s: %d outputs match the reference (%s)" % (case, mode, len(save), blocks))

    report_same_bits(SAME_PATH, refs, finished, OLD + SUMS + KEYS, common_only=True)


COMMANDS = {"make": (make, 1), "verify": (verify, 2)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or \
            len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]][0](*sys.argv[2:])
