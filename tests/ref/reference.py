"""tests/ref/reference.py - the tree's one float64 reference for multi-head
attention, written with numpy straight from the formulas of
docs/contract.md §2, for every check of attnrun's numbers (the suites, the
fixtures, the model families, the worked example).  It never calls attnrun.

Per head i, with Y = X unless cross-attention:
    Q_i = X W_Q^(i) + b_Q^(i)    K_i = Y W_K^(i) + b_K^(i)    V_i = Y W_V^(i) + b_V^(i)
    scores_i = Q_i K_i^T * scale          (scale = 1/sqrt(d_k) by default)
    scores_i[q, k] = -inf where k > q (causal) or key k is masked
    weights_i = softmax over k (the row max subtracted first); a row that
                sees no key is 0, a row with a NaN among its visible scores
                is NaN throughout (--allow-nonfinite)
    heads_i = weights_i V_i
    output = concat_i(heads_i) W_O + b_O

Packed weights are (d_model, H*d) (head i owns columns i*d .. i*d+d-1), or
(H, d_model, d) per head; W_O is (H*d_v, d_model) or (H, d_v, d_model).

Three formulations of the same layer, each a check of the others:
    attention(...)        vectorised (einsum); dtype=np.float32 simulates
                          what attnrun computes at its default precision
    attention_loop(...)   one batch item and one head at a time, a Python
                          loop over query rows for the softmax: the plainest
                          reading of the formulas (the fixtures' expected files)
    walkthrough(...)      the worked example's step-by-step numpy
                          (docs/contract.md §7): one head, no bias, no mask
and the pieces the model families build on (models_ref.py):
    masked_softmax(S, hidden)
the tolerance rule every float32 check of attnrun against them uses:
    tolerance(name, expected, precision)
and the reader of a layer from an HDF5 file:

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

# Two of attnrun's own float32 paths against each other (threads, the
# online softmax, blocks of rows): the largest difference relative to the
# largest finite magnitude of the dataset.  Tighter than tolerance() below,
# which bounds attnrun against float64.
PATHS_TOLERANCE = 1e-5


# ------------------------------------------------------------ tolerances

def max_abs_finite(a):
    finite = a[np.isfinite(a)]
    return float(np.abs(finite).max()) if finite.size else 0.0


def tolerance(name, expected, precision="f32"):
    """The absolute delta attnrun's `name` may be off from the float64
    `expected` by: float32, weights 1e-5 absolute and every other output
    1e-4 relative to its largest finite magnitude (1e-4 when it has none);
    f64, 1e-12 * max(1, largest finite magnitude)."""
    scale = max_abs_finite(expected)
    if precision == "f64":
        return 1e-12 * max(1.0, scale)
    if name == "weights":
        return 1e-5
    return 1e-4 * (scale if scale > 0 else 1.0)


def off_by(name, got, expected, precision="f32"):
    """'' when got is expected within tolerance(), NaN and -inf exactly
    where expected has them; else why not."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        return "%s: shape %s, expected %s" % (name, got.shape, expected.shape)
    special = ~np.isfinite(expected)
    if (np.isnan(got) != np.isnan(expected)).any() or \
            not np.array_equal(got[special & ~np.isnan(expected)],
                               expected[special & ~np.isnan(expected)]):
        return "%s: NaN or -inf at %d places, expected %d" % (
            name, np.count_nonzero(~np.isfinite(got)), np.count_nonzero(special))
    if special.all():
        return ""
    err = float(np.abs(got[~special] - expected[~special]).max())
    delta = tolerance(name, expected, precision)
    return "" if err <= delta else "%s: off by %g > %g" % (name, err, delta)


# ------------------------------------------------------------ the softmax

def masked_softmax(S, hidden):
    """Softmax over the last axis of S with the `hidden` entries excluded.
    Returns (scores with -inf where hidden, weights) in S's dtype; a row
    with no visible key gets weights 0, a row with a NaN among its visible
    scores NaN throughout."""
    S = np.where(hidden, S.dtype.type(-np.inf), S)
    top = S.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, S.dtype.type(0))
    E = np.where(hidden, S.dtype.type(0), np.exp(np.where(hidden, S.dtype.type(0), S - top)))
    total = E.sum(axis=-1, keepdims=True)
    A = np.divide(E, total, out=np.zeros_like(E), where=(total > 0) | np.isnan(total))
    return S, A


