#!/usr/bin/env python3
"""examples/hf-export.py - one GPT-2 layer's attention, as attnrun reads it.

    python3 examples/hf-export.py [--layer L] [--stand-in] OUT.h5
    attnrun OUT.h5 -o out.h5 --preset gpt2 --heads 12 --mask attention_mask ...

Where torch and transformers can be imported, it loads GPT-2 small from the
Hugging Face hub, runs two sentences through it (the shorter padded on the
right) and writes into OUT.h5, for layer L (default 3):

    X                  (2, n, 768) float32   the input of the layer's attention:
                                             ln_1 of the hidden states entering block L
    c_attn.weight      (768, 2304) float32   fused Q|K|V projection, x @ W (Conv1D)
    c_attn.bias        (2304)
    c_proj.weight      (768, 768)            output projection
    c_proj.bias        (768)
    attention_mask     (2, n) int64          1 = a real token, 0 = padding
    tokens             (2, n) UTF-8 strings  tokenizer.convert_ids_to_tokens
    reference/weights  (2, 12, n, n) float32 what transformers computed, to
    reference/output   (2, n, 768) float32   compare attnrun's results with

Elsewhere, or with --stand-in, it writes a stand-in with the same names,
shapes and types: random weights and hidden states (seeded by L), the same
tokens, and reference/* computed with numpy from GPT-2's attention formulas.
The stand-in lets the attnrun side of the walkthrough run anywhere; its
attention patterns mean nothing.
"""
import argparse
import sys

import h5py
import numpy as np

SENTENCES = ["The cat sat down on the mat because it was tired.", "The cat sat down."]
# What GPT-2's tokenizer makes of SENTENCES (the stand-in's tokens).
STAND_IN_TOKENS = [
    ["The", "Ġcat", "Ġsat", "Ġdown", "Ġon", "Ġthe", "Ġmat", "Ġbecause", "Ġit", "Ġwas", "Ġtired", "."],
    ["The", "Ġcat", "Ġsat", "Ġdown", "."] + ["<|endoftext|>"] * 7,
]
D, HEADS = 768, 12
PARAMETERS = ("c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias")


def export_gpt2(layer):
    """The real layer: (X, parameters, mask, tokens, reference weights and output)."""
    import torch
    from transformers import AutoTokenizer, GPT2Model

    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    tokenizer.pad_token = tokenizer.eos_token            # GPT-2 has no padding token
    try:                                                 # eager: it returns the weights
        model = GPT2Model.from_pretrained("gpt2", attn_implementation="eager")
    except TypeError:                                    # transformers before 4.36
        model = GPT2Model.from_pretrained("gpt2")
    model.eval()
    enc = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    block = model.h[layer]
    captured = {}
    hook = block.attn.register_forward_hook(lambda mod, args, out: captured.update(output=out[0]))
    with torch.no_grad():
        res = model(**enc, output_hidden_states=True, output_attentions=True)
        X = block.ln_1(res.hidden_states[layer])         # hidden_states[L] enters block L
    hook.remove()
    state = block.attn.state_dict()                      # the names the gpt2 preset reads
    params = {name: state[name].numpy() for name in PARAMETERS}
    tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in enc["input_ids"].tolist()]
    return (X.numpy(), params, enc["attention_mask"].numpy(), tokens,
            res.attentions[layer].numpy(), captured["output"].numpy())


def gpt2_attention(X, Wqkv, bqkv, Wo, bo, mask, heads):
    """GPT-2's attention in float64: causal, padded keys hidden.
    X (B, n, D) -> weights (B, H, n, n), output (B, n, D)."""
    X, Wqkv, bqkv, Wo, bo = (np.asarray(a, np.float64) for a in (X, Wqkv, bqkv, Wo, bo))
    B, n, E = X.shape
    d = E // heads
    qkv = X @ Wqkv + bqkv                                          # (B, n, 3E): [Q | K | V]
    q, k, v = (qkv[..., i * E:(i + 1) * E].reshape(B, n, heads, d).transpose(0, 2, 1, 3)
               for i in range(3))                                  # (B, H, n, d) each
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)              # (B, H, n, n)
    hidden = np.triu(np.ones((n, n), bool), 1) | (mask[:, None, None, :] == 0)
    logits = np.where(hidden, -np.inf, logits)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(B, n, E)  # heads side by side
    return weights, merged @ Wo + bo


def stand_in(layer):
    """Random values under the real names and shapes."""
    rng = np.random.default_rng(layer)
    B, n = len(STAND_IN_TOKENS), len(STAND_IN_TOKENS[0])
    X = rng.standard_normal((B, n, D)).astype(np.float32)
    scale = np.repeat([0.05, 0.05, 0.02], D)             # Q and K larger: visible patterns
    params = {"c_attn.weight": (rng.standard_normal((D, 3 * D)) * scale).astype(np.float32),
              "c_attn.bias": (rng.standard_normal(3 * D) * 0.02).astype(np.float32),
              "c_proj.weight": (rng.standard_normal((D, D)) * 0.02).astype(np.float32),
              "c_proj.bias": (rng.standard_normal(D) * 0.02).astype(np.float32)}
    mask = np.array([[t != "<|endoftext|>" for t in row] for row in STAND_IN_TOKENS], np.int64)
    weights, output = gpt2_attention(X, params["c_attn.weight"], params["c_attn.bias"],
                                     params["c_proj.weight"], params["c_proj.bias"], mask, HEADS)
    return X, params, mask, STAND_IN_TOKENS, weights, output


def main():
    parser = argparse.ArgumentParser(description="Export one GPT-2 layer's attention for attnrun.")
    parser.add_argument("out", help="the HDF5 file to write")
    parser.add_argument("--layer", type=int, default=3, help="the block, 0 to 11 (default 3)")
    parser.add_argument("--stand-in", action="store_true",
                        help="write random values under the same names, without transformers")
    args = parser.parse_args()
    if not 0 <= args.layer < 12:
        parser.error("--layer must be 0 to 11")
    make = stand_in
    if not args.stand_in:
        try:
            import torch, transformers  # noqa: F401,E401
            make = export_gpt2
        except ImportError:
            print("hf-export: torch or transformers is not importable: writing a stand-in",
                  file=sys.stderr)
    X, params, mask, tokens, ref_weights, ref_output = make(args.layer)
    with h5py.File(args.out, "w") as f:
        f["X"] = np.asarray(X, np.float32)
        for name, value in params.items():
            f[name] = np.asarray(value, np.float32)
        f["attention_mask"] = np.asarray(mask, np.int64)
        f.create_dataset("tokens", data=np.array(tokens, dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f["reference/weights"] = np.asarray(ref_weights, np.float32)
        f["reference/output"] = np.asarray(ref_output, np.float32)
        f.attrs["source"] = "gpt2 layer %d%s" % (args.layer, " (stand-in)" if make is stand_in else "")


if __name__ == "__main__":
    main()
