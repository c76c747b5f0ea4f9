"""tests/ref/forward_example_check.py - the numbers examples/forward.c prints,
against the float64 reference (tests/ref/reference.py: x W per head, scale
1/sqrt(d_k), causal mask, softmax over keys, weights V, concat W_O), to 1e-9,
for tests/cli/test_install.sh.

    python3 tests/ref/forward_example_check.py OUTPUT
        OUTPUT: what forward printed, H*N rows of N weights then N rows of D
        outputs; prints "V values, largest difference E", or exits nonzero
        saying what differs
"""
import sys

import numpy as np

import reference   # tests/ref/reference.py, the tree's one attention reference

N, D, H, DK = 3, 4, 2, 2


def fill(count, k):
    return np.array([((i * k) % 9 - 4) / 4.0 for i in range(count)])


def expected_values():
    """The weights (H, N, N) then the output (N, D), flattened."""
    x = fill(N * D, 1).reshape(N, D)
    wq, wk, wv = (fill(D * H * DK, k).reshape(D, H * DK) for k in (2, 4, 5))
    wo = fill(H * DK * D, 7).reshape(H * DK, D)
    ref = reference.attention(x, wq, wk, wv, wo, H, causal=True)
    return np.concatenate([ref["weights"].ravel(), ref["output"].ravel()])


def main(path):
    expected = expected_values()
    rows = [line.split() for line in open(path).read().splitlines()]
    shape = [len(r) for r in rows]
    if shape != [N] * (H * N) + [D] * N:
        sys.exit("printed rows of %s values, expected %d rows of %d then %d of %d"
                 % (shape, H * N, N, N, D))
    got = np.array([float(v) for r in rows for v in r])
    err = np.abs(got - expected).max()
    if not err <= 1e-9:
        sys.exit("largest difference %g at %d: %r vs %r" % (err, int(np.argmax(np.abs(got - expected))),
                 got.tolist(), expected.tolist()))
    print("%d values, largest difference %.1e" % (got.size, err))


if __name__ == "__main__":
    main(sys.argv[1])
