"""tests/ref/case_table.py - the tables of generated cases that
tests/ref/models_cases.py and tests/ref/summaries_cases.py write and read.

A table lives in one directory: DIR/<case>/in.h5 (the input, float32 arrays
of a fixed seed), DIR/<case>/spec.json (what the reference needs, datasets
of in.h5 named "@/NAME") and DIR/runs.tsv ("case TAB mode TAB attnrun
options", one line per run).

    Table(top, modes)           opens DIR/runs.tsv for writing
    table.path(case)            DIR/<case>/in.h5, its directory made
    table.case(case, spec, args, modes)
                                writes spec.json and one run per mode
    Gen(seed)                   float32 normal arrays of a fixed seed
    xw_weights(f, g, ...)       W_Q ... W_O (and b_Q ... b_O) in the xw layout
    xw_input(path, seed, ...)   X, xw_weights and datasets drawn after them
    linear_weights(f, g, ...)   W_Q ... W_O and biases in the linear layout
    per_head_weights(f, g, ...) W_Q ... W_O as one matrix per head
    shared_kv_input(path, g, ...) cross-attention to one rank-2 --kv
    gpt2_layer(path, g, ...)    a layer under GPT-2's names, and its spec
    variant_kwargs(f, generic, H)
                                the keyword arguments of
                                models_ref.attention_variant that a spec's
                                "generic" names, read from the open in.h5
"""
import json
import os

import h5py
import numpy as np

import models_ref as M
import same_file  # noqa: E402  (tests/ref/same_file.py, the one comparer)

# the default weights and biases of the xw layout, as a spec names them
XW = dict(Wq="@/W_Q", Wk="@/W_K", Wv="@/W_V", Wo="@/W_O")
XWB = dict(XW, bq="@/b_Q", bk="@/b_K", bv="@/b_V", bo="@/b_O")


class Gen:
    """float32 normal arrays of a fixed seed."""
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __call__(self, *shape, s=1.0):
        return (s * self.rng.standard_normal(shape)).astype(np.float32)

    def w(self, rows, cols, fan_in=None):
        return self(rows, cols, s=1.0 / np.sqrt(fan_in or rows))


def xw_weights(f, g, D, H, G, dk, dv, bias=False, wscale=1.0):
    """Packed (D, H*dk) ... weights of H query and G key/value heads; W_Q and
    W_K scaled by wscale (larger logits)."""
    f["W_Q"] = g.w(D, H * dk) * np.float32(wscale)
    f["W_K"] = g.w(D, G * dk) * np.float32(wscale)
    f["W_V"] = g.w(D, G * dv)
    f["W_O"] = g.w(H * dv, D)
    if bias:
        f["b_Q"], f["b_K"], f["b_V"], f["b_O"] = (g(H * dk, s=0.2), g(G * dk, s=0.2),
                                                  g(G * dv, s=0.2), g(D, s=0.2))


def xw_input(path, seed, X, D, H, G, dk, dv, bias=False, extra=None):
    """path: X of shape X drawn from Gen(seed), then xw_weights, then the
    datasets extra(g) returns (drawn in that order from the same seed)."""
    g = Gen(seed)
    with h5py.File(path, "w") as f:
        f["X"] = g(*X)
        xw_weights(f, g, D, H, G, dk, dv, bias=bias)
        for k, v in (extra(g) if extra else {}).items():
            f[k] = v


def linear_weights(f, g, D, H, dk, dv):
    """W_Q ... W_O with biases in the linear layout (torch's (out, in)):
    W_Q and W_K (H*dk, D), W_V (H*dv, D), W_O (D, H*dv)."""
    f["W_Q"] = g.w(H * dk, D, D)
    f["W_K"] = g.w(H * dk, D, D)
    f["W_V"] = g.w(H * dv, D, D)
    f["W_O"] = g.w(D, H * dv, H * dv)
    f["b_Q"], f["b_K"], f["b_V"], f["b_O"] = (g(H * dk, s=0.2), g(H * dk, s=0.2),
                                              g(H * dv, s=0.2), g(D, s=0.2))


def per_head_weights(f, g, D, H, G, dk, dv, wo_scale):
    """3-D weights, one matrix per head: W_Q (H, D, dk), W_K (G, D, dk),
    W_V (G, D, dv) of scale D^-1/2, W_O (H, dv, D) of scale wo_scale."""
    f["W_Q"] = g(H, D, dk, s=D ** -0.5)
    f["W_K"] = g(G, D, dk, s=D ** -0.5)
    f["W_V"] = g(G, D, dv, s=D ** -0.5)
    f["W_O"] = g(H, dv, D, s=wo_scale)


def shared_kv_input(path, g, m, first_position):
    """path: X (2, 10, 32), a rank-2 Y (m, 32) that every item attends to,
    xw_weights of 4 heads of 8, and query positions P = first_position +
    0 ... 9 (the keys at their default 0 ... m-1)."""
    with h5py.File(path, "w") as f:
        f["X"] = g(2, 10, 32)
        f["Y"] = g(m, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8)
        f["P"] = (first_position + np.arange(10)).astype(np.int64)


