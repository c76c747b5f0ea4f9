"""tests/ref/models_ref.py - float64 numpy reference for the attention of real
model families (the options of docs/models.md, "Model families": --layout,
--wqkv, --preset, --kv-heads, --rope, --alibi, --window, --softcap,
--q-norm/--k-norm, --attn-bias, --mask-invert, --positions, --kv-positions).
It never calls attnrun and never reads attnrun's output.

Two independent paths to the same numbers:

  * attention_variant(...): one generic function written from
    docs/models.md's formulas (logit = scale*q.k -> softcap -> + ALiBi +
    attn-bias -> masks as -inf; softmax; heads; output).  K/V head of query
    head h is floor(h*G/H); RoPE is written as a rotation of feature pairs.
  * gpt2(), torch_mha(), llama(), mistral(), qwen2(), qwen3(), gemma2(),
    neox(), gptj(), bloom(), bert(): one function per family that takes the
    Hugging Face / torch parameter tensors under their own names and computes
    the layer the way that family's published code does (its views, splits,
    rotate_half / rotate_every_two, repeat_kv by expand+reshape, BLOOM's
    build_alibi_tensor, ...).  Each is written from the formulas of the HF
    source cited above it; no code is copied.

Both return a dict in the shapes attnrun writes (tests/ref/reference.py):
    scores, weights (B, H, n, m)   heads (B, H, n, dv)   output (B, n, D)
    q (B, H, n, dk)                k (B, G, m, dk)       v (B, G, m, dv)
(a rank-2 X drops the batch axis).  Masked scores are -inf; a query row whose
keys are all masked has weights 0 and heads 0 (so its output row is b_O).

Where attnrun (docs/models.md, Model families) deliberately differs from the
HF code:
  * ALiBi: attnrun adds slope_h * (pos_k - pos_q); BLOOM adds
    slope_h * pos_k (pos from the cumulative sum of the attention mask).  They
    differ by slope_h * pos_q, a constant per query row that softmax cancels,
    so weights/heads/output agree; `scores` is docs/models.md's.  bloom()
    below therefore returns BLOOM's logits as "scores_hf" and no "scores".
  * Masked logits: HF adds finfo.min (or -inf); docs/models.md writes -inf,
    and a fully masked row is 0 (HF/torch give a uniform row or NaN).
  * BERT: attnrun's output is output.dense(context) (+ bias); HF's
    BertSelfOutput then adds the residual and a LayerNorm, outside attention.
  * torch MultiheadAttention averages the weights over heads by default;
    attnrun (and torch_mha here, like average_attn_weights=False) keeps them
    per head.
  * GPT-J in HF fixes the RoPE base at 10000; attnrun takes --rope THETA
    (docs/models.md).
  * Gemma 2's RMSNorm uses (1 + weight), but that is the layer norms around
    attention, not inside it; Qwen3's q_norm/k_norm is x*rsqrt(mean x^2+eps)*w.

    python3 tests/ref/models_ref.py        # runs the self-checks
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402  (tests/ref/reference.py)

OUTPUTS = reference.OUTPUTS


# --------------------------------------------------------------- helpers

def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


_masked_softmax = reference.masked_softmax   # one softmax for the tree


def alibi_slopes(H):
    """The ALiBi slopes of H heads, from the ALiBi paper's definition
    (Press et al., "Train short, test long", the get_slopes of its reference
    code): for a power of two n the geometric sequence starting at
    2^(-8/n) with that ratio; otherwise the slopes of the largest power of
    two p < H followed by every other slope of 2p (the odd ones), H - p of
    them.  bloom() below computes them BLOOM's way (base and powers), and the
    self-check compares the two."""
    def pow2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    p = 1
    while p * 2 <= H:
        p *= 2
    s = pow2(p)
    if p != H:
        s += pow2(2 * p)[0::2][: H - p]
    return np.array(s, dtype=np.float64)


def split_fused(Wqkv, bqkv, heads, kv_heads, d_k, d_v, layout="xw", split="blocks"):
    """docs/models.md's --wqkv/--bqkv: (W_Q, W_K, W_V, b_Q, b_K, b_V), each in
    `layout` (2-D).  blocks: output features [Q | K | V] (H*dk, G*dk, G*dv);
    heads (G == H, dv == dk): per head h the features h*3dk + [0,dk) are q,
    + [dk,2dk) k, + [2dk,3dk) v.  xw: features are columns; linear: rows."""
    W = _f64(Wqkv)
    Wf = W.T if layout == "xw" else W            # (features, D)
    b = _f64(bqkv)
    H, G = heads, kv_heads
    if split == "blocks":
        cuts = [H * d_k, H * d_k + G * d_k, H * d_k + G * d_k + G * d_v]
        assert Wf.shape[0] == cuts[2], (Wf.shape, cuts)
        parts = [slice(0, cuts[0]), slice(cuts[0], cuts[1]), slice(cuts[1], cuts[2])]
        Ws = [Wf[p] for p in parts]
        bs = [None if b is None else b[p] for p in parts]
    else:
        assert G == H and d_v == d_k and Wf.shape[0] == 3 * H * d_k
        idx = np.arange(3 * H * d_k).reshape(H, 3, d_k)
        Ws = [Wf[idx[:, j, :].reshape(-1)] for j in range(3)]
        bs = [None if b is None else b[idx[:, j, :].reshape(-1)] for j in range(3)]
    if layout == "xw":
        Ws = [w.T for w in Ws]
    return (*Ws, *bs)


def _per_head_in(W, nheads, layout):
    """Projection weight -> (nheads, D, d) with y_h = x @ W[h]."""
    W = _f64(W)
    if W.ndim == 3:
        assert layout == "xw", "3-D weights only in the xw layout"
        assert W.shape[0] == nheads, (W.shape, nheads)
        return W
    if layout == "linear":
        W = W.T                                    # (D, nheads*d)
    D, cols = W.shape
    assert cols % nheads == 0, (W.shape, nheads)
    d = cols // nheads
    return np.stack([W[:, h * d:(h + 1) * d] for h in range(nheads)])


def _per_head_out(W, H, layout):
    """Output weight -> (H, dv, D) with output = sum_h heads_h @ W[h]."""
    W = _f64(W)
    if W.ndim == 3:
        assert layout == "xw"
        return W
    if layout == "linear":
        W = W.T                                    # (H*dv, D)
    rows, D = W.shape
    dv = rows // H
    return np.stack([W[h * dv:(h + 1) * dv, :] for h in range(H)])


def _bias_heads(b, nheads):
    return 0.0 if b is None else _f64(b).reshape(nheads, -1)[None, :, None, :]


def _positions(p, B, length):
    """(length) or (B, length) integer positions -> (B, length) float64;
    0..length-1 when None."""
    if p is None:
        return np.broadcast_to(np.arange(length, dtype=np.float64), (B, length))
    p = np.asarray(p)
    assert np.issubdtype(p.dtype, np.integer), "positions must be integers"
    p = p.astype(np.float64)
    if p.ndim == 1:
        assert p.shape == (length,)
        return np.broadcast_to(p, (B, length))
    assert p.shape == (B, length), (p.shape, B, length)
    return p


def rope(x, pos, theta, R, style):
    """docs/models.md's RoPE on x (B, heads, L, d) at positions pos (B, L):
    the first R features rotate, pair i by the angle pos * theta^(-2i/R).
    neox pairs feature i with i + R/2; gptj pairs 2i with 2i+1.  Each pair
    (a, b) becomes (a cos - b sin, b cos + a sin)."""
    x = np.array(x, dtype=np.float64)
    half = R // 2
    inv = theta ** (-(2.0 * np.arange(half)) / R)           # (R/2)
    ang = pos[:, None, :, None] * inv                       # (B, 1, L, R/2)
    c, s = np.cos(ang), np.sin(ang)
    if style == "neox":
        ia, ib = np.arange(half), np.arange(half) + half
    elif style == "gptj":
        ia, ib = 2 * np.arange(half), 2 * np.arange(half) + 1
    else:
        raise ValueError(style)
    a, b = x[..., ia].copy(), x[..., ib].copy()
    x[..., ia] = a * c - b * s
    x[..., ib] = b * c + a * s
    return x


def rms_norm_rows(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis (docs/models.md's QK-norm)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * _f64(w)


# ---------------------------------------------------------- the generic path

def attention_variant(X, Wq, Wk, Wv, Wo, bq=None, bk=None, bv=None, bo=None, heads=None,
                      kv_heads=None, layout="xw", scale=None, causal=False, window=0,
                      softcap=0.0, alibi_slopes=None, attn_bias=None, keep=None,
                      rope_theta=0.0, rope_dim=None, rope_style="neox", positions=None,
                      kv_positions=None, q_norm=None, k_norm=None, norm_eps=1e-6, Y=None):
    """Every output of one attention layer as docs/models.md's "The math"
    defines it, in float64.  X (B, n, D) or (n, D); Y (the --kv dataset) or
    None for self-attention.  layout "xw" or "linear" (see docs/models.md's
    "Input datasets").
    keep: key mask, (B, m) or (m), True/nonzero = the key may be attended
    (pass ~mask for --mask-invert).  alibi_slopes: (H) array, or None.
    attn_bias: (n, m), (H, n, m) or (B, H, n, m); H may be 1 (every head adds it).  rope_theta 0 = no RoPE;
    rope_dim None = d_k.  window 0 = none; softcap 0 = none."""
    X = _f64(X)
    rank2 = X.ndim == 2
    if rank2:
        X = X[None]
    Yv = X if Y is None else _f64(Y)
    if Yv.ndim == 2:
        Yv = np.broadcast_to(Yv, (X.shape[0],) + Yv.shape)
    B, n, D = X.shape
    m = Yv.shape[1]
    Wq3 = _per_head_in(Wq, heads if _f64(Wq).ndim == 2 else _f64(Wq).shape[0], layout)
    H, _, dk = Wq3.shape
    if heads is not None:
        assert heads == H
    Wk_ = _f64(Wk)
    if kv_heads is None:
        kv_heads = Wk_.shape[0] if Wk_.ndim == 3 else \
            (Wk_.shape[0] if layout == "linear" else Wk_.shape[1]) // dk
    G = kv_heads
    assert H % G == 0, "G must divide H"
    Wk3 = _per_head_in(Wk_, G, layout)
    Wv3 = _per_head_in(Wv, G, layout)
    assert Wk3.shape[2] == dk
    dv = Wv3.shape[2]
    Wo3 = _per_head_out(Wo, H, layout)
    assert Wo3.shape[:2] == (H, dv)

    Q = np.einsum("bnd,hdk->bhnk", X, Wq3) + _bias_heads(bq, H)
    K = np.einsum("bmd,gdk->bgmk", Yv, Wk3) + _bias_heads(bk, G)
    V = np.einsum("bmd,gdk->bgmk", Yv, Wv3) + _bias_heads(bv, G)
    if q_norm is not None:
        Q = rms_norm_rows(Q, q_norm, norm_eps)
    if k_norm is not None:
        K = rms_norm_rows(K, k_norm, norm_eps)

    pq = _positions(positions, B, n)
    if Y is None:
        pk = pq
    else:
        pk = _positions(kv_positions, B, m)
    if rope_theta:
        R = dk if rope_dim is None else rope_dim
        assert R % 2 == 0 and R <= dk
        Q = rope(Q, pq, rope_theta, R, rope_style)
        K = rope(K, pk, rope_theta, R, rope_style)

    kvh = np.array([(h * G) // H for h in range(H)])     # query head -> K/V head
    Kh, Vh = K[:, kvh], V[:, kvh]
    if scale is None:
        scale = 1.0 / math.sqrt(dk)
    S = np.einsum("bhqk,bhmk->bhqm", Q, Kh) * scale
    if softcap:
        S = softcap * np.tanh(S / softcap)
    if alibi_slopes is not None:
        sl = _f64(alibi_slopes).reshape(H)
        S = S + sl[None, :, None, None] * (pk[:, None, None, :] - pq[:, None, :, None])
    if attn_bias is not None:
        ab = _f64(attn_bias)
        assert ab.shape in ((n, m), (H, n, m), (B, H, n, m), (1, n, m), (B, 1, n, m)), ab.shape
        S = S + ab
    qi = np.arange(n)[:, None]
    ki = np.arange(m)[None, :]
    hidden = np.zeros((B, 1, n, m), bool)
    if causal:
        hidden |= (ki > qi)[None, None]
    if window:
        hidden |= ~(qi - window < ki)[None, None]
    if keep is not None:
        kp = np.asarray(keep).astype(bool)
        kp = np.broadcast_to(kp, (B, m))
        hidden |= ~kp[:, None, None, :]
    hidden = np.broadcast_to(hidden, S.shape)
    S, A = _masked_softmax(S, hidden)
    Hd = np.einsum("bhqm,bhmv->bhqv", A, Vh)
    out = np.einsum("bhqv,hvd->bqd", Hd, Wo3)
    if bo is not None:
        out = out + _f64(bo)
    res = {"scores": S, "weights": A, "heads": Hd, "output": out, "q": Q, "k": K, "v": V}
    return {k: v[0] for k, v in res.items()} if rank2 else res


# ------------------------------------------------- the per-family HF paths

def _linear(x, weight, bias=None):
    """torch.nn.functional.linear: x @ weight^T + bias."""
    y = x @ _f64(weight).T
    return y if bias is None else y + _f64(bias)


def _conv1d(x, weight, bias=None):
    """transformers.pytorch_utils.Conv1D (GPT-2): x @ weight + bias, weight (nx, nf)."""
    y = x @ _f64(weight)
    return y if bias is None else y + _f64(bias)


def _hf_padding(attention_mask, B, m):
    """HF attention_mask (B, m), 1 = attend -> hidden (B, 1, 1, m)."""
    if attention_mask is None:
        return np.zeros((B, 1, 1, m), bool)
    am = np.broadcast_to(np.asarray(attention_mask), (B, m))
    return (am == 0)[:, None, None, :]


def _finish(S, hidden, V_full, merge, out_proj, q, k, v):
    S, A = _masked_softmax(S, np.broadcast_to(hidden, S.shape))
    ctx = A @ V_full
    out = out_proj(merge(ctx))
    res = {"scores": S, "weights": A, "heads": ctx, "output": out, "q": q, "k": k, "v": v}
    return res


def _rotate_half(x):
    # matches transformers/models/llama/modeling_llama.py: rotate_half
    # (second half negated to the front, first half behind it)
    h = x.shape[-1] // 2
    return np.concatenate((-x[..., h:], x[..., :h]), axis=-1)


def _llama_cos_sin(position_ids, dim, base):
    # matches transformers/models/llama/modeling_llama.py: LlamaRotaryEmbedding
    # (inv_freq = 1/base^(arange(0, dim, 2)/dim); emb = cat(freqs, freqs))
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    freqs = position_ids[:, :, None].astype(np.float64) * inv_freq[None, None, :]
    emb = np.concatenate((freqs, freqs), axis=-1)
    return np.cos(emb), np.sin(emb)


def _apply_rotary_pos_emb(q, k, cos, sin):
    # matches transformers/models/llama/modeling_llama.py: apply_rotary_pos_emb
    # (cos/sin unsqueezed on the head axis; x*cos + rotate_half(x)*sin)
    cos, sin = cos[:, None], sin[:, None]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _repeat_kv(x, n_rep):
    # matches transformers/models/llama/modeling_llama.py: repeat_kv
    # ((B, G, L, d) -> expand to (B, G, n_rep, L, d) -> reshape (B, G*n_rep, L, d))
    B, G, L, d = x.shape
    if n_rep == 1:
        return x
    return np.broadcast_to(x[:, :, None], (B, G, n_rep, L, d)).reshape(B, G * n_rep, L, d)


def _rmsnorm(x, weight, eps):
    # matches transformers/models/qwen3/modeling_qwen3.py: Qwen3RMSNorm
    # (= LlamaRMSNorm: weight * x * rsqrt(mean(x^2) + eps))
    variance = np.mean(x ** 2, axis=-1, keepdims=True)
    return _f64(weight) * (x / np.sqrt(variance + eps))


# matches transformers/models/llama/modeling_llama.py: LlamaAttention.forward
# (q/k/v_proj, view(B, n, -1, head_dim).transpose(1, 2), apply_rotary_pos_emb,
# repeat_kv, matmul * head_dim^-0.5, additive causal mask, softmax, o_proj);
# with the options of its relatives:
#   transformers/models/mistral/modeling_mistral.py: sliding_window
#     (mask k <= q - sliding_window, _prepare_4d_causal_attention_mask_with_cache_position)
#   transformers/models/qwen2/modeling_qwen2.py: q/k/v_proj bias=True, o_proj no bias
#   transformers/models/qwen3/modeling_qwen3.py: q_norm/k_norm (Qwen3RMSNorm on
#     view(hidden_shape), before apply_rotary_pos_emb)
#   transformers/models/gemma2/modeling_gemma2.py: scaling = query_pre_attn_scalar**-0.5,
#     eager_attention_forward's attn_logit_softcapping (/cap, tanh, *cap before the
#     mask), Gemma2DecoderLayer's sliding window (tril(ones, diagonal=-sliding_window))
def _decoder_layer_attention(hidden_states, q_proj_weight, k_proj_weight, v_proj_weight,
                             o_proj_weight, heads, kv_heads, rope_theta, position_ids=None,
                             attention_mask=None, q_proj_bias=None, k_proj_bias=None,
                             v_proj_bias=None, o_proj_bias=None, q_norm_weight=None,
                             k_norm_weight=None, rms_norm_eps=1e-6, scaling=None,
                             attn_logit_softcapping=None, sliding_window=None,
                             window_style="mistral"):
    x = _f64(hidden_states)
    bsz, q_len, _ = x.shape
    head_dim = _f64(q_proj_weight).shape[0] // heads
    hidden_shape = (bsz, q_len, -1, head_dim)
    q = _linear(x, q_proj_weight, q_proj_bias).reshape(hidden_shape)
    k = _linear(x, k_proj_weight, k_proj_bias).reshape(hidden_shape)
    v = _linear(x, v_proj_weight, v_proj_bias).reshape(hidden_shape)
    assert k.shape[2] == kv_heads
    if q_norm_weight is not None:
        q = _rmsnorm(q, q_norm_weight, rms_norm_eps)
    if k_norm_weight is not None:
        k = _rmsnorm(k, k_norm_weight, rms_norm_eps)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    if position_ids is None:
        position_ids = np.arange(q_len)[None].repeat(bsz, 0)
    position_ids = np.broadcast_to(np.asarray(position_ids), (bsz, q_len))
    cos, sin = _llama_cos_sin(position_ids, head_dim, rope_theta)
    q, k = _apply_rotary_pos_emb(q, k, cos, sin)
    n_rep = heads // kv_heads
    key_states, value_states = _repeat_kv(k, n_rep), _repeat_kv(v, n_rep)
    if scaling is None:
        scaling = head_dim ** -0.5
    attn = (q @ key_states.transpose(0, 1, 3, 2)) * scaling
    if attn_logit_softcapping is not None:
        attn = np.tanh(attn / attn_logit_softcapping) * attn_logit_softcapping
    causal = np.triu(np.ones((q_len, q_len), bool), 1)
    if sliding_window is not None:
        if window_style == "gemma2":
            causal = causal | np.tril(np.ones((q_len, q_len), bool), -sliding_window)
        else:
            cache_position = np.arange(q_len)
            causal = causal | (np.arange(q_len)[None, :] <= cache_position[:, None] - sliding_window)
    hidden = causal[None, None] | _hf_padding(attention_mask, bsz, q_len)

    def merge(ctx):
        return ctx.transpose(0, 2, 1, 3).reshape(bsz, q_len, -1)

    return _finish(attn, hidden, value_states, merge,
                   lambda a: _linear(a, o_proj_weight, o_proj_bias), q, k, v)


def llama(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, heads, kv_heads,
          theta, position_ids=None, attention_mask=None, q_proj_bias=None, k_proj_bias=None,
          v_proj_bias=None, o_proj_bias=None):
    """LlamaAttention (attention_bias adds all four biases)."""
    return _decoder_layer_attention(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                    heads, kv_heads, theta, position_ids, attention_mask,
                                    q_proj_bias, k_proj_bias, v_proj_bias, o_proj_bias)


def mistral(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, heads, kv_heads,
            theta, sliding_window=None, position_ids=None, attention_mask=None):
    """MistralAttention with its sliding-window causal mask."""
    return _decoder_layer_attention(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                    heads, kv_heads, theta, position_ids, attention_mask,
                                    sliding_window=sliding_window, window_style="mistral")


def qwen2(X, q_proj_weight, q_proj_bias, k_proj_weight, k_proj_bias, v_proj_weight, v_proj_bias,
          o_proj_weight, heads, kv_heads, theta, position_ids=None, attention_mask=None):
    """Qwen2Attention: biases on q/k/v_proj only."""
    return _decoder_layer_attention(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                    heads, kv_heads, theta, position_ids, attention_mask,
                                    q_proj_bias, k_proj_bias, v_proj_bias)


def qwen3(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, q_norm_weight,
          k_norm_weight, heads, kv_heads, theta, rms_norm_eps=1e-6, position_ids=None,
          attention_mask=None):
    """Qwen3Attention: per-head RMSNorm of q and k before RoPE."""
    return _decoder_layer_attention(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                    heads, kv_heads, theta, position_ids, attention_mask,
                                    q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight,
                                    rms_norm_eps=rms_norm_eps)


def gemma2(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, heads, kv_heads,
           theta, query_pre_attn_scalar, attn_logit_softcapping=None, sliding_window=None,
           position_ids=None, attention_mask=None):
    """Gemma2Attention (eager): scaling query_pre_attn_scalar^-0.5, logit
    softcapping before the mask, sliding window on the even (sliding) layers."""
    return _decoder_layer_attention(X, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                    heads, kv_heads, theta, position_ids, attention_mask,
                                    scaling=query_pre_attn_scalar ** -0.5,
                                    attn_logit_softcapping=attn_logit_softcapping,
                                    sliding_window=sliding_window, window_style="gemma2")


# matches transformers/models/gpt2/modeling_gpt2.py: GPT2Attention.forward / _attn
# (c_attn Conv1D, .split(split_size=embed_dim, dim=2) into q|k|v, _split_heads
# view(B, n, H, hd).permute(0, 2, 1, 3), attn_weights / value.size(-1)**0.5,
# causal `bias` buffer (tril), softmax, _merge_heads, c_proj Conv1D)
def gpt2(X, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias, heads, attention_mask=None):
    x = _f64(X)
    B, n, E = x.shape
    hd = E // heads
    qkv = _conv1d(x, c_attn_weight, c_attn_bias)
    q, k, v = qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]

    def split_heads(t):
        return t.reshape(B, n, heads, hd).transpose(0, 2, 1, 3)
    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    attn = (q @ k.transpose(0, 1, 3, 2)) / (v.shape[-1] ** 0.5)
    bias = np.tril(np.ones((n, n), bool))
    hidden = ~bias[None, None] | _hf_padding(attention_mask, B, n)
    return _finish(attn, hidden, v, lambda c: c.transpose(0, 2, 1, 3).reshape(B, n, E),
                   lambda a: _conv1d(a, c_proj_weight, c_proj_bias), q, k, v)


# matches torch/nn/functional.py: multi_head_attention_forward (torch.nn.MultiheadAttention,
# batch_first=True, need_weights=True, average_attn_weights=False): _in_projection_packed
# (self-attention: linear(x, in_proj_weight, in_proj_bias) chunked into q|k|v; cross: q from
# W[:E], k and v from W[E:]), q.view(L, B*H, hd) head split, q scaled by hd^-0.5 before
# bmm, key_padding_mask True = ignored key, float attn_mask added, softmax, out_proj.
def torch_mha(query, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads,
              key=None, key_padding_mask=None, attn_mask=None):
    xq = _f64(query)
    xk = xq if key is None else _f64(key)
    B, L, E = xq.shape
    S_ = xk.shape[1]
    W = _f64(in_proj_weight)
    b = _f64(in_proj_bias)
    if key is None:
        q, k, v = np.split(_linear(xq, W, b), 3, axis=-1)
    else:
        q = _linear(xq, W[:E], None if b is None else b[:E])
        k, v = np.split(_linear(xk, W[E:], None if b is None else b[E:]), 2, axis=-1)
    hd = E // num_heads
    # seq-first as torch does internally: (L, B, E) -> (L, B*H, hd) -> (B*H, L, hd)
    qs = q.transpose(1, 0, 2).reshape(L, B * num_heads, hd).transpose(1, 0, 2)
    ks = k.transpose(1, 0, 2).reshape(S_, B * num_heads, hd).transpose(1, 0, 2)
    vs = v.transpose(1, 0, 2).reshape(S_, B * num_heads, hd).transpose(1, 0, 2)
    attn = (qs * (1.0 / math.sqrt(hd))) @ ks.transpose(0, 2, 1)
    attn = attn.reshape(B, num_heads, L, S_)
    if attn_mask is not None:
        attn = attn + _f64(attn_mask)
    hidden = np.zeros((B, 1, L, S_), bool)
    if key_padding_mask is not None:
        hidden = hidden | np.asarray(key_padding_mask).astype(bool)[:, None, None, :]
    Vf = vs.reshape(B, num_heads, S_, hd)
    return _finish(attn, hidden, Vf, lambda c: c.transpose(0, 2, 1, 3).reshape(B, L, E),
                   lambda a: _linear(a, out_proj_weight, out_proj_bias),
                   qs.reshape(B, num_heads, L, hd), ks.reshape(B, num_heads, S_, hd), Vf)


# matches transformers/models/gpt_neox/modeling_gpt_neox.py: GPTNeoXAttention.forward
# (query_key_value output viewed as (B, n, H, 3*head_size); q = [..., :hs], k = [hs:2hs],
# v = [2hs:]; partial rotary: query[..., :rotary_ndims] rotated, query[..., rotary_ndims:]
# passed through, GPTNeoXRotaryEmbedding(dim=rotary_ndims) + rotate_half/apply_rotary_pos_emb;
# norm_factor = sqrt(head_size); causal; dense)
def neox(X, query_key_value_weight, query_key_value_bias, dense_weight, dense_bias, heads,
         rotary_ndims, rotary_emb_base=10000.0, position_ids=None, attention_mask=None):
    x = _f64(X)
    B, n, _ = x.shape
    qkv = _linear(x, query_key_value_weight, query_key_value_bias)
    hs = qkv.shape[-1] // (3 * heads)
    qkv = qkv.reshape(B, n, heads, 3 * hs)
    q = qkv[..., :hs].transpose(0, 2, 1, 3)
    k = qkv[..., hs:2 * hs].transpose(0, 2, 1, 3)
    v = qkv[..., 2 * hs:].transpose(0, 2, 1, 3)
    if position_ids is None:
        position_ids = np.arange(n)[None].repeat(B, 0)
    position_ids = np.broadcast_to(np.asarray(position_ids), (B, n))
    cos, sin = _llama_cos_sin(position_ids, rotary_ndims, rotary_emb_base)
    q_rot, k_rot = _apply_rotary_pos_emb(q[..., :rotary_ndims], k[..., :rotary_ndims], cos, sin)
    q = np.concatenate((q_rot, q[..., rotary_ndims:]), axis=-1)
    k = np.concatenate((k_rot, k[..., rotary_ndims:]), axis=-1)
    attn = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hs)
    hidden = np.triu(np.ones((n, n), bool), 1)[None, None] | _hf_padding(attention_mask, B, n)
    return _finish(attn, hidden, v, lambda c: c.transpose(0, 2, 1, 3).reshape(B, n, -1),
                   lambda a: _linear(a, dense_weight, dense_bias), q, k, v)


def _rotate_every_two(x):
    # matches transformers/models/gptj/modeling_gptj.py: rotate_every_two
    # (stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2))
    return np.stack((-x[..., 1::2], x[..., 0::2]), axis=-1).reshape(x.shape)


def _gptj_sincos(position_ids, dim, base):
    # matches transformers/models/gptj/modeling_gptj.py: create_sinusoidal_positions
    # (inv_freq = 1/base^(arange(0, dim, 2)/dim); cat(sin, cos)), gathered at position_ids
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    sinusoid = position_ids[..., None].astype(np.float64) * inv_freq
    sincos = np.concatenate((np.sin(sinusoid), np.cos(sinusoid)), axis=-1)
    return sincos[..., : dim // 2], sincos[..., dim // 2:]


def _gptj_apply_rotary(t, sin, cos):
    # matches transformers/models/gptj/modeling_gptj.py: apply_rotary_pos_emb
    # (sin/cos repeat_interleave'd by 2 on the feature axis, t is (B, n, H, rot))
    sin = np.repeat(sin[:, :, None, :], 2, axis=3)
    cos = np.repeat(cos[:, :, None, :], 2, axis=3)
    return t * cos + _rotate_every_two(t) * sin


# matches transformers/models/gptj/modeling_gptj.py: GPTJAttention.forward / _attn
# (q/k/v_proj without bias, _split_heads(rotary=True) keeps (B, n, H, hd) for the
# rotation, rotary_dim partial rotation [:rotary_dim] + pass-through, permute to
# (B, H, n, hd), attn / sqrt(head_dim), causal, _merge_heads, out_proj)
def gptj(X, q_proj_weight, k_proj_weight, v_proj_weight, out_proj_weight, heads,
         rotary_dim=None, base=10000.0, position_ids=None, attention_mask=None):
    x = _f64(X)
    B, n, _ = x.shape
    q = _linear(x, q_proj_weight)
    hd = q.shape[-1] // heads
    q = q.reshape(B, n, heads, hd)
    k = _linear(x, k_proj_weight).reshape(B, n, heads, hd)
    v = _linear(x, v_proj_weight).reshape(B, n, heads, hd).transpose(0, 2, 1, 3)
    if position_ids is None:
        position_ids = np.arange(n)[None].repeat(B, 0)
    position_ids = np.broadcast_to(np.asarray(position_ids), (B, n))
    rd = hd if rotary_dim is None else rotary_dim
    sin, cos = _gptj_sincos(position_ids, rd, base)
    k = np.concatenate((_gptj_apply_rotary(k[..., :rd], sin, cos), k[..., rd:]), axis=-1)
    q = np.concatenate((_gptj_apply_rotary(q[..., :rd], sin, cos), q[..., rd:]), axis=-1)
    k, q = k.transpose(0, 2, 1, 3), q.transpose(0, 2, 1, 3)
    attn = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hd)
    hidden = np.triu(np.ones((n, n), bool), 1)[None, None] | _hf_padding(attention_mask, B, n)
    return _finish(attn, hidden, v, lambda c: c.transpose(0, 2, 1, 3).reshape(B, n, -1),
                   lambda a: _linear(a, out_proj_weight), q, k, v)


def build_alibi_slopes(n_head):
    # matches transformers/models/bloom/modeling_bloom.py: build_alibi_tensor (its slopes)
    # (closest power of two p: base 2^(-(2^-(log2 p - 3))), powers 1..p; otherwise extra
    # base 2^(-(2^-(log2 2p - 3))) with odd powers 1, 3, ..., 2*min(p, n_head - p) - 1)
    p = 2 ** math.floor(math.log2(n_head))
    base = 2.0 ** (-(2.0 ** -(math.log2(p) - 3)))
    slopes = [base ** i for i in range(1, p + 1)]
    if p != n_head:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * p) - 3)))
        rem = min(p, n_head - p)
        slopes += [extra ** i for i in range(1, 1 + 2 * rem, 2)]
    return np.array(slopes)


# matches transformers/models/bloom/modeling_bloom.py: BloomAttention.forward,
# _split_heads (fused output reshaped (B, n, H, 3*hd), split by hd into q, k, v),
# build_alibi_tensor (alibi = slopes * ((cumsum(mask) - 1) * mask), added to the
# logits: baddbmm(alibi, q, k^T, alpha=1/sqrt(hd))), causal + padding mask, dense.
# Its logits are slope*pos_k + q.k/sqrt(hd); returned as "scores_hf" (the
# scores of docs/models.md use slope*(pos_k - pos_q)).
def bloom(X, query_key_value_weight, query_key_value_bias, dense_weight, dense_bias, heads,
          attention_mask=None):
    x = _f64(X)
    B, n, _ = x.shape
    fused = _linear(x, query_key_value_weight, query_key_value_bias)
    hd = fused.shape[-1] // (3 * heads)
    fused = fused.reshape(B, n, heads, 3 * hd)
    q, k, v = (fused[..., j * hd:(j + 1) * hd].transpose(0, 2, 1, 3) for j in range(3))
    am = np.ones((B, n)) if attention_mask is None else \
        np.broadcast_to(np.asarray(attention_mask, dtype=np.float64), (B, n))
    arange = ((np.cumsum(am, axis=-1) - 1) * am)[:, None, :]           # (B, 1, n)
    alibi = build_alibi_slopes(heads)[None, :, None] * arange          # (B, H, n)
    attn = alibi[:, :, None, :] + (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd))
    hidden = np.triu(np.ones((n, n), bool), 1)[None, None] | _hf_padding(attention_mask, B, n)
    res = _finish(attn, hidden, v, lambda c: c.transpose(0, 2, 1, 3).reshape(B, n, -1),
                  lambda a: _linear(a, dense_weight, dense_bias), q, k, v)
    res["scores_hf"] = res.pop("scores")
    return res


# matches transformers/models/bert/modeling_bert.py: BertSelfAttention.forward
# (query/key/value Linear with bias, transpose_for_scores view(B, n, H, hd).permute(0, 2, 1, 3),
# scores / sqrt(hd), extended attention mask (1 - mask) * min added, softmax, context
# permute + view) and BertSelfOutput.dense (its dropout, residual and LayerNorm are not
# part of attnrun's output).
def bert(X, query_weight, query_bias, key_weight, key_bias, value_weight, value_bias,
         dense_weight, dense_bias, heads, attention_mask=None):
    x = _f64(X)
    B, n, _ = x.shape

    def transpose_for_scores(t):
        return t.reshape(B, n, heads, -1).transpose(0, 2, 1, 3)
    q = transpose_for_scores(_linear(x, query_weight, query_bias))
    k = transpose_for_scores(_linear(x, key_weight, key_bias))
    v = transpose_for_scores(_linear(x, value_weight, value_bias))
    attn = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(q.shape[-1])
    hidden = _hf_padding(attention_mask, B, n)
    return _finish(attn, hidden, v, lambda c: c.transpose(0, 2, 1, 3).reshape(B, n, -1),
                   lambda a: _linear(a, dense_weight, dense_bias), q, k, v)


# ---------------------------------------------------------------- self-check

def _close(a, b, tol=1e-10, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    fa, fb = np.isfinite(a), np.isfinite(b)
    assert (fa == fb).all() and (a[~fa] == b[~fb]).all(), (what, "non-finite entries differ")
    if fa.any():
        big = max(float(np.abs(b[fb]).max()), 1.0)
        err = float(np.abs(a[fa] - b[fb]).max())
        assert err <= tol * big, (what, err, big)


def _same(res_a, res_b, keys=OUTPUTS, tol=1e-10, what=""):
    for key in keys:
        if key in res_a and key in res_b:
            _close(res_a[key], res_b[key], tol, "%s %s" % (what, key))


def _self_check():
    rng = np.random.default_rng(20240607)
    r = lambda *s: rng.standard_normal(s)          # noqa: E731
    checks = 0

    # 1. no variants == tests/ref/reference.py attention(): packed, per-head, biases,
    #    causal, rank 2, explicit scale
    B, n, D, H, dk = 2, 7, 12, 3, 4
    X = r(B, n, D)
    Wq, Wk, Wv, Wo = r(D, H * dk), r(D, H * dk), r(D, H * dk), r(H * dk, D)
    bq, bk, bv, bo = r(H * dk), r(H * dk), r(H * dk), r(D)
    for causal in (False, True):
        got = attention_variant(X, Wq, Wk, Wv, Wo, bq, bk, bv, bo, heads=H, causal=causal)
        want = reference.attention(X, Wq, Wk, Wv, Wo, H, bq, bk, bv, bo, causal=causal)
        _same(got, want, what="plain causal=%s" % causal)
        checks += 1
    per = lambda W: W.reshape(D, H, dk).transpose(1, 0, 2)   # noqa: E731
    got = attention_variant(X[0], per(Wq), per(Wk), per(Wv), Wo.reshape(H, dk, D), heads=H,
                            scale=0.3)
    want = reference.attention(X[0], Wq, Wk, Wv, Wo, H, scale=0.3)
    _same(got, want, what="per-head rank-2")
    checks += 1
    # linear layout = xw with every weight transposed
    got = attention_variant(X, Wq.T, Wk.T, Wv.T, Wo.T, bq, bk, bv, bo, heads=H, layout="linear")
    _same(got, reference.attention(X, Wq, Wk, Wv, Wo, H, bq, bk, bv, bo), what="linear")
    checks += 1

    # 2. RoPE of a 2-D vector is the plain rotation by position * 1 (inv_freq_0 = 1)
    for style in ("neox", "gptj"):
        for p in (0, 1, 5, 37):
            v = rope(np.array([1.0, 0.0]).reshape(1, 1, 1, 2), np.array([[p]], float), 1e4, 2, style)
            assert np.allclose(v.ravel(), [math.cos(p), math.sin(p)], atol=1e-15), (style, p)
            v = rope(np.array([0.3, -2.0]).reshape(1, 1, 1, 2), np.array([[p]], float), 1e4, 2, style)
            c, s = math.cos(p), math.sin(p)
            assert np.allclose(v.ravel(), [0.3 * c + 2.0 * s, -2.0 * c + 0.3 * s], atol=1e-14)
    # d = 4 by hand: neox pairs (0,2), (1,3) at angles p, p/sqrt(theta)... theta^(-2/4)
    x4 = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 1, 4)
    p, th = 3.0, 100.0
    a0, a1 = p, p * th ** -0.5
    want_neox = [1 * math.cos(a0) - 3 * math.sin(a0), 2 * math.cos(a1) - 4 * math.sin(a1),
                 3 * math.cos(a0) + 1 * math.sin(a0), 4 * math.cos(a1) + 2 * math.sin(a1)]
    want_gptj = [1 * math.cos(a0) - 2 * math.sin(a0), 2 * math.cos(a0) + 1 * math.sin(a0),
                 3 * math.cos(a1) - 4 * math.sin(a1), 4 * math.cos(a1) + 3 * math.sin(a1)]
    assert np.allclose(rope(x4, np.array([[p]]), th, 4, "neox").ravel(), want_neox, atol=1e-14)
    assert np.allclose(rope(x4, np.array([[p]]), th, 4, "gptj").ravel(), want_gptj, atol=1e-14)
    # partial: R = 2 of d = 4 leaves features 2, 3 alone
    part = rope(x4, np.array([[p]]), th, 2, "neox").ravel()
    assert np.allclose(part, [math.cos(p) - 2 * math.sin(p), 2 * math.cos(p) + math.sin(p), 3, 4])
    # HF rotate_half / rotate_every_two paths agree with the pairwise rotation
    xs = r(2, 3, 5, 8)
    pos = rng.integers(0, 50, (2, 5)).astype(float)
    cos, sin = _llama_cos_sin(pos, 8, 500.0)
    q_hf, _ = _apply_rotary_pos_emb(xs, xs, cos, sin)
    _close(q_hf, rope(xs, pos, 500.0, 8, "neox"), what="rotate_half")
    s_, c_ = _gptj_sincos(pos, 8, 500.0)
    g_hf = _gptj_apply_rotary(xs.transpose(0, 2, 1, 3), s_, c_).transpose(0, 2, 1, 3)
    _close(g_hf, rope(xs, pos, 500.0, 8, "gptj"), what="rotate_every_two")
    # relative positions: shifting every position leaves q.k unchanged
    for style in ("neox", "gptj"):
        a = rope(xs, pos, 1e4, 6, style)
        b = rope(xs, pos + 11, 1e4, 6, style)
        _close(a @ a.swapaxes(-1, -2), b @ b.swapaxes(-1, -2), what="shift " + style)
    checks += 4

    # 3. ALiBi slopes
    assert np.allclose(alibi_slopes(8), [2.0 ** -i for i in range(1, 9)], rtol=0, atol=1e-15)
    assert np.allclose(alibi_slopes(6), [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8], atol=1e-15)
    assert np.allclose(alibi_slopes(12), [2.0 ** (-8 * i / 8) for i in range(1, 9)]
                       + [2.0 ** (-8 * i / 16) for i in (1, 3, 5, 7)], atol=1e-15)
    assert np.allclose(alibi_slopes(1), [2.0 ** -8])
    for h in range(1, 65):
        assert np.allclose(alibi_slopes(h), build_alibi_slopes(h), rtol=1e-14, atol=0), h
    checks += 1

    # 4. masks by hand: window 2 with and without causal, n = m = 5
    n5 = 5
    Xz = np.zeros((1, n5, 2))
    I2 = np.eye(2)
    res = attention_variant(Xz, I2, I2, I2, I2, heads=1, causal=True, window=2)
    vis = np.isfinite(res["scores"][0, 0])
    want = np.array([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0],
                     [0, 0, 0, 1, 1]], bool)
    assert (vis == want).all(), vis
    res = attention_variant(Xz, I2, I2, I2, I2, heads=1, window=2)
    want = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1], [0, 0, 1, 1, 1],
                     [0, 0, 0, 1, 1]], bool)
    assert (np.isfinite(res["scores"][0, 0]) == want).all()
    # fully masked row: weights 0, heads 0, output b_O
    keep = np.array([[1, 1, 0, 1, 1], [0, 0, 0, 0, 0]], bool)
    Xr = r(2, n5, 4)
    W4 = r(4, 4)
    bo4 = r(4)
    res = attention_variant(Xr, W4, W4, W4, W4, bo=bo4, heads=2, keep=keep)
    assert (res["weights"][1] == 0).all() and (res["heads"][1] == 0).all()
    assert np.allclose(res["output"][1], bo4) and np.isneginf(res["scores"][1]).all()
    assert np.isneginf(res["scores"][0, :, :, 2]).all() and (res["weights"][0, :, :, 2] == 0).all()
    assert np.allclose(res["weights"][0].sum(-1), 1)
    checks += 1

    # 5. softcap bounds the logits and is the identity to first order
    res = attention_variant(Xr, 3 * W4, 3 * W4, W4, W4, heads=2, softcap=2.0, scale=1.0)
    assert np.abs(res["scores"]).max() <= 2.0
    lin = attention_variant(Xr, 1e-3 * W4, 1e-3 * W4, W4, W4, heads=2, scale=1.0)
    cap = attention_variant(Xr, 1e-3 * W4, 1e-3 * W4, W4, W4, heads=2, scale=1.0, softcap=50.0)
    _close(cap["scores"], lin["scores"], 1e-9, "softcap small")
    checks += 1

    # 6. attn-bias: each broadcast shape equals the full (B, H, n, m) one
    B, n, D, H = 2, 6, 8, 2
    X = r(B, n, D)
    W = [r(D, D) for _ in range(4)]
    for shape in ((n, n), (H, n, n), (B, H, n, n)):
        ab = r(*shape)
        a = attention_variant(X, *W, heads=H, attn_bias=ab)
        b = attention_variant(X, *W, heads=H, attn_bias=np.broadcast_to(ab, (B, H, n, n)).copy())
        plain = attention_variant(X, *W, heads=H)
        _same(a, b, what="attn-bias %s" % (shape,))
        _close(a["scores"], plain["scores"] + ab, what="attn-bias add")
    checks += 1

    # 7. split_fused round trips
    H, G, dk, dv, D = 4, 2, 3, 5, 7
    Wq, Wk, Wv = r(D, H * dk), r(D, G * dk), r(D, G * dv)
    bq, bk, bv = r(H * dk), r(G * dk), r(G * dv)
    parts = split_fused(np.concatenate([Wq, Wk, Wv], 1), np.concatenate([bq, bk, bv]),
                        H, G, dk, dv, "xw", "blocks")
    for x_, y_ in zip(parts, (Wq, Wk, Wv, bq, bk, bv)):
        assert np.array_equal(x_, y_)
    parts = split_fused(np.concatenate([Wq, Wk, Wv], 1).T, None, H, G, dk, dv, "linear", "blocks")
    for x_, y_ in zip(parts[:3], (Wq.T, Wk.T, Wv.T)):
        assert np.array_equal(x_, y_)
    Wk2, Wv2 = r(D, H * dk), r(D, H * dk)
    inter = np.concatenate([np.concatenate([Wq[:, h * dk:(h + 1) * dk], Wk2[:, h * dk:(h + 1) * dk],
                                            Wv2[:, h * dk:(h + 1) * dk]], 1) for h in range(H)], 1)
    parts = split_fused(inter, None, H, H, dk, dk, "xw", "heads")
    for x_, y_ in zip(parts[:3], (Wq, Wk2, Wv2)):
        assert np.array_equal(x_, y_)
    checks += 1

    # 8. GQA: G = 1 and G = H/2 equal MHA with K/V weights repeated per head group
    B, n, D, H, dk = 2, 5, 8, 4, 2
    X = r(B, n, D)
    Wq, Wo = r(D, H * dk), r(H * dk, D)
    for G in (1, 2):
        Wk, Wv = r(D, G * dk), r(D, G * dk)
        rep = lambda W: np.concatenate([W[:, (h * G // H) * dk:(h * G // H + 1) * dk]  # noqa: E731
                                        for h in range(H)], 1)
        a = attention_variant(X, Wq, Wk, Wv, Wo, heads=H, kv_heads=G, rope_theta=100.0)
        b = attention_variant(X, Wq, rep(Wk), rep(Wv), Wo, heads=H, rope_theta=100.0)
        _same(a, b, keys=("scores", "weights", "heads", "output", "q"), what="gqa G=%d" % G)
        assert a["k"].shape == (B, G, n, dk)
    checks += 1

    # 9. each family == the generic path with docs/models.md's settings
    B, n = 3, 9
    pos = rng.integers(0, 40, (B, n))
    am = np.ones((B, n), int)
    am[1, -3:] = 0
    am[2, :] = 0
    am[2, 0] = 1

    def lin(o, i, s=0.3):
        return s * r(o, i)
    # llama / mistral / qwen2 / qwen3 / gemma2
    D, H, G, hd = 16, 4, 2, 6
    X = r(B, n, D)
    qw, kw, vw, ow = lin(H * hd, D), lin(G * hd, D), lin(G * hd, D), lin(D, H * hd)
    qb, kb, vb, ob = r(H * hd), r(G * hd), r(G * hd), r(D)
    common = dict(layout="linear", heads=H, kv_heads=G, causal=True, rope_theta=1e4, keep=am,
                  positions=pos)
    fam = llama(X, qw, kw, vw, ow, H, G, 1e4, pos, am, qb, kb, vb, ob)
    gen = attention_variant(X, qw, kw, vw, ow, qb, kb, vb, ob, **common)
    _same(fam, gen, what="llama")
    fam = mistral(X, qw, kw, vw, ow, H, G, 1e4, sliding_window=3, position_ids=pos,
                  attention_mask=am)
    gen = attention_variant(X, qw, kw, vw, ow, window=3, **common)
    _same(fam, gen, what="mistral")
    fam = qwen2(X, qw, qb, kw, kb, vw, vb, ow, H, G, 1e4, pos, am)
    gen = attention_variant(X, qw, kw, vw, ow, qb, kb, vb, **common)
    _same(fam, gen, what="qwen2")
    qn, kn = 1 + 0.2 * r(hd), 1 + 0.2 * r(hd)
    fam = qwen3(X, qw, kw, vw, ow, qn, kn, H, G, 1e4, 1e-5, pos, am)
    gen = attention_variant(X, qw, kw, vw, ow, q_norm=qn, k_norm=kn, norm_eps=1e-5, **common)
    _same(fam, gen, what="qwen3")
    fam = gemma2(X, 4 * qw, kw, vw, ow, H, G, 1e4, query_pre_attn_scalar=10.0,
                 attn_logit_softcapping=1.5, sliding_window=4, position_ids=pos,
                 attention_mask=am)
    gen = attention_variant(X, 4 * qw, kw, vw, ow, scale=10.0 ** -0.5, softcap=1.5, window=4,
                            **common)
    _same(fam, gen, what="gemma2")
    assert np.nanmax(np.where(np.isfinite(gen["scores"]), np.abs(gen["scores"]), 0)) < 1.5
    # MQA
    fam = llama(X, qw, kw[:hd], vw[:hd], ow, H, 1, 5e5)
    gen = attention_variant(X, qw, kw[:hd], vw[:hd], ow, layout="linear", heads=H, causal=True,
                            rope_theta=5e5)
    _same(fam, gen, what="llama mqa")
    checks += 6

    # gpt2 (Conv1D, blocks xw)
    D, H = 16, 4
    X = r(B, n, D)
    ca_w, ca_b, cp_w, cp_b = lin(D, 3 * D), r(3 * D), lin(D, D), r(D)
    fam = gpt2(X, ca_w, ca_b, cp_w, cp_b, H)
    Wq, Wk, Wv, bq, bk, bv = split_fused(ca_w, ca_b, H, H, D // H, D // H, "xw", "blocks")
    gen = attention_variant(X, Wq, Wk, Wv, cp_w, bq, bk, bv, cp_b, heads=H, causal=True)
    _same(fam, gen, what="gpt2")
    # torch MHA (blocks linear), key_padding_mask True = ignore, float attn_mask, cross
    ip_w, ip_b, op_w, op_b = lin(3 * D, D), r(3 * D), lin(D, D), r(D)
    kpm = am == 0
    amask = r(n, n)
    fam = torch_mha(X, ip_w, ip_b, op_w, op_b, H, key_padding_mask=kpm, attn_mask=amask)
    Wq, Wk, Wv, bq, bk, bv = split_fused(ip_w, ip_b, H, H, D // H, D // H, "linear", "blocks")
    gen = attention_variant(X, Wq, Wk, Wv, op_w, bq, bk, bv, op_b, heads=H, layout="linear",
                            keep=~kpm, attn_bias=amask)
    _same(fam, gen, what="torch_mha")
    Yk = r(B, 11, D)
    fam = torch_mha(X, ip_w, ip_b, op_w, op_b, H, key=Yk)
    gen = attention_variant(X, Wq, Wk, Wv, op_w, bq, bk, bv, op_b, heads=H, layout="linear",
                            Y=Yk)
    _same(fam, gen, what="torch_mha cross")
    # neox (heads split, partial rotary)
    qkv_w, qkv_b, d_w, d_b = lin(3 * D, D), r(3 * D), lin(D, D), r(D)
    fam = neox(X, qkv_w, qkv_b, d_w, d_b, H, rotary_ndims=2, rotary_emb_base=1e4,
               position_ids=pos, attention_mask=am)
    Wq, Wk, Wv, bq, bk, bv = split_fused(qkv_w, qkv_b, H, H, D // H, D // H, "linear", "heads")
    gen = attention_variant(X, Wq, Wk, Wv, d_w, bq, bk, bv, d_b, heads=H, layout="linear",
                            causal=True, rope_theta=1e4, rope_dim=2, positions=pos, keep=am)
    _same(fam, gen, what="neox")
    # gptj (rotate_every_two, partial)
    qw, kw, vw, ow = lin(D, D), lin(D, D), lin(D, D), lin(D, D)
    fam = gptj(X, qw, kw, vw, ow, H, rotary_dim=2, base=1e4, position_ids=pos, attention_mask=am)
    gen = attention_variant(X, qw, kw, vw, ow, heads=H, layout="linear", causal=True,
                            rope_theta=1e4, rope_dim=2, rope_style="gptj", positions=pos, keep=am)
    _same(fam, gen, what="gptj")
    fam = gptj(X, qw, kw, vw, ow, H)
    gen = attention_variant(X, qw, kw, vw, ow, heads=H, layout="linear", causal=True,
                            rope_theta=1e4, rope_style="gptj")
    _same(fam, gen, what="gptj full")
    # bloom (ALiBi, heads split, 6 heads): weights/heads/output agree; the logits
    # differ by slope * pos_q per row
    D, H = 24, 6
    X = r(B, n, D)
    qkv_w, qkv_b, d_w, d_b = lin(3 * D, D), r(3 * D), lin(D, D), r(D)
    Wq, Wk, Wv, bq, bk, bv = split_fused(qkv_w, qkv_b, H, H, D // H, D // H, "linear", "heads")
    left = np.ones((B, n), int)
    left[1, :3] = 0                                   # left padding: positions shift per item
    for mask in (None, left):
        fam = bloom(X, qkv_w, qkv_b, d_w, d_b, H, attention_mask=mask)
        gen = attention_variant(X, Wq, Wk, Wv, d_w, bq, bk, bv, d_b, heads=H, layout="linear",
                                causal=True, alibi_slopes=alibi_slopes(H), keep=mask)
        _same(fam, gen, keys=("weights", "heads", "output", "q", "k", "v"), what="bloom")
        fin = np.isfinite(gen["scores"])
        assert (np.isfinite(fam["scores_hf"]) == fin).all()
        diff = np.where(fin, fam["scores_hf"], 0.0) - np.where(fin, gen["scores"], 0.0)
        for b_ in range(B):
            for h in range(H):
                for q_ in range(n):
                    row = diff[b_, h, q_][fin[b_, h, q_]]
                    if row.size:
                        assert np.ptp(row) < 1e-10, "bloom logits differ by more than a row constant"
    # bert (mask, not causal)
    D, H = 16, 2
    X = r(B, n, D)
    w = [lin(D, D) for _ in range(4)]
    bb = [r(D) for _ in range(4)]
    fam = bert(X, w[0], bb[0], w[1], bb[1], w[2], bb[2], w[3], bb[3], H, attention_mask=am)
    gen = attention_variant(X, w[0], w[1], w[2], w[3], *bb, heads=H, layout="linear", keep=am)
    _same(fam, gen, what="bert")
    checks += 7

    # 10. cross-attention: RoPE keys at --kv-positions (default 0..m-1), ALiBi with them
    B, n, m, D, H, G, dk = 2, 4, 6, 8, 4, 2, 4
    X, Yk = r(B, n, D), r(B, m, D)
    Wq, Wk, Wv, Wo = r(D, H * dk), r(D, G * dk), r(D, G * dk), r(H * dk, D)
    kvp = rng.integers(0, 30, (B, m))
    qp = rng.integers(0, 30, (B, n))
    res = attention_variant(X, Wq, Wk, Wv, Wo, heads=H, kv_heads=G, Y=Yk, rope_theta=1e4,
                            positions=qp, kv_positions=kvp, alibi_slopes=alibi_slopes(H))
    K0 = np.einsum("bmd,gdk->bgmk", Yk, Wk.reshape(D, G, dk).transpose(1, 0, 2))
    _close(res["k"], rope(K0, kvp.astype(float), 1e4, dk, "neox"), what="kv rope")
    res0 = attention_variant(X, Wq, Wk, Wv, Wo, heads=H, kv_heads=G, Y=Yk, rope_theta=1e4,
                             positions=qp)
    _close(res0["k"], rope(K0, np.broadcast_to(np.arange(m, dtype=float), (B, m)), 1e4, dk,
                           "neox"), what="kv rope default")
    checks += 1
    return checks


if __name__ == "__main__":
    n_checks = _self_check()
    print("models_ref: %d self-checks passed" % n_checks)
