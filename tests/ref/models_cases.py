"""tests/ref/models_cases.py - the cases of tests/cli/test_models.sh: attnrun
on the attention of real model families (--preset ...) and on every variant
alone and combined, against the float64 references of tests/ref/models_ref.py
(the generic attention_variant and the per-family functions), never against
attnrun's own output.

    python3 tests/ref/models_cases.py make DIR
        every fixture: DIR/<case>/in.h5 with DIR/<case>/spec.json (what the
        reference needs), DIR/runs.tsv ("case TAB mode TAB attnrun options")
        and DIR/bad.tsv ("case TAB statuses TAB text the message must hold,
        or - TAB options")
    python3 tests/ref/models_cases.py verify DIR DONE
        every finished run listed in DONE ("case TAB mode TAB out TAB
        options") against the reference of DIR/<case>/spec.json, the
        provenance attributes of the "full" runs, and --threads 1 against 2
        bit for bit; prints "ok ..." / "FAIL ..."

Tolerances (tests/ref/outputs_compare.py): weights 1e-5 absolute, the other
outputs 1e-4 of the dataset's largest magnitude; float64 1e-12; -inf
exactly where the reference masks.
"""
import os
import sys

import numpy as np
import h5py

import models_ref as M
from case_table import (
    Gen, Table, XW, XWB, gpt2_layer, linear_weights, per_head_weights, read_done, read_spec,
    resolve, same_bits, shared_kv_input, variant_kwargs, xw_input, xw_weights)
from outputs_compare import compare

SAVE_ALL = "--save scores,weights,heads,output,q,k,v"
MODES = {
    "full":       SAVE_ALL,
    "f64":        SAVE_ALL + " --precision f64",
    "online":     "--save heads,output",
    "online_mem": "--save output --memory 64K",
    "t1":         SAVE_ALL + " --memory 64K --threads 1",
    "t2":         SAVE_ALL + " --memory 64K --threads 2",
}
PRESET_MODES = ("full", "f64", "online", "t1", "t2")

# the table being written, and DIR/bad.tsv (set by make())
TABLE = None
BADS = None


def path(case):
    return TABLE.path(case)



def positions(B, n, seed, offset=7):
    """(B, n) int64: a shifted run, a left-padded run (repeated 0s), sorted randoms."""
    rng = np.random.default_rng(seed)
    P = np.zeros((B, n), np.int64)
    P[0] = offset + np.arange(n)
    if B > 1:
        P[1] = np.maximum(np.arange(n) - 3, 0)
    for b in range(2, B):
        P[b] = np.sort(rng.integers(0, 3 * n, n))
    return P


def prov(generic, preset="", names=None, scale=None, dk=None, H=None):
    """The provenance attributes docs/outputs.md requires, from the reference
    settings."""
    names = names or {}
    theta = float(generic.get("rope_theta", 0.0) or 0.0)
    a = {
        "layout": generic.get("layout", "xw"),
        "kv_heads": generic["kv_heads"],
        "preset": preset,
        "rope_theta": theta,
        "rope_dim": (generic.get("rope_dim") or dk) if theta else 0,
        "rope_style": generic.get("rope_style", "neox") if theta else "",
        "alibi": 1 if generic.get("alibi_slopes") is not None else 0,
        "window": generic.get("window", 0),
        "softcap": float(generic.get("softcap", 0.0)),
        "mask_invert": 1 if isinstance(generic.get("keep"), dict) else 0,
        "attn_bias": names.get("attn_bias", ""),
        "q_norm": names.get("q_norm", ""),
        "k_norm": names.get("k_norm", ""),
        # norm_eps reads 0 without QK-norm (docs/outputs.md); accept
        # the default 1e-6 or 0
        "norm_eps": float(generic.get("norm_eps", 1e-6)) if (
            "q_norm" in generic or "k_norm" in generic) else [1e-6, 0.0],
        "causal": 1 if generic.get("causal") else 0,
        "heads": H,
        "scale": float(scale if scale is not None else 1.0 / np.sqrt(dk)),
    }
    return a


def case(name, args, generic, H, G, dk, dv, family=None, preset="", names=None,
         modes=tuple(MODES), scale=None):
    generic = dict({"X": "@/X"}, **generic, heads=H, kv_heads=G)
    if scale is not None:
        generic["scale"] = scale
    spec = {"generic": generic, "family": family, "H": H, "G": G, "dk": dk, "dv": dv,
            "attrs": prov(generic, preset, names, scale, dk, H)}
    TABLE.case(name, spec, args, modes)


def bad(name, statuses, text, args):
    BADS.write("%s\t%s\t%s\t%s\n" % (name, statuses, text or "-", args))



def fused(w, b, H, G, dk, dv, layout, split):
    return {"fused": {"w": w, "b": b, "H": H, "G": G, "dk": dk, "dv": dv,
                      "layout": layout, "split": split}}


def fused_heads_layer(f, g, group, D):
    """GPT-NeoX's and BLOOM's query_key_value (3D, D), per head [q|k|v], and
    dense (D, D), with biases, under group."""
    a = f.create_group(group)
    a["query_key_value.weight"] = g.w(3 * D, D, D)
    a["query_key_value.bias"] = g(3 * D, s=0.1)
    a["dense.weight"] = g.w(D, D, D)
    a["dense.bias"] = g(D, s=0.1)


def bert_layer(f, g, group, D):
    """BERT's self.query/key/value and output.dense (linear, with biases)
    under group."""
    a = f.create_group(group)
    for w in ("self.query", "self.key", "self.value", "output.dense"):
        a[w + ".weight"] = g.w(D, D, D)
        a[w + ".bias"] = g(D, s=0.1)


def bert_generic(gp):
    """The generic arguments of bert_layer's weights under gp ("@/group/")."""
    return dict(Wq=gp + "self.query.weight", Wk=gp + "self.key.weight", Wv=gp + "self.value.weight",
                Wo=gp + "output.dense.weight", bq=gp + "self.query.bias", bk=gp + "self.key.bias",
                bv=gp + "self.value.bias", bo=gp + "output.dense.bias", layout="linear")


