"""tests/ref/outputs_compare.py - one of attnrun's outputs against its float64
reference, with the tolerances the command-line suites share
(tests/README.md, "Fixtures": float32 results within 1e-4 of the dataset's
largest magnitude, weights within 1e-5 absolute; float64 within 1e-12).

    compare(name, got, ref, f64, weights_absolute=True)
        '' when got matches ref, else what differs
"""
import numpy as np


def _at(mask):
    return tuple(int(j) for j in np.argwhere(mask)[0])


def compare(name, got, ref, f64, weights_absolute=True):
    """'' when the stored array got matches the float64 reference ref: stored
    as float64 (f64) or float32, of ref's shape, -inf (any non-finite value)
    exactly where ref has it, finite where ref is, and within the
    tolerance: weights 1e-5 absolute (1e-12 in float64) unless
    weights_absolute is False, every other output 1e-4 of ref's largest
    magnitude (1e-12 of max(1, largest) in float64); and not all 0 where
    ref is not."""
    want = np.float64 if f64 else np.float32
    if got.dtype != want:
        return "%s stored as %s, expected %s" % (name, got.dtype, np.dtype(want))
    if got.shape != ref.shape:
        return "%s has shape %s, expected %s" % (name, got.shape, ref.shape)
    g = got.astype(np.float64)
    fin = np.isfinite(ref)
    if not np.isfinite(g[fin]).all():
        return "%s has non-finite values where the reference is finite" % name
    if not np.array_equal(g[~fin], ref[~fin]):
        i = _at(~fin & (g != ref))
        return "%s is %r at %s where the reference masks it (%r)" % (name, g[i], i, ref[i])
    if not fin.any():
        return ""
    big = float(np.abs(ref[fin]).max())
    if name == "weights" and weights_absolute:
        tol = 1e-12 if f64 else 1e-5
    else:
        tol = 1e-12 * max(big, 1.0) if f64 else 1e-4 * big
    diff = np.where(fin, np.abs(g - np.where(fin, ref, 0.0)), 0.0)
    err = float(diff.max())
    if err > tol:
        i = tuple(int(j) for j in np.unravel_index(np.argmax(diff), diff.shape))
        return "%s: max error %.3g > %.3g at %s (%r vs %r; largest magnitude %.3g)" % (
            name, err, tol, i, g[i], ref[i], big)
    if big > 0 and not np.abs(g[fin]).max() > 0:
        return "%s is all 0 where the reference is not" % name
    return ""