def hidden_keys(B, n, m, causal=False, keep=None):
    """(B, 1, n, m): True where query q may not see key k (k > q when
    causal; keep, (B, m) or (m,), zero where the key is masked)."""
    hidden = np.zeros((B, 1, n, m), bool)
    if causal:
        hidden |= np.triu(np.ones((n, m), bool), 1)[None, None]
    if keep is not None:
        keep = np.broadcast_to(np.asarray(keep) != 0, (B, m))
        hidden |= ~keep[:, None, None, :]
    return hidden


# ------------------------------------------------------ the vectorised one

def _per_head(w, heads):
    """(d_model, H*d) packed or (H, d_model, d) -> (H, d_model, d)."""
    if w.ndim == 3:
        return w
    d_in, cols = w.shape
    return w.reshape(d_in, heads, cols // heads).transpose(1, 0, 2)


def _bias(b, heads, dtype):
    """(H*d) or (H, d) -> broadcastable (1, H, 1, d); 0 when absent."""
    return dtype(0) if b is None else np.reshape(b, (heads, -1))[None, :, None, :]


def attention(X, W_Q, W_K, W_V, W_O, heads, b_Q=None, b_K=None, b_V=None, b_O=None,
              scale=None, causal=False, Y=None, keep=None, dtype=np.float64):
    """Every output of one layer as a dict by output name, computed in dtype
    (the inputs rounded to it first).

    X is (B, n, d_model) or (n, d_model) (then no output has a batch axis);
    Y, the keys' and values' rows, defaults to X; keep, (B, m) or (m,), is
    zero where a key is masked."""
    cast = [None if a is None else np.asarray(a).astype(dtype)
            for a in (X, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O)]
    X, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O = cast
    Y = X if Y is None else np.asarray(Y).astype(dtype)
    rank2 = X.ndim == 2
    if rank2:
        X, Y = X[None], Y[None]
    if W_Q.ndim == 3:
        heads = W_Q.shape[0]
    Q = np.einsum("bnd,hdk->bhnk", X, _per_head(W_Q, heads)) + _bias(b_Q, heads, dtype)
    K = np.einsum("bnd,hdk->bhnk", Y, _per_head(W_K, heads)) + _bias(b_K, heads, dtype)
    V = np.einsum("bnd,hdk->bhnk", Y, _per_head(W_V, heads)) + _bias(b_V, heads, dtype)
    if scale is None:
        scale = 1.0 / np.sqrt(Q.shape[-1])
    S = np.einsum("bhqk,bhmk->bhqm", Q, K) * dtype(scale)
    B, _, n, m = S.shape
    S, A = masked_softmax(S, np.broadcast_to(hidden_keys(B, n, m, causal, keep), S.shape))
    Hd = np.einsum("bhqm,bhmv->bhqv", A, V)
    out = np.einsum("bhqv,hvd->bqd", Hd, np.reshape(W_O, (heads, V.shape[-1], -1)))
    if b_O is not None:
        out = out + b_O
    res = {"scores": S, "weights": A, "heads": Hd, "output": out, "q": Q, "k": K, "v": V}
    return {k: v[0] for k, v in res.items()} if rank2 else res


# ------------------------------------------------------------- the loop one

def head_block(W, H, i):
    """Head i's (d_in, d_out) block of a projection weight: W[i] of a 3-D
    (H, d_in, d_out) weight, columns i*d_out .. (i+1)*d_out - 1 of a packed one."""
    if W.ndim == 3:
        return W[i]
    d = W.shape[1] // H
    return W[:, i * d:(i + 1) * d]


def head_bias(b, H, i, d):
    """Head i's bias: from an (H, d) array, a flat (H*d,) one, or zeros."""
    if b is None:
        return np.zeros(d)
    if b.ndim == 2:
        return b[i]
    return b[i * d:(i + 1) * d]


def attention_loop(X, W_Q, W_K, W_V, W_O, H, b_Q=None, b_K=None, b_V=None,
                   b_O=None, Y=None, mask=None, causal=False, scale=None):
    """float64 multi-head attention, one batch item and one head at a time;
    returns a dict of every output.  X is (B, n, d_model) or (n, d_model);
    Y (keys/values) defaults to X; mask is (B, m) or (m,), nonzero = the
    key may be attended.  No NaN semantics: finite inputs only."""
    def f64(a):
        return None if a is None else np.asarray(a, dtype=np.float64)

    X, Y = f64(X), f64(X if Y is None else Y)
    W_Q, W_K, W_V, W_O = f64(W_Q), f64(W_K), f64(W_V), f64(W_O)
    b_Q, b_K, b_V, b_O = f64(b_Q), f64(b_K), f64(b_V), f64(b_O)

    rank2 = X.ndim == 2
    if rank2:
        X, Y = X[None], Y[None]
    B, n, d_model = X.shape
    m = Y.shape[1]
    d_k = head_block(W_Q, H, 0).shape[1]
    d_v = head_block(W_V, H, 0).shape[1]
    if W_O.ndim == 3:                       # (H, d_v, d_model) -> (H*d_v, d_model)
        W_O = W_O.reshape(H * d_v, W_O.shape[2])
    if b_O is None:
        b_O = np.zeros(d_model)
    if scale is None:
        scale = 1.0 / np.sqrt(d_k)

    out = {
        "scores": np.zeros((B, H, n, m)),
        "weights": np.zeros((B, H, n, m)),
        "heads": np.zeros((B, H, n, d_v)),
        "output": np.zeros((B, n, d_model)),
        "q": np.zeros((B, H, n, d_k)),
        "k": np.zeros((B, H, m, d_k)),
        "v": np.zeros((B, H, m, d_v)),
    }
    for b in range(B):
        # allowed[q, k]: may query q look at key k?
        allowed = np.ones((n, m), dtype=bool)
        if causal:
            for q in range(n):
                for k in range(m):
                    if k > q:
                        allowed[q, k] = False
        if mask is not None:
            key_ok = (mask if mask.ndim == 1 else mask[b]) != 0
            allowed &= key_ok[None, :]

        per_head = []
        for i in range(H):
            Q = X[b] @ head_block(W_Q, H, i) + head_bias(b_Q, H, i, d_k)
            K = Y[b] @ head_block(W_K, H, i) + head_bias(b_K, H, i, d_k)
            V = Y[b] @ head_block(W_V, H, i) + head_bias(b_V, H, i, d_v)

            S = (Q @ K.T) * scale
            S[~allowed] = -np.inf

            Wt = np.zeros((n, m))
            for q in range(n):
                if not allowed[q].any():
                    continue                 # every key masked: weights 0
                z = S[q] - S[q].max()        # stable softmax; exp(-inf) = 0
                e = np.exp(z)
                Wt[q] = e / e.sum()

            head = Wt @ V
            per_head.append(head)
            out["scores"][b, i] = S
            out["weights"][b, i] = Wt
            out["heads"][b, i] = head
            out["q"][b, i], out["k"][b, i], out["v"][b, i] = Q, K, V

        out["output"][b] = np.concatenate(per_head, axis=1) @ W_O + b_O

    if rank2:
        out = {name: a[0] for name, a in out.items()}
    return out


# ------------------------------------------------------ the worked example

def walkthrough(X, W_Q, W_K, W_V):
    """The worked example's numpy, step by step (docs/contract.md §7): one
    head, no bias, no mask.  Returns Q, K, V, scores, weights, heads."""
    d_k = W_Q.shape[1]
    Q = X @ W_Q
    K = X @ W_K
    V = X @ W_V
    scores = Q @ K.T / np.sqrt(d_k)

    def softmax(x):
        x = x - x.max(axis=-1, keepdims=True)
        e = np.exp(x)
        return e / e.sum(axis=-1, keepdims=True)

    weights = softmax(scores)
    return Q, K, V, scores, weights, weights @ V


# ------------------------------------------------------------- from a file

def from_file(source, heads, x="X", scale=None, causal=False, y=None, keep=None):
    """attention() of the datasets of an HDF5 file (a path or an open
    h5py.File): X (or `x`), W_Q ... W_O, b_Q ... b_O where present, and
    the datasets named y (the keys' rows) and keep (the key mask) when given."""
    f = h5py.File(source, "r") if isinstance(source, str) else source
    try:
        def get(name):
            return f[name][...].astype(np.float64) if name is not None and name in f else None
        weights = [get(k) for k in ("W_Q", "W_K", "W_V", "W_O")]
        biases = [get(k) for k in ("b_Q", "b_K", "b_V", "b_O")]
        X, Y, K = get(x), get(y), get(keep)
    finally:
        if isinstance(source, str):
            f.close()
    return attention(X, *weights, heads, *biases, scale=scale, causal=causal, Y=Y, keep=K)
