"""tests/ref/summaries_ref.py - float64 numpy reference for the summary outputs
(`--save entropy,argmax,distance,mean,result`, docs/outputs.md,
"Summaries"), computed from the attention of tests/ref/models_ref.py (scores,
weights, heads in float64 for every variant).  It never calls attnrun and
never reads its output.

Per batch item b, head h, query q (p = the row's attention weights):

    entropy[b, h, q]   = -sum_k p_k log p_k          nats, 0 log 0 = 0
    argmax[b, h, q]    = the smallest k with the largest logit among the
                         keys q sees (scores > -inf); -1 when q sees no key
    distance[b, h, q]  = sum_k p_k |pos_q - pos_k|    pos: --positions /
                         --kv-positions, else 0..n-1 / 0..m-1
    mean[b, q, k]      = (1/H) sum_h weights[b, h, q, k]
    result[b, q, h, :] = heads[b, h, q, :] @ W_O^(h)   (no b_O, so
                         sum_h result + b_O = output)

A query that sees no key has weights 0: entropy 0, distance 0, argmax -1,
mean 0.  A query row whose scores hold a NaN (or +inf) gets NaN weights
(docs/models.md, "Input datasets"), so entropy NaN, distance NaN, argmax
-1 -- models_ref's softmax gives 0 weights there, so summarize() applies
that rule itself.

Entropy is computed as -sum p log p (not attnrun's log Z + max - sum p s),
argmax from the float64 logits, distance from the positions, mean by
averaging the float64 weights, result by one product with W_O per head.

    import summaries_ref as R
    ref = R.variant(X=..., Wq=..., ..., heads=4)   # models_ref's outputs + the five
    python3 tests/ref/summaries_ref.py                 # runs the self-checks
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models_ref as M  # noqa: E402  (tests/ref/models_ref.py)
import reference        # noqa: E402  (tests/ref/reference.py)

SUMMARIES = ("entropy", "argmax", "distance", "mean", "result")

# The axis labels of each summary; a rank-2 X drops the first.
LABELS = {
    "entropy":  ("batch", "head", "query"),
    "argmax":   ("batch", "head", "query"),
    "distance": ("batch", "head", "query"),
    "mean":     ("batch", "query", "key"),
    "result":   ("batch", "query", "head", "d_model"),
}


def nan_rows(S, A):
    """(..., n) bool: the query rows whose weights are NaN by docs/models.md's
    rule (a NaN or +inf logit, or NaN weights already)."""
    S = np.asarray(S, np.float64)
    A = np.asarray(A, np.float64)
    return np.isnan(S).any(-1) | np.isposinf(S).any(-1) | np.isnan(A).any(-1)


def entropy(A):
    """-sum_k p log p over the last axis, 0 log 0 = 0; NaN when the row
    holds a NaN."""
    A = np.asarray(A, np.float64)
    pos = A > 0
    logs = np.log(np.where(pos, A, 1.0))
    H = 0.0 - np.where(pos, A * logs, 0.0).sum(-1)        # 0, not -0, for no term
    return np.where(np.isnan(A).any(-1), np.nan, H)


def argmax(S, A=None):
    """The first key with the largest logit among the keys the row sees
    (S > -inf), int32; -1 when it sees none or is a NaN row."""
    S = np.asarray(S, np.float64)
    seen = S > -np.inf                     # False for -inf and NaN
    first = np.where(seen, S, -np.inf).argmax(-1)      # numpy: first of equal maxima
    bad = ~seen.any(-1)
    bad |= nan_rows(S, S if A is None else A)
    return np.where(bad, -1, first).astype(np.int32)


def distance(A, pos_q, pos_k):
    """sum_k p_k |pos_q - pos_k|.  A (B, H, n, m); pos_q (B, n), pos_k (B, m)."""
    A = np.asarray(A, np.float64)
    d = np.abs(pos_q[:, None, :, None] - pos_k[:, None, None, :])     # (B, 1, n, m)
    return (A * d).sum(-1)


def head_mean(A):
    """(1/H) sum_h A[b, h, q, k]: (B, H, n, m) -> (B, n, m)."""
    return np.asarray(A, np.float64).mean(axis=1)


def result(Hd, Wo, H, layout="xw"):
    """Each head's share of the output: (B, H, n, dv) heads -> (B, n, H, D)."""
    Wo3 = M._per_head_out(Wo, H, layout)                  # (H, dv, D)
    return np.stack([np.asarray(Hd, np.float64)[:, h] @ Wo3[h] for h in range(H)], axis=2)