def gpt2_layer(path, g, B, n, D, H, group="transformer/h.0/attn"):
    """path: X (B, n, D) and GPT-2's attention under group, c_attn a Conv1D
    (D, 3D) of columns [W_Q | W_K | W_V], c_proj (D, D), with biases.
    Returns the spec's generic arguments for it (causal)."""
    with h5py.File(path, "w") as f:
        f["X"] = g(B, n, D)
        a = f.create_group(group)
        a["c_attn.weight"] = g.w(D, 3 * D)
        a["c_attn.bias"] = g(3 * D, s=0.1)
        a["c_proj.weight"] = g.w(D, D)
        a["c_proj.bias"] = g(D, s=0.1)
    gp = "@/" + group + "/"
    return {"fused": {"w": gp + "c_attn.weight", "b": gp + "c_attn.bias", "H": H, "G": H,
                      "dk": D // H, "dv": D // H, "layout": "xw", "split": "blocks"},
            "Wo": gp + "c_proj.weight", "bo": gp + "c_proj.bias", "causal": True}


class Table:
    """The cases of one suite, written into top."""
    def __init__(self, top, modes):
        self.top = top
        self.modes = modes
        self.runs = open(os.path.join(top, "runs.tsv"), "w")

    def path(self, case):
        d = os.path.join(self.top, case)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, "in.h5")

    def case(self, name, spec, args, modes):
        with open(os.path.join(self.top, name, "spec.json"), "w") as f:
            json.dump(spec, f, indent=1)
        for mode in modes:
            self.runs.write("%s\t%s\t%s %s\n" % (name, mode, args, self.modes[mode]))

    def close(self):
        self.runs.close()


def read_spec(top, case):
    with open(os.path.join(top, case, "spec.json")) as f:
        return json.load(f)


def resolve(f, v):
    """A spec's value: "@/NAME" the dataset NAME of f, {"not": "@/NAME"} its
    logical negation, anything else itself."""
    if isinstance(v, str) and v.startswith("@"):
        return f[v[1:]][...]
    if isinstance(v, dict) and "not" in v:
        return ~f[v["not"][1:]][...].astype(bool)
    return v


def variant_kwargs(f, generic, H):
    """The arguments of models_ref.attention_variant named by generic: a
    "fused" entry split by models_ref.split_fused, alibi_slopes "slopes" the
    standard slopes of H heads, every other value resolved."""
    kw = {}
    for k, v in generic.items():
        if k == "fused":
            kw.update(zip(("Wq", "Wk", "Wv", "bq", "bk", "bv"),
                          M.split_fused(resolve(f, v["w"]),
                                        resolve(f, v["b"]) if v["b"] else None,
                                        v["H"], v["G"], v["dk"], v["dv"], v["layout"],
                                        v["split"])))
        elif k == "alibi_slopes" and v == "slopes":
            kw[k] = M.alibi_slopes(H)
        else:
            kw[k] = resolve(f, v)
    return kw


def read_done(path):
    """The finished runs listed in path, "case TAB mode TAB out TAB options"
    each, as (case, mode, out, options) tuples."""
    with open(path) as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]


def report_same_bits(groups, cases, finished, names, common_only=False):
    """For each group of modes and each case, print whether the runs of the
    case in those modes that finished (finished[(case, mode)] = the output
    file) hold the same bits in the datasets named as the group's first run;
    with common_only, only those the two files both hold."""
    for group in groups:
        for case in sorted(cases):
            have = [m for m in group if (case, m) in finished]
            if len(have) < 2:
                continue
            problems = []
            with h5py.File(finished[(case, have[0])], "r") as a:
                for other in have[1:]:
                    with h5py.File(finished[(case, other)], "r") as b:
                        these = [k for k in names if k in a and k in b] if common_only else names
                        problems += ["%s vs %s: %s" % (have[0], other, p)
                                     for p in same_bits(a, b, these)]
            if problems:
                print("FAIL %s %s: %s" % (case, "/".join(have), "; ".join(problems)[:600]))
            else:
                print("ok %s %s bit-identical" % (case, "/".join(have)))


def same_bits(a, b, names):
    """Problems of h5py files a and b holding different bytes (or types,
    shapes, presence) in the datasets named."""
    problems = []
    for k in names:
        if (k in a) != (k in b):
            problems.append("%s in only one" % k)
        elif k in a:
            x, y = a[k][...], b[k][...]
            if x.dtype != y.dtype or x.shape != y.shape:
                problems.append("%s differs: %s%s vs %s%s" % (k, x.dtype, x.shape, y.dtype, y.shape))
            elif same_file.value_difference(same_file.values(a[k]), same_file.values(b[k])):
                problems.append("%s differs" % k)
    return problems