def llama_like(name, seed, B, n, D, H, G, hd, theta, preset, extra_args="", biases=(),
               norms=False, pos=False, mask=None, window=0, softcap=0.0, qpas=None,
               group="model/layers.0/self_attn", wscale=1.0, eps=None):
    """A LLaMA-family fixture: q/k/v/o_proj (linear layout), optional biases and norms."""
    g = Gen(seed)
    gp = "@/" + group + "/"
    with h5py.File(path(name), "w") as f:
        f["X"] = g(B, n, D)
        a = f.create_group(group)
        a["q_proj.weight"] = g.w(H * hd, D, D) * np.float32(wscale)
        a["k_proj.weight"] = g.w(G * hd, D, D) * np.float32(wscale)
        a["v_proj.weight"] = g.w(G * hd, D, D)
        a["o_proj.weight"] = g.w(D, H * hd, H * hd)
        for bname, size in (("q_proj.bias", H * hd), ("k_proj.bias", G * hd),
                            ("v_proj.bias", G * hd), ("o_proj.bias", D)):
            if bname.split(".")[0][0] in biases:
                a[bname] = g(size, s=0.2)
        if norms:
            a["q_norm.weight"] = (1 + g(hd, s=0.3)).astype(np.float32)
            a["k_norm.weight"] = (1 + g(hd, s=0.3)).astype(np.float32)
        if pos:
            f["P"] = positions(B, n, seed)
        if mask is not None:
            f["M"] = mask
    args = "--preset %s --weights-group /%s --heads %d --rope %r %s" % (
        preset, group, H, theta, extra_args)
    if pos:
        args += " --positions P"
    if mask is not None:
        args += " --mask M"
    generic = dict(Wq=gp + "q_proj.weight", Wk=gp + "k_proj.weight", Wv=gp + "v_proj.weight",
                   Wo=gp + "o_proj.weight", layout="linear", causal=True, rope_theta=theta)
    fam = {"X": "@/X", "q_proj_weight": gp + "q_proj.weight", "k_proj_weight": gp + "k_proj.weight",
           "v_proj_weight": gp + "v_proj.weight", "o_proj_weight": gp + "o_proj.weight",
           "heads": H, "kv_heads": G, "theta": theta}
    for b_, key in (("q", "bq"), ("k", "bk"), ("v", "bv"), ("o", "bo")):
        if b_ in biases:
            generic[key] = gp + b_ + "_proj.bias"
            fam[b_ + "_proj_bias"] = gp + b_ + "_proj.bias"
    names = {}
    if norms:
        generic.update(q_norm=gp + "q_norm.weight", k_norm=gp + "k_norm.weight")
        fam.update(q_norm_weight=gp + "q_norm.weight", k_norm_weight=gp + "k_norm.weight")
        names = {"q_norm": "q_norm.weight", "k_norm": "k_norm.weight"}
        if eps is not None:
            generic["norm_eps"] = eps
            fam["rms_norm_eps"] = eps
            args += " --norm-eps %r" % eps
    if pos:
        generic["positions"] = "@/P"
        fam["position_ids"] = "@/P"
    if mask is not None:
        generic["keep"] = "@/M"
        fam["attention_mask"] = "@/M"
    if window:
        generic["window"] = window
        fam["sliding_window"] = window
    if softcap:
        generic["softcap"] = softcap
        fam["attn_logit_softcapping"] = softcap
    scale = None
    if qpas is not None:
        scale = qpas ** -0.5
        fam["query_pre_attn_scalar"] = qpas
    fn = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3",
          "gemma2": "gemma2"}[preset]
    case(name, args, generic, H, G, hd, hd, preset=preset, names=names, modes=PRESET_MODES,
         family={"fn": fn, "args": fam}, scale=scale)


def base(name, g, G=4, layout="xw", extra=None):
    with h5py.File(path(name), "w") as f:
        f["X"] = g(2, 6, 16)
        f["Y"] = g(2, 5, 16)
        if layout == "xw":
            f["W_Q"], f["W_K"], f["W_V"], f["W_O"] = (g.w(16, 16), g.w(16, 4 * G), g.w(16, 4 * G),
                                                      g.w(16, 16))
        if extra:
            extra(f)


def llama_group(f, g, k_rows=8, drop=None):
    a = f.create_group("attn")
    a["q_proj.weight"] = g.w(16, 16)
    a["k_proj.weight"] = g.w(k_rows, 16)
    a["v_proj.weight"] = g.w(k_rows, 16)
    a["o_proj.weight"] = g.w(16, 16)
    if drop:
        del a[drop]


