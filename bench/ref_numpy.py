#!/usr/bin/python3
"""ref_numpy.py - the benchmark's peer: attnrun's computation in numpy + h5py.

    /usr/bin/python3 bench/ref_numpy.py IN.h5 OUT.h5 --heads 12 --causal
    /usr/bin/python3 bench/ref_numpy.py IN.h5 OUT.h5 --heads 4 --check ATTN.h5

The algorithm of docs/contract.md §2 vectorized over
batch and heads, float32 throughout like attnrun, reading the datasets
attnrun reads (X, W_Q, W_K, W_V, W_O and the optional b_Q, b_K, b_V, b_O) and
writing the datasets attnrun writes (scores, weights, heads, output, or those
named by --save) into OUT. OUT is fsync'ed after it is closed, because attnrun
fsyncs its output too: both peers pay for the data reaching the disk.

Legend: B batch, H heads, n queries, m keys (= n), D d_model, dk = dv = D / H.
Memory: scores and weights are each (B, H, n, m) float32; with the
temporaries of the softmax the peak is about three such arrays, which is the
estimate bench.c uses to skip workloads that would not fit.

--check ATTN.h5 compares attnrun's `output` with this computation and prints
the largest absolute difference relative to the largest |value|.

Exit status: 0 done (and, with --check, equal within 1e-4), 1 error or check
failed, 2 usage error, 3 numpy or h5py is not installed (the benchmark then
reports the peer as unavailable).
"""
import argparse
import os
import sys

PROG = "ref_numpy.py"
CHECK_LIMIT = 1e-4
ALL_OUTPUTS = ("scores", "weights", "heads", "output")
EXIT_UNAVAILABLE = 3


def parse_args():
    parser = argparse.ArgumentParser(prog=PROG, description="attnrun's attention in numpy + h5py")
    parser.add_argument("input", help="input HDF5 file (X, W_Q, W_K, W_V, W_O, optional biases)")
    parser.add_argument("output", help="HDF5 file to create (replaced if present)")
    parser.add_argument("-H", "--heads", type=int, required=True, help="number of heads")
    parser.add_argument("-c", "--causal", action="store_true", help="hide key k from query q when k > q")
    parser.add_argument("--save", default=",".join(ALL_OUTPUTS),
                        help="comma list from scores,weights,heads,output (default all four)")
    parser.add_argument("--check", metavar="ATTN.h5",
                        help="compare attnrun's output dataset in ATTN.h5 with this result")
    args = parser.parse_args()
    args.save = [name for name in args.save.split(",") if name]
    unknown = [name for name in args.save if name not in ALL_OUTPUTS]
    if unknown or not args.save:
        parser.error("--save takes names from %s, not %r" % (",".join(ALL_OUTPUTS), ",".join(unknown)))
    if args.heads < 1:
        parser.error("--heads must be at least 1")
    return args


def import_peers():
    """numpy and h5py, or exit 3 with the Debian package to install."""
    try:
        import numpy
        import h5py
    except ImportError as exc:
        package = "python3-h5py" if "h5py" in str(exc) else "python3-numpy"
        sys.stderr.write("%s: %s is not installed (apt-get install %s): %s\n"
                         % (PROG, exc.name or package, package, exc))
        sys.exit(EXIT_UNAVAILABLE)
    return numpy, h5py


def read_inputs(np, h5py, path, heads):
    """X as (B, n, D), packed weights as (D, H*dk) and (H*dv, D), biases flat
    or None, and whether X had a batch axis."""
    with h5py.File(path, "r") as f:
        def load(name):
            return np.asarray(f[name][()], dtype=np.float32)

        def packed_in(name):
            # (H, D, dk) per-head weights become the packed (D, H*dk) form.
            w = load(name)
            return w.transpose(1, 0, 2).reshape(w.shape[1], -1) if w.ndim == 3 else w

        x = load("X")
        weights = {name: packed_in(name) for name in ("W_Q", "W_K", "W_V")}
        w_o = load("W_O")
        weights["W_O"] = w_o.reshape(-1, w_o.shape[-1])   # (H, dv, D) -> (H*dv, D)
        biases = {name: load(name).reshape(-1) if name in f else None
                  for name in ("b_Q", "b_K", "b_V", "b_O")}
    batched = x.ndim == 3
    if not batched:
        x = x[np.newaxis]
    if weights["W_Q"].shape[1] % heads:
        raise ValueError("%s: W_Q has %d columns, which do not split into %d heads"
                         % (path, weights["W_Q"].shape[1], heads))
    return x, weights, biases, batched


