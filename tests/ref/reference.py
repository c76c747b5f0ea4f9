"""tests/ref/reference.py - multi-head attention in float64 with numpy, straight
from the formulas of docs/contract.md §2, for the command-line suites
to check attnrun's outputs against.  It never calls attnrun.

Per head i, with Y = X unless cross-attention:
    Q_i = X W_Q^(i) + b_Q^(i)    K_i = Y W_K^(i) + b_K^(i)    V_i = Y W_V^(i) + b_V^(i)
    scores_i = Q_i K_i^T * scale          (scale = 1/sqrt(d_k) by default)
    scores_i[q, k] = -inf where k > q     (causal)
    weights_i = softmax over k (the row max subtracted first)
    heads_i = weights_i V_i
    output = concat_i(heads_i) W_O + b_O

Packed weights are (d_model, H*d) (head i owns columns i*d .. i*d+d-1), or
(H, d_model, d) per head; W_O is (H*d_v, d_model) or (H, d_v, d_model).

    import reference
    ref = reference.from_file("in.h5", heads=4)       # dict of every output
"""
import numpy as np
import h5py

OUTPUTS = ("scores", "weights", "heads", "output", "q", "k", "v")

# The axis labels (and dimension-scale names) of each output (docs/contract.md
# §3); a rank-2 X drops the first.
LABELS = {
    "scores":  ("batch", "head", "query", "key"),
    "weights": ("batch", "head", "query", "key"),
    "heads":   ("batch", "head", "query", "d_v"),
    "output":  ("batch", "query", "d_model"),
    "q":       ("batch", "head", "query", "d_k"),
    "k":       ("batch", "head", "key", "d_k"),
    "v":       ("batch", "head", "key", "d_v"),
}
AXES = ("batch", "head", "query", "key", "d_k", "d_v", "d_model")


def _per_head(w, heads):
    """(d_model, H*d) packed or (H, d_model, d) -> (H, d_model, d)."""
    if w.ndim == 3:
        return w
    d_in, cols = w.shape
    return w.reshape(d_in, heads, cols // heads).transpose(1, 0, 2)


def _bias(b, heads):
    """(H*d) or (H, d) -> broadcastable (1, H, 1, d); 0 when absent."""
    return 0.0 if b is None else np.reshape(b, (heads, -1))[None, :, None, :]


def attention(X, W_Q, W_K, W_V, W_O, heads, b_Q=None, b_K=None, b_V=None, b_O=None,
              scale=None, causal=False):
    """Every output of one layer, float64, as a dict by output name.

    X is (B, n, d_model) or (n, d_model) (then no output has a batch axis)."""
    f64 = [None if a is None else np.asarray(a, dtype=np.float64)
           for a in (X, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O)]
    X, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O = f64
    rank2 = X.ndim == 2
    if rank2:
        X = X[None]
    if W_Q.ndim == 3:
        heads = W_Q.shape[0]
    Q = np.einsum("bnd,hdk->bhnk", X, _per_head(W_Q, heads)) + _bias(b_Q, heads)
    K = np.einsum("bnd,hdk->bhnk", X, _per_head(W_K, heads)) + _bias(b_K, heads)
    V = np.einsum("bnd,hdk->bhnk", X, _per_head(W_V, heads)) + _bias(b_V, heads)
    if scale is None:
        scale = 1.0 / np.sqrt(Q.shape[-1])
    S = np.einsum("bhqk,bhmk->bhqm", Q, K) * scale
    if causal:
        n, m = S.shape[-2:]
        S = np.where(np.triu(np.ones((n, m), bool), 1), -np.inf, S)
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    A = E / E.sum(axis=-1, keepdims=True)
    Hd = np.einsum("bhqm,bhmv->bhqv", A, V)
    out = np.einsum("bhqv,hvd->bqd", Hd, np.reshape(W_O, (heads, V.shape[-1], -1)))
    if b_O is not None:
        out = out + b_O
    res = {"scores": S, "weights": A, "heads": Hd, "output": out, "q": Q, "k": K, "v": V}
    return {k: v[0] for k, v in res.items()} if rank2 else res


def from_file(source, heads, x="X", scale=None, causal=False):
    """attention() of the datasets of an HDF5 file (a path or an open
    h5py.File): X (or `x`), W_Q ... W_O, and b_Q ... b_O where present."""
    f = h5py.File(source, "r") if isinstance(source, str) else source
    try:
        def get(name):
            return f[name][...].astype(np.float64) if name in f else None
        weights = [get(k) for k in ("W_Q", "W_K", "W_V", "W_O")]
        biases = [get(k) for k in ("b_Q", "b_K", "b_V", "b_O")]
        X = get(x)
    finally:
        if isinstance(source, str):
            f.close()
    return attention(X, *weights, heads, *biases, scale=scale, causal=causal)
