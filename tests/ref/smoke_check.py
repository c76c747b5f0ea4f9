"""tests/ref/smoke_check.py DIR - judges test_smoke.sh's runs of every
subcommand on the toy fixture (fixtures/toy.h5, one head):

- DIR/out.h5 (attnrun) holds scores, weights, heads and output within the
  fixture's tolerances (fixtures/tolerances.tsv) of fixtures/toy.expected.h5,
  the float64 reference make_fixtures.py computed from the formulas;
- DIR/rollout.h5 (attnrun rollout, default R = 0.5) holds
  rownorm(0.5 W + 0.5 I) of those expected weights (one layer: A_1);
- DIR/flow.h5 (attnrun flow, R = 0.5) holds the same A_1: through one
  layer each flow is its edge;
- DIR/heads.csv (attnrun heads) has the census header and one line for
  the one head, whose entropy is -sum p log p of the expected weights
  averaged over the queries;
- DIR/toy.png (attnrun plot) is a PNG (signature and IHDR) of nonzero size.

Prints one `ok`/`FAIL` line per check."""

import csv
import os
import struct
import sys

import h5py
import numpy as np

HEADER = "layer,head,entropy,distance,first,previous,self,duplicate,induction"


def verdict(good, what):
    print(("ok " if good else "FAIL ") + what)


def main(folder, fixtures):
    tol = {}
    with open(os.path.join(fixtures, "tolerances.tsv")) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3 and parts[0] == "toy":
                tol[parts[1]] = float(parts[2])
    with h5py.File(os.path.join(fixtures, "toy.expected.h5"), "r") as exp, \
            h5py.File(os.path.join(folder, "out.h5"), "r") as out:
        for path in ("/scores", "/weights", "/heads", "/output"):
            got = out[path][()].astype(np.float64)
            want = exp[path][()]
            worst = float(np.max(np.abs(got - want))) if got.shape == want.shape else np.inf
            verdict(worst <= tol[path], "run: %s within %g of the reference (%.3g)"
                    % (path, tol[path], worst))
        w = exp["/weights"][()][0]                          # (n, n), one head
    n = w.shape[0]
    a = 0.5 * w + 0.5 * np.eye(n)
    a /= a.sum(axis=1, keepdims=True)
    with h5py.File(os.path.join(folder, "rollout.h5"), "r") as f:
        got = f["rollout"][()].reshape(n, n)
    verdict(np.max(np.abs(got - a)) < 1e-5, "rollout: rownorm(W/2 + I/2) of one layer")
    # one layer: each flow is its edge's capacity, the same Â
    with h5py.File(os.path.join(folder, "flow.h5"), "r") as f:
        got = f["flow"][()].reshape(n, n)
    verdict(np.max(np.abs(got - a)) < 1e-6, "flow: one layer's flows are its edges, rownorm(W/2 + I/2)")
    with open(os.path.join(folder, "heads.csv")) as f:
        lines = f.read().splitlines()
    verdict(lines[:1] == [HEADER] and len(lines) == 2, "heads: the census header and one head")
    row = next(csv.DictReader(lines))
    entropy = float(np.mean(-np.sum(np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0), axis=1)))
    verdict(abs(float(row["entropy"]) - entropy) < 1e-5,
            "heads: entropy %s against %.8f" % (row["entropy"], entropy))
    with open(os.path.join(folder, "toy.png"), "rb") as f:
        head = f.read(24)
    width, height = struct.unpack(">II", head[16:24]) if len(head) == 24 else (0, 0)
    verdict(head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and width > 0 and height > 0,
            "plot: a PNG of %d x %d" % (width, height))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