def summarize(res, Wo, layout="xw", positions=None, kv_positions=None, cross=False):
    """The five summaries of models_ref's outputs `res` (rank-2 or rank-3
    shapes).  positions / kv_positions as given to attnrun (None = indices);
    cross: the keys come from --kv (then kv_positions, not positions)."""
    rank2 = res["scores"].ndim == 3
    S, A, Hd = (np.asarray(res[k], np.float64) for k in ("scores", "weights", "heads"))
    if rank2:
        S, A, Hd = S[None], A[None], Hd[None]
    B, H, n, m = S.shape
    bad = nan_rows(S, A)
    A = np.where(bad[..., None], np.nan, A)           # docs/models.md: NaN weights there,
    Hd = np.where(bad[..., None], np.nan, Hd)         # so NaN heads (weights @ V)
    pq = M._positions(positions, B, n)
    pk = M._positions(kv_positions, B, m) if cross else pq
    out = {
        "entropy": entropy(A),
        "argmax": argmax(S, A),
        "distance": distance(A, pq, pk),
        "mean": head_mean(A),
        "result": result(Hd, Wo, H, layout),
    }
    return {k: v[0] for k, v in out.items()} if rank2 else out


def variant(**kw):
    """models_ref.attention_variant(**kw) with the five summaries added."""
    res = M.attention_variant(**kw)
    res.update(summarize(res, kw["Wo"], kw.get("layout", "xw"), kw.get("positions"),
                         kw.get("kv_positions"), kw.get("Y") is not None))
    return res


def self_attention_rows(X, Wq, Wk, Wv, Wo, rows, causal=False, **kw):
    """The summaries (and output) of a few query rows of a long
    self-attention without its n x n maps: the rows attend to every key as
    cross-attention of X[:, rows] over X does, the causal mask becomes an
    (r, n) -inf logit bias, and distance uses the rows' own indices.
    Only for variants that do not depend on the query index otherwise
    (no RoPE, ALiBi, window, positions)."""
    for k in ("rope_theta", "alibi_slopes", "window", "positions", "kv_positions", "Y",
              "attn_bias"):
        assert not kw.get(k), "self_attention_rows: %s depends on the query index" % k
    X = np.asarray(X, np.float64)
    rank2 = X.ndim == 2
    if rank2:
        X = X[None]
    rows = np.asarray(rows, np.int64)
    B, n, _ = X.shape
    bias = None
    if causal:
        bias = np.where(np.arange(n)[None, :] > rows[:, None], -np.inf, 0.0)
    res = M.attention_variant(X[:, rows], Wq, Wk, Wv, Wo, Y=X, attn_bias=bias,
                              positions=np.broadcast_to(rows, (B, rows.size)).copy(), **kw)
    res.update(summarize(res, Wo, kw.get("layout", "xw"),
                         np.broadcast_to(rows, (B, rows.size)).copy(), None, cross=True))
    return {k: v[0] for k, v in res.items()} if rank2 else res


# ------------------------------------------------------------ self-checks

def _close(a, b, tol=1e-12, what=""):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    same_nan = np.isnan(a) == np.isnan(b)
    assert same_nan.all(), "%s: NaN in different places" % what
    fin = ~np.isnan(a)
    err = float(np.abs(a[fin] - b[fin]).max()) if fin.any() else 0.0
    assert err <= tol, "%s: max error %.3g > %.3g" % (what, err, tol)


