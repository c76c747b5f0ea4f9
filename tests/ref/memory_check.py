#!/usr/bin/env python3
"""tests/ref/memory_check.py - what tests/cli/test_memory.sh needs to hold
attnrun to --memory (docs/running.md, "Steps"): the inputs, the peak
resident memory of one run, the plan's own account, and the outputs
against an unconstrained run's.

    memory_check.py inputs DIR [NAME...]
        writes, from numpy's default_rng (seeded), float32 (only the NAMEs
        given, each the same as when all are written):
          long.h5  X (1, 4096, 1024), W_Q (1024, 1024), W_K and W_V
                   (1024, 256), W_O (1024, 1024): one long item, H = 8
                   heads of d_k = 128 over G = 2 K/V heads (GQA)
          maps.h5  X (1, 4096, 256), W_Q (256, 256), W_K and W_V (256,
                   128), W_O (256, 256): H = 2, G = 1, small maps
          wide.h5  X (64, 256, 512), square (512, 512) weights: a large
                   batch, H = 8
    memory_check.py rss LIMIT_MIB TIME_LIMIT ATTNRUN ARGS...
        runs ATTNRUN ARGS (killed after TIME_LIMIT seconds) and prints its
        peak resident memory (getrusage of the children: this process has
        no other child); fails when the run fails or, LIMIT_MIB not 0,
        the peak is over LIMIT_MIB MiB.
    memory_check.py plan JSON
        the dry run's plan (--dry-run --json in the file JSON): fails
        unless what the steps hold is within the cap and the least step
        is not over it; prints held / cap.
    memory_check.py parameters PATH PRECISION
        prints the bytes of the layer's parameters (W_Q, W_K, W_V, W_O)
        of PATH in PRECISION (f32, f64): what the run holds beyond the cap.
    memory_check.py same A B
        every output dataset of A (at the root: the maps, heads, output,
        q, k, v, the summaries, mean, result) is in B with the same
        dtype, shape and bytes (same_file.py's value_difference), compared
        a block of the first axis at a time (the files run to hundreds of
        MiB).
"""
import json
import resource
import subprocess
import sys

import numpy as np
import h5py

from reference import OUTPUTS as MAIN_OUTPUTS
from same_file import value_difference
from subcommands import fail, run

MIB = 1 << 20
OUTPUTS = MAIN_OUTPUTS + ("entropy", "argmax", "distance", "mean", "result")

# name: (B, n, D, H*dk, G*dk): weights scaled by 1/sqrt(D)
INPUTS = {
    "long": (1, 4096, 1024, 1024, 256),
    "maps": (1, 4096, 256, 256, 128),
    "wide": (64, 256, 512, 512, 512),
}


def inputs(directory, *names):
    unknown = set(names) - set(INPUTS)
    if unknown:
        fail("no input named %s; the inputs are %s" % (", ".join(sorted(unknown)), ", ".join(INPUTS)))
    for seed, (name, (B, n, D, hk, gk)) in enumerate(sorted(INPUTS.items())):
        if names and name not in names:
            continue
        rng = np.random.default_rng(100 + seed)
        with h5py.File("%s/%s.h5" % (directory, name), "w") as f:
            f["X"] = rng.standard_normal((B, n, D), dtype=np.float32)
            for w, cols in (("W_Q", hk), ("W_K", gk), ("W_V", gk)):
                f[w] = (rng.standard_normal((D, cols)) / np.sqrt(D)).astype(np.float32)
            f["W_O"] = (rng.standard_normal((hk, D)) / np.sqrt(hk)).astype(np.float32)


def rss(limit_mib, time_limit, *command):
    try:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=float(time_limit))
    except subprocess.TimeoutExpired:
        fail("still running after %s s" % time_limit)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024     # KiB -> MiB
    if done.returncode != 0:
        fail("exit %d: %s" % (done.returncode, done.stderr.decode(errors="replace").strip()))
    if float(limit_mib) and peak > float(limit_mib):
        fail("peak resident memory %.1f MiB, over %s MiB" % (peak, limit_mib))
    print("peak %.1f MiB" % peak + (", limit %s MiB" % limit_mib if float(limit_mib) else ""))


def plan(path):
    with open(path) as f:
        p = json.load(f)["plan"]
    held, cap = p.get("held_bytes"), p["memory_cap"]
    if held is None:
        fail("the plan does not say what its steps hold (no plan.held_bytes)")
    if p["least_step_over_cap"]:
        fail("the least step holds %.1f MiB, over the cap of %.1f MiB"
             % (p["least_step_bytes"] / MIB, cap / MIB))
    if held > cap:
        fail("the steps hold %.1f MiB, over the cap of %.1f MiB" % (held / MIB, cap / MIB))
    print("steps of %d items x %d rows hold %.1f of %.1f MiB"
          % (p["items_per_step"], p["rows_per_block"], held / MIB, cap / MIB))


def parameters(path, precision):
    elem = 8 if precision == "f64" else 4
    with h5py.File(path, "r") as f:
        print(sum(f[w].size for w in ("W_Q", "W_K", "W_V", "W_O")) * elem)


def same(path_a, path_b):
    with h5py.File(path_a, "r") as a, h5py.File(path_b, "r") as b:
        names = [k for k in OUTPUTS if k in a]
        if not names:
            fail("%s: no outputs" % path_a)
        for k in names:
            if k not in b:
                fail("%s: not in %s" % (k, path_b))
            x, y = a[k], b[k]
            if x.dtype != y.dtype or x.shape != y.shape:
                fail("%s: %s%s vs %s%s" % (k, x.dtype, x.shape, y.dtype, y.shape))
            # blocks of about 64 MiB along the leading axis, read into two
            # buffers kept from block to block, compared as same_file does
            rows = max(1, (64 * MIB) // max(1, x.dtype.itemsize * int(np.prod(x.shape[1:]))))
            rows = min(rows, max(1, x.shape[0]))
            bx = np.empty((rows,) + x.shape[1:], x.dtype)
            by = np.empty_like(bx)
            for i in range(0, x.shape[0], rows):
                m = min(rows, x.shape[0] - i)
                x.read_direct(bx, np.s_[i:i + m], np.s_[0:m])
                y.read_direct(by, np.s_[i:i + m], np.s_[0:m])
                d = value_difference(bx[:m], by[:m])
                if d is not None:
                    fail("%s differs at %s (%d elements)" % (k, (i + d.at[0],) + d.at[1:], d.elements))
        print(", ".join(names))


COMMANDS = {"inputs": inputs, "plan": plan, "parameters": parameters, "same": same}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "rss":   # ARGS: any number
        if len(sys.argv) < 5:
            sys.stderr.write(__doc__)
            sys.exit(2)
        rss(*sys.argv[2:])
    else:
        run(COMMANDS, __doc__)