def project(np, x, w, b, heads):
    """x (B, n, D) @ w (D, H*d) + b, as (B, H, n, d): one GEMM over all rows."""
    bsz, n, d_model = x.shape
    y = x.reshape(bsz * n, d_model) @ w
    if b is not None:
        y += b
    return y.reshape(bsz, n, heads, -1).transpose(0, 2, 1, 3)


def softmax_rows(np, scores):
    """Stable softmax over the last axis, as docs/contract.md §2 says: subtract the row
    max, exponentiate, divide by the sum. Returns a new array."""
    weights = scores - scores.max(axis=-1, keepdims=True)
    np.exp(weights, out=weights)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights


def attention(np, x, weights, biases, heads, causal):
    """Every output, float32: scores, weights (B, H, n, m), heads (B, H, n, dv),
    output (B, n, D)."""
    q = project(np, x, weights["W_Q"], biases["b_Q"], heads)   # (B, H, n, dk)
    k = project(np, x, weights["W_K"], biases["b_K"], heads)   # (B, H, m, dk)
    v = project(np, x, weights["W_V"], biases["b_V"], heads)   # (B, H, m, dv)
    d_k = q.shape[-1]
    scores = q @ k.transpose(0, 1, 3, 2)                        # (B, H, n, m)
    scores *= np.float32(1.0 / np.sqrt(d_k))
    if causal:
        n, m = scores.shape[-2:]
        scores += np.triu(np.full((n, m), -np.inf, dtype=np.float32), k=1)
    attn = softmax_rows(np, scores)
    head_out = attn @ v                                         # (B, H, n, dv)
    bsz, _, n, d_v = head_out.shape
    concat = head_out.transpose(0, 2, 1, 3).reshape(bsz * n, heads * d_v)
    output = concat @ weights["W_O"]
    if biases["b_O"] is not None:
        output += biases["b_O"]
    output = output.reshape(bsz, n, -1)                         # (B, n, D)
    return {"scores": scores, "weights": attn, "heads": head_out, "output": output}


def write_outputs(h5py, path, results, save, batched):
    """The saved datasets, contiguous, then fsync: the file is on disk when
    this returns, as attnrun's output is when it exits."""
    with h5py.File(path, "w") as f:
        for name in ALL_OUTPUTS:
            if name in save:
                f.create_dataset(name, data=results[name] if batched else results[name][0])
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_against(np, h5py, path, output, batched):
    """True when attnrun's output in path equals ours within CHECK_LIMIT,
    relative to our largest |value|; prints one line either way."""
    ours = output if batched else output[0]
    with h5py.File(path, "r") as f:
        theirs = np.asarray(f["output"][()])
    if theirs.shape != ours.shape:
        print("check: FAIL: attnrun's output has shape %s, numpy's %s" % (theirs.shape, ours.shape))
        return False
    diff = float(np.max(np.abs(theirs.astype(np.float64) - ours)))
    scale = float(np.max(np.abs(ours)))
    relative = diff / scale if scale > 0 else diff
    ok = bool(np.isfinite(relative)) and relative <= CHECK_LIMIT
    print("check: relative diff %.2e (max |numpy - attnrun| %.3g, max |output| %.3g, limit %.0e): %s"
          % (relative, diff, scale, CHECK_LIMIT, "ok" if ok else "FAIL"))
    return ok


def main():
    args = parse_args()
    np, h5py = import_peers()
    try:
        x, weights, biases, batched = read_inputs(np, h5py, args.input, args.heads)
        results = attention(np, x, weights, biases, args.heads, args.causal)
        write_outputs(h5py, args.output, results, args.save, batched)
        if args.check and not check_against(np, h5py, args.check, results["output"], batched):
            return 1
    except (OSError, KeyError, ValueError) as exc:
        sys.stderr.write("%s: %s\n" % (PROG, exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