# ================================================================ presets
# Weights under their HF names in a group; X, masks, positions at the root.
def write_presets():
    # gpt2: Conv1D c_attn (D, 3D) = [W_Q | W_K | W_V] columns, c_proj (D, D); causal
    g = Gen(100)
    B, n, D, H = 2, 16, 64, 4
    G_ = "@/transformer/h.0/attn/"
    case("gpt2", "--preset gpt2 --weights-group /transformer/h.0/attn --heads 4",
         gpt2_layer(path("gpt2"), g, B, n, D, H),
         H, H, D // H, D // H, preset="gpt2", modes=PRESET_MODES,
         family={"fn": "gpt2", "args": {"X": "@/X", "c_attn_weight": G_ + "c_attn.weight",
                                        "c_attn_bias": G_ + "c_attn.bias",
                                        "c_proj_weight": G_ + "c_proj.weight",
                                        "c_proj_bias": G_ + "c_proj.bias", "heads": H}})

    # torch-mha: in_proj_weight (3E, E) = [W_Q; W_K; W_V] rows; key_padding_mask True = pad
    g = Gen(110)
    B, n, D, H = 3, 12, 48, 4
    kpm = np.zeros((B, n), bool)
    kpm[1, -4:] = True
    kpm[2, ::3] = True
    for name, cross in (("torch_mha", False), ("torch_mha_cross", True)):
        with h5py.File(path(name), "w") as f:
            f["X"] = g(B, n, D)
            if cross:
                f["Y"] = g(B, 10, D)
            else:
                f["KPM"] = kpm
            a = f.create_group("mha")
            a["in_proj_weight"] = g.w(3 * D, D, D)
            a["in_proj_bias"] = g(3 * D, s=0.1)
            a["out_proj.weight"] = g.w(D, D, D)
            a["out_proj.bias"] = g(D, s=0.1)
        generic = dict(fused("@/mha/in_proj_weight", "@/mha/in_proj_bias", H, H, D // H, D // H,
                             "linear", "blocks"),
                       Wo="@/mha/out_proj.weight", bo="@/mha/out_proj.bias", layout="linear")
        fam = {"query": "@/X", "in_proj_weight": "@/mha/in_proj_weight", "in_proj_bias":
               "@/mha/in_proj_bias", "out_proj_weight": "@/mha/out_proj.weight",
               "out_proj_bias": "@/mha/out_proj.bias", "num_heads": H}
        if cross:
            generic["Y"] = "@/Y"
            fam["key"] = "@/Y"
            args = "--preset torch-mha --weights-group /mha --heads 4 --kv Y"
        else:
            generic["keep"] = {"not": "@/KPM"}
            fam["key_padding_mask"] = "@/KPM"
            args = "--preset torch-mha --weights-group /mha --heads 4 --mask KPM --mask-invert"
        case(name, args, generic, H, H, D // H, D // H, preset="torch-mha", modes=PRESET_MODES,
             family={"fn": "torch_mha", "args": fam})


    llama_like("llama", 120, 2, 20, 64, 8, 2, 8, 500000.0, "llama")
    llama_like("llama_mqa", 121, 3, 14, 64, 4, 1, 16, 10000.0, "llama", pos=True)
    pad = np.ones((2, 12), np.int8)
    pad[1, -5:] = 0
    llama_like("llama_bias", 122, 2, 12, 32, 4, 2, 8, 10000.0, "llama", biases="qkvo", mask=pad)
    llama_like("mistral", 123, 2, 24, 64, 8, 2, 8, 1000000.0, "mistral", extra_args="--window 5",
               window=5)
    llama_like("qwen2", 124, 3, 16, 64, 4, 2, 16, 1000000.0, "qwen2", biases="qkv")
    llama_like("qwen3", 125, 2, 16, 48, 4, 2, 16, 1000000.0, "qwen3", norms=True)
    llama_like("qwen3_eps", 127, 3, 10, 32, 4, 2, 8, 10000.0, "qwen3", norms=True, eps=1e-5,
               pos=True)
    llama_like("gemma2", 126, 2, 20, 48, 4, 2, 16, 10000.0, "gemma2",
               extra_args="--scale %r --softcap 3.0 --window 6" % (24.0 ** -0.5),
               window=6, softcap=3.0, qpas=24.0, wscale=3.0)

    # neox: query_key_value (H*3*hd, D) split per head [q|k|v]; rotary_pct 0.25 -> --rope-dim 4
    g = Gen(130)
    B, n, D, H = 2, 18, 64, 4
    hd = D // H
    with h5py.File(path("neox"), "w") as f:
        f["X"] = g(B, n, D)
        fused_heads_layer(f, g, "gpt_neox/layers.0/attention", D)
    gp = "@/gpt_neox/layers.0/attention/"
    case("neox", "--preset neox --weights-group /gpt_neox/layers.0/attention --heads 4 "
         "--rope 10000 --rope-dim 4",
         dict(fused(gp + "query_key_value.weight", gp + "query_key_value.bias", H, H, hd, hd,
                    "linear", "heads"),
              Wo=gp + "dense.weight", bo=gp + "dense.bias", layout="linear", causal=True,
              rope_theta=10000.0, rope_dim=4),
         H, H, hd, hd, preset="neox", modes=PRESET_MODES,
         family={"fn": "neox", "args": {"X": "@/X", "query_key_value_weight": gp + "query_key_value.weight",
                                        "query_key_value_bias": gp + "query_key_value.bias",
                                        "dense_weight": gp + "dense.weight",
                                        "dense_bias": gp + "dense.bias", "heads": H,
                                        "rotary_ndims": 4, "rotary_emb_base": 10000.0}})

    # gptj: q/k/v/out_proj without biases, rotate_every_two on rotary_dim = 8 of 16
    g = Gen(140)
    B, n, D, H = 2, 16, 64, 4
    hd = D // H
    with h5py.File(path("gptj"), "w") as f:
        f["X"] = g(B, n, D)
        f["P"] = positions(B, n, 140)
        a = f.create_group("transformer/h.0/attn")
        for w in ("q_proj", "k_proj", "v_proj", "out_proj"):
            a[w + ".weight"] = g.w(D, D, D)
    gp = "@/transformer/h.0/attn/"
    case("gptj", "--preset gptj --weights-group /transformer/h.0/attn --heads 4 --rope 10000 "
         "--rope-dim 8 --positions P",
         dict(Wq=gp + "q_proj.weight", Wk=gp + "k_proj.weight", Wv=gp + "v_proj.weight",
              Wo=gp + "out_proj.weight", layout="linear", causal=True, rope_theta=10000.0,
              rope_dim=8, rope_style="gptj", positions="@/P"),
         H, H, hd, hd, preset="gptj", modes=PRESET_MODES,
         family={"fn": "gptj", "args": {"X": "@/X", "q_proj_weight": gp + "q_proj.weight",
                                        "k_proj_weight": gp + "k_proj.weight",
                                        "v_proj_weight": gp + "v_proj.weight",
                                        "out_proj_weight": gp + "out_proj.weight", "heads": H,
                                        "rotary_dim": 8, "base": 10000.0, "position_ids": "@/P"}})

    # bloom: query_key_value split per head, ALiBi; 6 heads (not a power of two), and 8
    # heads with left padding (BLOOM's positions shift by a per-item constant)
    for name, seed, B, n, H, hd, left in (("bloom", 150, 2, 14, 6, 8, False),
                                           ("bloom_left_pad", 151, 3, 12, 8, 4, True)):
        g = Gen(seed)
        D = H * hd
        with h5py.File(path(name), "w") as f:
            f["X"] = g(B, n, D)
            fused_heads_layer(f, g, "h.0/self_attention", D)
            if left:
                am = np.ones((B, n), np.int32)
                am[1, :4] = 0
                am[2, :1] = 0
                f["M"] = am
        gp = "@/h.0/self_attention/"
        generic = dict(fused(gp + "query_key_value.weight", gp + "query_key_value.bias", H, H, hd,
                             hd, "linear", "heads"),
                       Wo=gp + "dense.weight", bo=gp + "dense.bias", layout="linear", causal=True,
                       alibi_slopes="slopes")
        fam = {"X": "@/X", "query_key_value_weight": gp + "query_key_value.weight",
               "query_key_value_bias": gp + "query_key_value.bias", "dense_weight": gp + "dense.weight",
               "dense_bias": gp + "dense.bias", "heads": H}
        args = "--preset bloom --weights-group /h.0/self_attention --heads %d" % H
        if left:
            generic["keep"] = "@/M"
            fam["attention_mask"] = "@/M"
            args += " --mask M"
        case(name, args, generic, H, H, hd, hd, preset="bloom", modes=PRESET_MODES,
             family={"fn": "bloom", "args": fam})

    # bert: self.query/key/value + output.dense, padding mask, not causal
    g = Gen(160)
    B, n, D, H = 3, 10, 32, 4
    hd = D // H
    with h5py.File(path("bert"), "w") as f:
        f["X"] = g(B, n, D)
        am = np.ones((B, n), np.int64)
        am[0, 7:] = 0
        am[2, 3:] = 0
        f["M"] = am
        bert_layer(f, g, "bert/encoder/layer.0/attention", D)
    gp = "@/bert/encoder/layer.0/attention/"
    case("bert", "--preset bert --weights-group /bert/encoder/layer.0/attention --heads 4 --mask M",
         dict(bert_generic(gp), keep="@/M"),
         H, H, hd, hd, preset="bert", modes=PRESET_MODES,
         family={"fn": "bert", "args": {"X": "@/X", "query_weight": gp + "self.query.weight",
                                        "query_bias": gp + "self.query.bias",
                                        "key_weight": gp + "self.key.weight",
                                        "key_bias": gp + "self.key.bias",
                                        "value_weight": gp + "self.value.weight",
                                        "value_bias": gp + "self.value.bias",
                                        "dense_weight": gp + "output.dense.weight",
                                        "dense_bias": gp + "output.dense.bias", "heads": H,
                                        "attention_mask": "@/M"}})

    # explicit options extend a preset: bert made causal
    g = Gen(161)
    B, n, D, H = 2, 9, 32, 4
    with h5py.File(path("bert_causal"), "w") as f:
        f["X"] = g(B, n, D)
        bert_layer(f, g, "attention", D)
    case("bert_causal", "--preset bert --weights-group /attention --heads 4 --causal",
         dict(bert_generic("@/attention/"), causal=True),
         H, H, D // H, D // H, preset="bert", modes=PRESET_MODES)


# ================================================================ variants
# Default names W_Q W_K W_V W_O (b_*) at the root unless said otherwise.

# The cases of the xw layout that differ only in their sizes, options and
# the datasets written after the weights: name, seed, X's shape, (D, H, G,
# d_k, d_v), biases, the datasets extra(g) draws after the weights (in
# order, from the same seed), the options, the reference's arguments
# beyond XW / XWB.
XW_CASES = [
    # GQA, packed xw weights with biases, d_v != d_k
    ("gqa", 200, (2, 10, 32), (32, 4, 2, 8, 6), True, None,
     "--heads 4 --kv-heads 2 --causal", dict(causal=True)),
    # a rank-2 X (no batch axis): GQA, RoPE at (n) positions, (m) mask
    ("rank2_gqa_rope", 202, (11, 32), (32, 4, 2, 8, 8), True,
     lambda g: {"P": (2 + np.arange(11)).astype(np.int64),
                "M": np.array([1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0], np.int8)},
     "--heads 4 --kv-heads 2 --rope 10000 --positions P --mask M --causal",
     dict(rope_theta=10000.0, positions="@/P", keep="@/M", causal=True)),
    # RoPE neox over the whole head, causal
    ("rope_neox", 210, (3, 16, 32), (32, 4, 4, 8, 8), False, None,
     "--heads 4 --rope 10000 --causal", dict(rope_theta=10000.0, causal=True)),
    # RoPE neox on 4 of 8 features, (B, n) int64 positions
    ("rope_neox_partial_pos", 211, (3, 16, 32), (32, 4, 4, 8, 8), True,
     lambda g: {"P": positions(3, 16, 211)},
     "--heads 4 --rope 500 --rope-dim 4 --positions P --causal",
     dict(rope_theta=500.0, rope_dim=4, positions="@/P", causal=True)),
    # RoPE gptj on 6 of 8 features, (n) int32 positions, not causal
    ("rope_gptj_partial_pos", 212, (2, 12, 32), (32, 4, 4, 8, 8), False,
     lambda g: {"P": (5 + 2 * np.arange(12)).astype(np.int32)},
     "--heads 4 --rope 10000 --rope-dim 6 --rope-style gptj --positions P",
     dict(rope_theta=10000.0, rope_dim=6, rope_style="gptj", positions="@/P")),
    # RoPE gptj full head with GQA and a large base
    ("rope_gptj_gqa", 213, (2, 20, 64), (64, 8, 2, 8, 8), False, None,
     "--heads 8 --kv-heads 2 --rope 1000000 --rope-style gptj --causal",
     dict(rope_theta=1000000.0, rope_style="gptj", causal=True)),
    # ALiBi with 6 heads (not a power of two), causal; 8 heads not causal
    ("alibi6", 220, (2, 14, 24), (24, 6, 6, 4, 4), False, None,
     "--heads 6 --alibi --causal", dict(alibi_slopes="slopes", causal=True)),
    ("alibi8", 221, (2, 12, 32), (32, 8, 8, 4, 4), False, None,
     "--heads 8 --alibi", dict(alibi_slopes="slopes")),
    # --alibi-slopes from a dataset (implies --alibi)
    ("alibi_slopes", 222, (2, 10, 32), (32, 4, 4, 8, 8), False,
     lambda g: {"S": np.array([0.5, 0.125, 0.03, 1.0], np.float32)},
     "--heads 4 --alibi-slopes S --causal", dict(alibi_slopes="@/S", causal=True)),
    # ALiBi at --positions (pos_k - pos_q uses the positions, not the indices)
    ("alibi_positions", 223, (3, 12, 32), (32, 4, 4, 8, 8), False,
     lambda g: {"P": positions(3, 12, 223, offset=3)},
     "--heads 4 --alibi --positions P --causal",
     dict(alibi_slopes="slopes", positions="@/P", causal=True)),
    # sliding window, with and without --causal
    ("window_causal", 230, (2, 16, 32), (32, 4, 4, 8, 8), False, None,
     "--heads 4 --window 3 --causal", dict(window=3, causal=True)),
    ("window_only", 231, (2, 12, 32), (32, 4, 4, 8, 8), False, None,
     "--heads 4 --window 4", dict(window=4)),
    # --mask-invert with an (m) uint8 mask, nonzero = masked
    ("mask_invert_1d", 261, (2, 10, 32), (32, 4, 4, 8, 8), False,
     lambda g: {"PAD": np.array([0, 2, 0, 0, 1, 0, 0, 0, 255, 0], np.uint8)},
     "--heads 4 --mask PAD --mask-invert --causal", dict(keep={"not": "@/PAD"}, causal=True)),
]


def write_variants():
    for name, seed, X, (D, H, G, dk, dv), bias, extra, options, more in XW_CASES:
        xw_input(path(name), seed, X, D, H, G, dk, dv, bias, extra)
        case(name, options, dict(XWB if bias else XW, **more), H, G, dk, dv)

    # MQA with per-head 3-D weights (G = 1)
    g = Gen(201)
    with h5py.File(path("mqa_per_head"), "w") as f:
        f["X"] = g(3, 9, 24)
        per_head_weights(f, g, 24, 4, 1, 6, 6, wo_scale=24 ** -0.5)
    case("mqa_per_head", "--heads 4 --kv-heads 1", dict(XW), 4, 1, 6, 6)

    # softcap on logits that exceed it (--scale 1, larger weights)
    g = Gen(240)
    with h5py.File(path("softcap"), "w") as f:
        f["X"] = g(2, 12, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8, wscale=2.0)
    case("softcap", "--heads 4 --softcap 3 --scale 1", dict(XW, softcap=3.0), 4, 4, 8, 8, scale=1.0)

    # attention bias of each broadcast shape; a head axis of 1 is every
    # head's (Hugging Face's additive masks are (B, 1, n, m))
    for name, shape, causal in (("attn_bias_nm", (12, 12), False), ("attn_bias_hnm", (4, 12, 12), True),
                                ("attn_bias_bhnm", (2, 4, 12, 12), False),
                                ("attn_bias_1nm", (1, 12, 12), True),
                                ("attn_bias_b1nm", (2, 1, 12, 12), False)):
        g = Gen(250 + len(shape) + 10 * (1 in shape))
        with h5py.File(path(name), "w") as f:
            f["X"] = g(2, 12, 32)
            xw_weights(f, g, 32, 4, 4, 8, 8)
            f["AB"] = g(*shape)
        case(name, "--heads 4 --attn-bias AB" + (" --causal" if causal else ""),
             dict(XW, attn_bias="@/AB", causal=causal), 4, 4, 8, 8, names={"attn_bias": "AB"})

    # an attention bias that masks keys with -inf (ALiBi-free T5/HF style masks)
    g = Gen(255)
    with h5py.File(path("attn_bias_neg_inf"), "w") as f:
        f["X"] = g(2, 12, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8)
        AB = g(4, 12, 12)
        AB[:, :, 3] = -np.inf                       # key 3 hidden from every query
        AB[1, 5, :] = -np.inf                       # head 1, query 5: every key hidden
        f["AB"] = AB
    case("attn_bias_neg_inf", "--heads 4 --attn-bias AB",
         dict(XW, attn_bias="@/AB"), 4, 4, 8, 8, names={"attn_bias": "AB"})

    # --mask-invert: (B, m) bool True = padding, one item fully padded
    g = Gen(260)
    with h5py.File(path("mask_invert"), "w") as f:
        f["X"] = g(3, 10, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8, bias=True)
        pm = np.zeros((3, 10), bool)
        pm[0, 6:] = True
        pm[1, :] = True
        pm[2, 1::4] = True
        f["PAD"] = pm
    case("mask_invert", "--heads 4 --mask PAD --mask-invert", dict(XWB, keep={"not": "@/PAD"}),
         4, 4, 8, 8)

    # QK-norm before RoPE, explicit and default eps
    for name, seed, n, G, options, more in (
            ("qk_norm_rope", 270, 14, 2, "--heads 4 --kv-heads 2 --q-norm QN --k-norm KN "
             "--norm-eps 1e-5 --rope 10000 --causal", dict(norm_eps=1e-5, rope_theta=10000.0, causal=True)),
            ("qk_norm", 271, 10, 4, "--heads 4 --q-norm QN --k-norm KN", {})):
        g = Gen(seed)
        with h5py.File(path(name), "w") as f:
            f["X"] = g(2, n, 32)
            xw_weights(f, g, 32, 4, G, 8, 8)
            f["QN"] = 1 + g(8, s=0.3)
            f["KN"] = 1 + g(8, s=0.3)
        case(name, options, dict(XW, q_norm="@/QN", k_norm="@/KN", **more), 4, G, 8, 8,
             names={"q_norm": "QN", "k_norm": "KN"})

    # --layout linear, separate weights with biases, d_v != d_k
    g = Gen(280)
    with h5py.File(path("linear"), "w") as f:
        f["X"] = g(2, 11, 40)
        linear_weights(f, g, 40, 4, 8, 5)
    case("linear", "--heads 4 --layout linear", dict(XWB, layout="linear"), 4, 4, 8, 5)

    # fused blocks: linear with GQA; xw without
    g = Gen(281)
    with h5py.File(path("fused_blocks_linear_gqa"), "w") as f:
        f["X"] = g(2, 12, 32)
        f["QKV"] = g.w(4 * 8 + 2 * 8 + 2 * 8, 32, 32)
        f["bQKV"] = g(64, s=0.2)
        f["WO"] = g.w(32, 32, 32)
        f["bO"] = g(32, s=0.2)
    case("fused_blocks_linear_gqa", "--heads 4 --kv-heads 2 --layout linear --wqkv QKV --bqkv bQKV "
         "--wo WO --bo bO --causal",
         dict(fused("@/QKV", "@/bQKV", 4, 2, 8, 8, "linear", "blocks"), Wo="@/WO", bo="@/bO",
              layout="linear", causal=True), 4, 2, 8, 8)
    g = Gen(282)
    with h5py.File(path("fused_blocks_xw"), "w") as f:
        f["X"] = g(3, 10, 32)
        f["QKV"] = g.w(32, 96)
        f["bQKV"] = g(96, s=0.2)
        f["W_O"] = g.w(32, 32)
    case("fused_blocks_xw", "--heads 4 --wqkv QKV --bqkv bQKV --qkv-split blocks",
         dict(fused("@/QKV", "@/bQKV", 4, 4, 8, 8, "xw", "blocks"), Wo="@/W_O"), 4, 4, 8, 8)

    # fused per-head [q|k|v]: linear (GPT-NeoX/BLOOM rows) and xw (the same on columns)
    for name, layout, shape in (("fused_heads_linear", "linear", (96, 32)),
                                ("fused_heads_xw", "xw", (32, 96))):
        g = Gen(283 + len(name))
        with h5py.File(path(name), "w") as f:
            f["X"] = g(2, 12, 32)
            f["QKV"] = g.w(*shape, fan_in=32)
            f["bQKV"] = g(96, s=0.2)
            f["W_O"] = g.w(32, 32)
        case(name, "--heads 4 --layout %s --wqkv QKV --bqkv bQKV --qkv-split heads --causal" % layout,
             dict(fused("@/QKV", "@/bQKV", 4, 4, 8, 8, layout, "heads"), Wo="@/W_O", layout=layout,
                  causal=True), 4, 4, 8, 8)

    # --weights-group: relative names under it, an absolute --wo, X/mask at the root
    g = Gen(290)
    with h5py.File(path("weights_group"), "w") as f:
        f["X"] = g(2, 10, 32)
        w = f.create_group("layers/3")
        w["W_Q"], w["W_K"], w["W_V"] = g.w(32, 32), g.w(32, 16), g.w(32, 16)
        w["b_Q"] = g(32, s=0.2)
        w["QN"] = 1 + g(8, s=0.3)
        w["KN"] = 1 + g(8, s=0.3)
        f["other/W_O"] = g.w(32, 32)
        f["W_O"] = g.w(32, 32) * np.float32(100)          # must not be used
        f["M"] = np.array([[1, 1, 1, 1, 1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1, 1, 1, 1, 1]], np.int8)
    case("weights_group", "--heads 4 --kv-heads 2 --weights-group /layers/3 --wo /other/W_O "
         "--q-norm QN --k-norm KN --mask M",
         dict(Wq="@/layers/3/W_Q", Wk="@/layers/3/W_K", Wv="@/layers/3/W_V", Wo="@/other/W_O",
              bq="@/layers/3/b_Q", q_norm="@/layers/3/QN", k_norm="@/layers/3/KN", keep="@/M"),
         4, 2, 8, 8, names={"q_norm": "QN", "k_norm": "KN"})

    # cross-attention: RoPE at --positions / --kv-positions (B, .), GQA, mask
    g = Gen(300)
    with h5py.File(path("cross_rope"), "w") as f:
        f["X"] = g(2, 9, 32)
        f["Y"] = g(2, 14, 32)
        xw_weights(f, g, 32, 4, 2, 8, 8, bias=True)
        f["P"] = positions(2, 9, 300, offset=20)
        f["KP"] = positions(2, 14, 301, offset=2)
        m_ = np.ones((2, 14), bool)
        m_[1, 10:] = False
        f["M"] = m_
    case("cross_rope", "--heads 4 --kv-heads 2 --kv Y --rope 10000 --positions P --kv-positions KP "
         "--mask M",
         dict(XWB, Y="@/Y", rope_theta=10000.0, positions="@/P", kv_positions="@/KP", keep="@/M"),
         4, 2, 8, 8)

    # cross-attention: a rank-2 --kv shared by the batch, default key positions 0..m-1, causal
    g = Gen(302)
    shared_kv_input(path("cross_rope_default_kvpos"), g, 13, 3)
    case("cross_rope_default_kvpos", "--heads 4 --kv Y --rope 10000 --rope-style gptj --positions P --causal",
         dict(XW, Y="@/Y", rope_theta=10000.0, rope_style="gptj", positions="@/P", causal=True),
         4, 4, 8, 8)

    # cross-attention with ALiBi at (m) key positions
    g = Gen(303)
    with h5py.File(path("cross_alibi"), "w") as f:
        f["X"] = g(2, 8, 32)
        f["Y"] = g(2, 12, 32)
        xw_weights(f, g, 32, 4, 4, 8, 8)
        f["KP"] = (np.arange(12) * 2).astype(np.int64)
    case("cross_alibi", "--heads 4 --kv Y --alibi --kv-positions KP",
         dict(XW, Y="@/Y", alibi_slopes="slopes", kv_positions="@/KP"), 4, 4, 8, 8)

    # everything at once, self-attention: fused linear blocks, GQA 8/2, gptj partial RoPE at
    # positions, ALiBi, window + causal, softcap, (H, n, m) bias, inverted mask, QK-norm
    g = Gen(310)
    B, n, D, H, G, dk = 3, 24, 64, 8, 2, 8
    with h5py.File(path("combined_self"), "w") as f:
        f["X"] = g(B, n, D)
        f["QKV"] = g.w(H * dk + 2 * G * dk, D, D) * np.float32(1.5)
        f["bQKV"] = g(H * dk + 2 * G * dk, s=0.2)
        f["W_O"] = g.w(D, H * dk, H * dk)
        f["b_O"] = g(D, s=0.2)
        f["P"] = positions(B, n, 310, offset=4)
        f["AB"] = g(H, n, n, s=0.5)
        pm = np.zeros((B, n), bool)
        pm[0, -6:] = True
        pm[2, :2] = True
        f["PAD"] = pm
        f["QN"] = 1 + g(dk, s=0.3)
        f["KN"] = 1 + g(dk, s=0.3)
    case("combined_self", "--heads 8 --kv-heads 2 --layout linear --wqkv QKV --bqkv bQKV --bo b_O "
         "--rope 10000 --rope-dim 4 --rope-style gptj --positions P --alibi --window 6 --causal "
         "--softcap 4 --attn-bias AB --mask PAD --mask-invert --q-norm QN --k-norm KN",
         dict(fused("@/QKV", "@/bQKV", H, G, dk, dk, "linear", "blocks"), Wo="@/W_O", bo="@/b_O",
              layout="linear", rope_theta=10000.0, rope_dim=4, rope_style="gptj", positions="@/P",
              alibi_slopes="slopes", window=6, causal=True, softcap=4.0, attn_bias="@/AB",
              keep={"not": "@/PAD"}, q_norm="@/QN", k_norm="@/KN"),
         H, G, dk, dk, names={"attn_bias": "AB", "q_norm": "QN", "k_norm": "KN"})

    # everything at once, cross-attention: MQA, neox RoPE at both positions, softcap with
    # --scale, (B, H, n, m) bias, mask, window without causal
    g = Gen(320)
    B, n, m, D, H, dk = 2, 16, 20, 48, 4, 12
    with h5py.File(path("combined_cross"), "w") as f:
        f["X"] = g(B, n, D)
        f["Y"] = g(B, m, D)
        xw_weights(f, g, D, H, 1, dk, dk, bias=True, wscale=1.5)
        f["P"] = positions(B, n, 320, offset=10)
        f["KP"] = positions(B, m, 321, offset=0)
        f["AB"] = g(B, H, n, m, s=0.5)
        mk = np.ones((B, m), np.int16)
        mk[0, 15:] = 0
        f["M"] = mk
    case("combined_cross", "--heads 4 --kv-heads 1 --kv Y --rope 10000 --positions P "
         "--kv-positions KP --softcap 2 --scale 0.5 --attn-bias AB --mask M --window 5",
         dict(XWB, Y="@/Y", rope_theta=10000.0, positions="@/P", kv_positions="@/KP", softcap=2.0,
              attn_bias="@/AB", keep="@/M", window=5),
         H, 1, dk, dk, names={"attn_bias": "AB"}, scale=0.5)


# ================================================================ bad inputs
# One small valid base (B=2, n=6, D=16, H=4, d_k=4) per case, one thing wrong.
def write_bad_inputs():
    g = Gen(400)
    LL = "--preset llama --weights-group /attn --heads 4 --rope 10000"
    base("bad_g_not_divide", g, extra=lambda f: llama_group(f, g, k_rows=12))
    bad("bad_g_not_divide", "3", "", LL)
    base("bad_k_width", g, extra=lambda f: llama_group(f, g, k_rows=10))
    bad("bad_k_width", "3", "", LL)
    base("bad_kv_heads_option", g, G=2)
    bad("bad_kv_heads_option", "2|3", "", "--heads 4 --kv-heads 3")
    base("bad_k_width_xw", g, extra=lambda f: f.__setitem__("W_K2", g.w(16, 6)))
    bad("bad_k_width_xw", "3", "", "--heads 4 --kv-heads 2 --wk W_K2 --wv W_K2")
    base("bad_options", g)
    bad("bad_options", "2", "", "--heads 4 --rope 10000 --rope-dim 3")
    bad("bad_options", "2|3", "", "--heads 4 --rope 10000 --rope-dim 8")
    bad("bad_options", "2", "", "--heads 4 --rope 10000 --rope-style sideways")
    bad("bad_options", "2", "", "--heads 4 --window 0")
    bad("bad_options", "2", "", "--heads 4 --window -1")
    bad("bad_options", "2", "", "--heads 4 --softcap 0")
    bad("bad_options", "2", "", "--heads 4 --softcap -1")
    bad("bad_options", "2", "", "--heads 4 --layout sideways")
    bad("bad_options", "2", "", "--heads 4 --preset gpt5")
    base("bad_split_heads_kv", g, extra=lambda f: f.__setitem__("QKVH", g.w(16, 48)))
    bad("bad_split_heads_kv", "2", "", "--heads 4 --qkv-split heads --wqkv QKVH --kv Y")
    bad("bad_split_heads_kv", "2", "--wqkv", "--heads 4 --wqkv QKVH --wq W_Q")
    bad("bad_split_heads_kv", "2", "--qkv-split", "--heads 4 --qkv-split heads")
    bad("bad_split_heads_kv", "2", "--mask-invert", "--heads 4 --mask-invert")
    base("bad_positions", g, extra=lambda f: (f.__setitem__("P7", np.arange(7)),
                                              f.__setitem__("P36", np.zeros((3, 6), np.int64)),
                                              f.__setitem__("PF", np.arange(6, dtype=np.float32)),
                                              f.__setitem__("KP4", np.arange(4))))
    bad("bad_positions", "3", "P7", "--heads 4 --rope 10000 --positions P7")
    bad("bad_positions", "3", "P36", "--heads 4 --rope 10000 --positions P36")
    bad("bad_positions", "3", "PF", "--heads 4 --rope 10000 --positions PF")
    bad("bad_positions", "3", "KP4", "--heads 4 --rope 10000 --kv Y --kv-positions KP4")
    base("bad_attn_bias", g, extra=lambda f: (f.__setitem__("AB67", g(6, 7)),
                                              f.__setitem__("AB5", g(5, 6, 6)),
                                              f.__setitem__("ABI", np.zeros((6, 6), np.int32))))
    bad("bad_attn_bias", "3", "AB67", "--heads 4 --attn-bias AB67")
    bad("bad_attn_bias", "3", "AB5", "--heads 4 --attn-bias AB5")
    bad("bad_attn_bias", "3", "ABI", "--heads 4 --attn-bias ABI")
    base("bad_norms", g, extra=lambda f: (f.__setitem__("QN5", g(5)), f.__setitem__("S3", g(3))))
    bad("bad_norms", "3", "QN5", "--heads 4 --q-norm QN5 --k-norm QN5")
    bad("bad_norms", "3", "S3", "--heads 4 --alibi-slopes S3")
    base("bad_preset_missing_v", g, extra=lambda f: llama_group(f, g, drop="v_proj.weight"))
    bad("bad_preset_missing_v", "3", "v_proj.weight", LL)
    base("bad_preset_no_rope", g, extra=lambda f: llama_group(f, g))
    bad("bad_preset_no_rope", "2", "", "--preset llama --weights-group /attn --heads 4")
    base("bad_preset_missing_gpt2", g, extra=lambda f: (
        f.__setitem__("h/c_attn.weight", g.w(16, 48)), f.__setitem__("h/c_attn.bias", g(48))))
    bad("bad_preset_missing_gpt2", "3", "c_proj.weight", "--preset gpt2 --weights-group /h --heads 4")


def make(top):
    global TABLE, BADS
    TABLE = Table(top, MODES)
    BADS = open(os.path.join(top, "bad.tsv"), "w")
    write_presets()
    write_variants()
    write_bad_inputs()
    TABLE.close()
    BADS.close()


# ------------------------------------------------------------------ verify


ALL = ("scores", "weights", "heads", "output", "q", "k", "v")


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def family_ref(f, spec):
    fam = spec.get("family")
    if not fam:
        return None
    fn = getattr(M, fam["fn"])
    return fn(**{k: resolve(f, v) for k, v in fam["args"].items()})


def provenance(grp, spec):
    problems = []
    for key, want in spec["attrs"].items():
        if key not in grp.attrs:
            problems.append("no attribute %s" % key)
            continue
        got = grp.attrs[key]
        if isinstance(want, list):                      # any of these values
            try:
                if not any(float(got) == w for w in want):
                    problems.append("%s = %r, expected one of %r" % (key, got, want))
            except (TypeError, ValueError):
                problems.append("%s = %r, expected one of %r" % (key, got, want))
            continue
        if isinstance(want, str):
            got = text(got)
            if not isinstance(got, str):
                problems.append("%s = %r, expected the string %r" % (key, got, want))
            elif key in ("q_norm", "k_norm", "attn_bias") and want:
                if not (got == want or got.endswith("/" + want)):
                    problems.append("%s = %r, expected %r" % (key, got, want))
            elif got != want:
                problems.append("%s = %r, expected %r" % (key, got, want))
        elif isinstance(want, float):
            try:
                ok_ = abs(float(got) - want) <= 1e-12 * max(abs(want), 1e-300) or float(got) == want
            except (TypeError, ValueError):
                ok_ = False
            if not ok_:
                problems.append("%s = %r, expected %r" % (key, got, want))
        else:
            try:
                ok_ = int(np.asarray(got).item()) == want and np.issubdtype(np.asarray(got).dtype, np.integer)
            except (TypeError, ValueError):
                ok_ = False
            if not ok_:
                problems.append("%s = %r, expected the integer %r" % (key, got, want))
    return problems


def references(top, case):
    """The generic and the family reference of a case (the family one None
    when the case has none); the generic one is the message when the
    reference itself fails."""
    spec = read_spec(top, case)
    with h5py.File(os.path.join(top, case, "in.h5"), "r") as f:
        try:
            gen = M.attention_variant(**variant_kwargs(f, spec["generic"], spec["H"]))
            return spec, gen, family_ref(f, spec)
        except Exception as e:                              # the reference itself
            return spec, "%s: %s" % (type(e).__name__, e), None


def check_run(case, mode, out, spec, gen, fam):
    f64 = mode == "f64"
    problems, checked = [], []
    with h5py.File(out, "r") as fo:
        present = [k for k in ALL if k in fo]
        wanted = {"online": ["heads", "output"], "online_mem": ["output"]}.get(mode, list(ALL))
        if sorted(present) != sorted(wanted):
            problems.append("outputs %s, expected %s" % (present, wanted))
        for k in wanted:
            if k not in fo:
                continue
            got = fo[k][...]
            why = compare(k, got, gen[k], f64)
            if why:
                problems.append(why)
            if fam is not None and k in fam:
                why = compare(k, got, fam[k], f64)
                if why:
                    problems.append("against the %s family code: %s" % (spec["family"]["fn"], why))
            checked.append(k)
        for k in ("k", "v"):
            if k in fo:
                lab = [d.label for d in fo[k].dims]
                want = "kv_head" if spec["G"] < spec["H"] else "head"
                if len(lab) < 3 or lab[-3] != want:
                    problems.append("%s axis labels %s: the head axis should be %r" % (k, lab, want))
        prov = provenance(fo["/"], spec) if mode == "full" else []
    name = "%s %s" % (case, mode)
    if problems:
        print("FAIL %s: %s" % (name, "; ".join(problems)[:600]))
    else:
        print("ok %s (%s%s)" % (name, ",".join(checked),
                                " and the %s family code" % spec["family"]["fn"] if fam else ""))
    if mode == "full":
        if prov:
            print("FAIL %s provenance: %s" % (case, "; ".join(prov)[:600]))
        else:
            print("ok %s provenance (%d attributes)" % (case, len(spec["attrs"])))


def verify(top, done):
    refs = {}
    finished = {}
    for case, mode, out, _ in read_done(done):
        finished[(case, mode)] = out
        if case not in refs:
            refs[case] = references(top, case)
        spec, gen, fam = refs[case]
        if isinstance(gen, str):
            print("FAIL %s %s: the reference failed: %s" % (case, mode, gen))
            continue
        check_run(case, mode, out, spec, gen, fam)

    # --threads 1 and 2 (with --memory 64K): the same bytes
    for (case, mode), out in sorted(finished.items()):
        if mode != "t1" or (case, "t2") not in finished:
            continue
        with h5py.File(out, "r") as a, h5py.File(finished[(case, "t2")], "r") as b:
            problems = same_bits(a, b, ALL)
        if problems:
            print("FAIL %s threads 1 vs 2: %s" % (case, "; ".join(problems)))
        else:
            print("ok %s threads 1 vs 2 bit-identical" % case)


COMMANDS = {"make": (make, 1), "verify": (verify, 2)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]][0](*sys.argv[2:])