def _self_check():
    rng = np.random.default_rng(11)
    r = rng.standard_normal
    checks = 0

    # 1. uniform weights over m keys: entropy log m, for m = 1 .. 40
    for m in range(1, 41):
        _close(entropy(np.full((2, m), 1.0 / m)), [math.log(m)] * 2, 1e-14, "uniform %d" % m)
    # one-hot: entropy 0, distance |q - k|; two keys at 1/2: log 2
    A = np.zeros((1, 1, 3, 5))
    A[0, 0, 0, 4] = A[0, 0, 1, 1] = 1.0
    A[0, 0, 2, [0, 3]] = 0.5
    _close(entropy(A)[0, 0], [0.0, 0.0, math.log(2)], 1e-15, "one-hot")
    idx = np.arange(5.0)[None]
    _close(distance(A, idx[:, :3], idx)[0, 0], [4.0, 0.0, (2 + 1) / 2], 1e-15, "distance")
    pq = np.array([[10.0, 20.0, 30.0]])
    _close(distance(A, pq, idx)[0, 0], [6.0, 19.0, (30 + 27) / 2], 1e-15, "distance positions")
    # entropy by -sum p log p agrees with the log-sum-exp form log Z - sum p (s - max)
    S = 3 * r((3, 4, 6, 9))
    S[0, 1, 2, :4] = -np.inf
    _, A = M._masked_softmax(S, np.isneginf(S))
    top = S.max(-1, keepdims=True)
    Z = np.exp(S - top).sum(-1)
    lse = np.log(Z) - (A * np.where(np.isfinite(S), S - top, 0.0)).sum(-1)
    _close(entropy(A), lse, 1e-12, "entropy two ways")
    checks += 4

    # 2. argmax: ties take the first key, masked keys never count
    S = np.array([[1.0, 3.0, 3.0, 2.0],
                  [0.0, 0.0, 0.0, 0.0],
                  [-np.inf, 2.0, 5.0, 5.0],
                  [-np.inf] * 4,
                  [-np.inf, -7.0, -np.inf, -7.0],
                  [1.0, np.nan, 2.0, 0.0],
                  [1.0, np.inf, 2.0, 0.0]])
    assert list(argmax(S)) == [1, 0, 2, -1, 1, -1, -1], argmax(S)
    assert argmax(S).dtype == np.int32
    checks += 1

    # 3. mean: identical heads give that head; two heads their average
    A = np.abs(r((2, 1, 5, 7)))
    A /= A.sum(-1, keepdims=True)
    _close(head_mean(np.repeat(A, 4, axis=1)), A[:, 0], 1e-15, "mean identical")
    A2 = np.concatenate([A, np.flip(A, -1)], axis=1)
    _close(head_mean(A2), (A[:, 0] + np.flip(A[:, 0], -1)) / 2, 1e-15, "mean two")
    checks += 1

    # 4. result: sum_h result + b_O = output, for packed xw, 3-D and linear W_O
    B, n, D, H, dk, dv = 2, 5, 12, 3, 4, 2
    X = r((B, n, D))
    Wq, Wk, Wv, Wo, bo = r((D, H * dk)), r((D, H * dk)), r((D, H * dv)), r((H * dv, D)), r(D)
    res = variant(X=X, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, bo=bo, heads=H)
    assert res["result"].shape == (B, n, H, D)
    _close(res["result"].sum(2) + bo, res["output"], 1e-12, "result xw")
    res3 = variant(X=X, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo.reshape(H, dv, D), bo=bo, heads=H)
    _close(res3["result"], res["result"], 1e-12, "result 3-D W_O")
    resl = variant(X=X, Wq=Wq.T, Wk=Wk.T, Wv=Wv.T, Wo=Wo.T, bo=bo, heads=H, layout="linear")
    _close(resl["result"], res["result"], 1e-12, "result linear")
    # head h alone: the output with every other head's W_O rows zeroed (minus b_O)
    for h in range(H):
        Wz = np.zeros_like(Wo)
        Wz[h * dv:(h + 1) * dv] = Wo[h * dv:(h + 1) * dv]
        one = reference.attention(X, Wq, Wk, Wv, Wz, H)["output"]
        _close(res["result"][:, :, h], one, 1e-12, "result head %d" % h)
    checks += 4

    # 5. fully masked rows: entropy 0, distance 0, argmax -1, mean 0;
    #    rank 2 drops the batch axis
    keep = np.array([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], bool)
    res = variant(X=X, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, heads=H, keep=keep)
    assert (res["entropy"][1] == 0).all() and (res["distance"][1] == 0).all()
    assert (res["argmax"][1] == -1).all() and (res["mean"][1] == 0).all()
    assert (res["entropy"][0] > 0).all() and (res["argmax"][0] >= 0).all()
    keep1 = np.array([0, 1, 1, 1, 1], bool)             # with causal: query 0 sees nothing
    res = variant(X=X[0], Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, heads=H, keep=keep1, causal=True)
    assert res["entropy"].shape == (H, n) and res["mean"].shape == (n, n)
    assert res["result"].shape == (n, H, D)
    assert (res["argmax"][:, 0] == -1).all() and (res["entropy"][:, 0] == 0).all()
    assert (res["argmax"][:, 1] == 1).all() and (res["entropy"][:, 1] == 0).all()
    _close(res["distance"][:, 1], np.zeros(H), 0, "one key")
    checks += 2

    # 6. a NaN in one query row: that row NaN / -1 in every head, the rest finite
    Xn = X.copy()
    Xn[0, 2, 3] = np.nan
    Y = r((B, 7, D))
    res = variant(X=Xn, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, heads=H, Y=Y)
    assert np.isnan(res["entropy"][0, :, 2]).all() and np.isnan(res["distance"][0, :, 2]).all()
    assert (res["argmax"][0, :, 2] == -1).all() and np.isnan(res["mean"][0, 2]).all()
    ok = np.ones((B, H, n), bool)
    ok[0, :, 2] = False
    assert np.isfinite(res["entropy"][ok]).all() and (res["argmax"][ok] >= 0).all()
    checks += 1

    # 7. uniform attention (W_Q = 0), causal: entropy log(q+1), argmax 0,
    #    distance q/2, mean 1/(q+1) on the keys seen
    res = variant(X=X, Wq=0 * Wq, Wk=Wk, Wv=Wv, Wo=Wo, heads=H, causal=True)
    q = np.arange(n)
    _close(res["entropy"], np.broadcast_to(np.log(q + 1.0), (B, H, n)), 1e-14, "uniform causal")
    assert (res["argmax"] == 0).all()
    _close(res["distance"], np.broadcast_to(q / 2.0, (B, H, n)), 1e-14, "uniform distance")
    _close(res["mean"], np.broadcast_to(np.tril(np.ones((n, n))) / (q[:, None] + 1.0), (B, n, n)),
           1e-15, "uniform mean")
    checks += 1

    # 8. positions: self-attention uses --positions for both sides; cross uses
    #    --kv-positions (else 0..m-1) for the keys
    P = np.array([[5, 9, 11, 40, 41], [0, 0, 1, 2, 3]])
    res = variant(X=X, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, heads=H, positions=P)
    d = np.abs(P[:, None, :, None] - P[:, None, None, :]).astype(float)
    _close(res["distance"], (res["weights"] * d).sum(-1), 1e-13, "self positions")
    res = variant(X=X, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, heads=H, positions=P, Y=Y)
    d = np.abs(P[:, None, :, None] - np.arange(7.0)[None, None, None, :])
    _close(res["distance"], (res["weights"] * d).sum(-1), 1e-13, "cross default kv positions")
    KP = np.arange(7) * 3 + 1
    res = variant(X=X, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, heads=H, positions=P, Y=Y, kv_positions=KP)
    d = np.abs(P[:, None, :, None] - KP[None, None, None, :])
    _close(res["distance"], (res["weights"] * d).sum(-1), 1e-13, "cross kv positions")
    checks += 3

    # 9. GQA (here MQA, G = 1): the summaries equal those of MHA with the
    #    K/V weights repeated for every head
    G = 1
    Wk1, Wv1 = r((D, G * dk)), r((D, G * dv))
    a = variant(X=X, Wq=Wq, Wk=Wk1, Wv=Wv1, Wo=Wo, heads=H, kv_heads=G, causal=True)
    b = variant(X=X, Wq=Wq, Wk=np.tile(Wk1, H), Wv=np.tile(Wv1, H), Wo=Wo, heads=H, causal=True)
    for k in SUMMARIES:
        _close(a[k], b[k], 1e-12, "gqa " + k)
    checks += 1

    # 10. a few rows of a self-attention equal the same rows of the whole one
    Xl = r((2, 40, D))
    rows = [0, 1, 17, 39]
    for causal in (False, True):
        whole = variant(X=Xl, Wq=Wq, Wk=Wk, Wv=Wv, Wo=Wo, bo=bo, heads=H, causal=causal)
        part = self_attention_rows(Xl, Wq, Wk, Wv, Wo, rows, causal=causal, bo=bo, heads=H)
        for k in ("entropy", "argmax", "distance"):
            _close(part[k], whole[k][:, :, rows], 1e-12, "rows %s causal=%s" % (k, causal))
        _close(part["output"], whole["output"][:, rows], 1e-12, "rows output")
        _close(part["mean"], whole["mean"][:, rows], 1e-12, "rows mean")
    checks += 2
    return checks


if __name__ == "__main__":
    n_checks = _self_check()
    print("summaries_ref: %d self-checks passed" % n_checks)
