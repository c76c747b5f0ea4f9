#!/usr/bin/env python3
"""bench/flow.py - how fast attnrun flow computes attention flow, against
the tools researchers use for it (make bench, make bench-flow).

    python3 bench/flow.py --attnrun build/attnrun [--flow-time build/bench/attnbench-flow]
                          [--runs 3] [--only scipy,networkx,bert] [--work build/bench/flow]

The workloads are results files of random attention maps (each row a
softmax of normal scores times 3, not causal, as BERT's), written once with
h5py into the work directory as hand-made results groups, 12 heads a layer,
one item:

    scipy     12 layers, n = 64: attnrun flow, the whole process (the median
              of --runs runs, on every core, and two such runs at once),
              against scipy's maximum_flow (Dinic's algorithm) driven as
              GlobEnc's src/attention_max_flow.py drives it -- the capacities
              times 1e7 rounded to integers in one csr_matrix of the whole
              graph, one call per (position, input token) pair -- the loop
              of calls alone, timed once.  Target: 20 times faster.
    networkx  12 layers, n = 32 (networkx finishes in about a minute):
              attnrun flow against networkx's maximum_flow_value on the
              paper's construction (samiraabnar/attention_flow: the graph
              from the adjacency matrix, one call per pair), the loop
              alone.  Target: 1,000 times faster.
    bert      12 layers, n = 128 and n = 512 (BERT-base's shape): the time
              of the one item on 1 and 2 threads.

Each attnrun run is timed by /usr/bin/time (wall, CPU seconds, peak RSS),
its output removed before; its flows are compared with the reference's
(scipy's to its rounding, 1e-6; networkx's to 1e-9) so that the times are
of the same numbers.  Beside the whole process, attnbench-flow
(bench/flow_time.c) times attn_flow alone on the same Â: the loop against
the loop.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import h5py
import numpy as np

LAYERS, HEADS = 12, 12
TARGET = {"scipy": 20.0, "networkx": 1000.0}


def make(path, n, seed=11):
    """A results file of LAYERS random layers of one item of n tokens."""
    if os.path.exists(path):
        return
    rng = np.random.default_rng(seed)
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        for l in range(LAYERS):
            g = f.create_group("layer%02d" % l)
            g.attrs["attnrun_version"] = "bench"
            s = rng.standard_normal((1, HEADS, n, n)) * 3
            s -= s.max(axis=-1, keepdims=True)
            w = np.exp(s)
            g["weights"] = (w / w.sum(axis=-1, keepdims=True)).astype(np.float32)
    os.rename(tmp, path)


def layers_of(path, residual=0.5):
    """The L capacity matrices Â (n, n), float64, as attnrun flow takes them."""
    out = []
    with h5py.File(path, "r") as f:
        for l in range(LAYERS):
            mean = f["layer%02d/weights" % l][0].astype(np.float64).mean(axis=0)
            a = (1 - residual) * mean + residual * np.eye(mean.shape[0])
            out.append(a / a.sum(axis=1, keepdims=True))
    return out


def timed(cmd, work):
    """(wall s, cpu s, peak RSS KiB) of one run, by /usr/bin/time."""
    stats = os.path.join(work, "time.txt")
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", stats] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit("bench/flow.py: %s failed: %s" % (" ".join(cmd), p.stderr.decode(errors="replace")))
    user, system, rss = open(stats).read().split()[-3:]
    return wall, float(user) + float(system), int(rss)


def attnrun(args, results, out, runs, threads=None):
    cmd = [args.attnrun, "flow", results, "-o", out, "-q"]
    if threads:
        cmd += ["--threads", str(threads)]
    times = []
    for _ in range(runs):
        if os.path.exists(out):
            os.unlink(out)
        times.append(timed(cmd, args.work))
    wall = statistics.median(t[0] for t in times)
    return wall, statistics.median(t[1] for t in times), max(t[2] for t in times)


def two_at_once(args, results, out):
    """The walls of two attnrun flow runs started together (a busy machine)."""
    procs, start = [], time.perf_counter()
    for i in range(2):
        if os.path.exists("%s.%d" % (out, i)):
            os.unlink("%s.%d" % (out, i))
        procs.append(subprocess.Popen([args.attnrun, "flow", results, "-o", "%s.%d" % (out, i),
                                       "-q"]))
    walls = []
    for p in procs:
        p.wait()
        walls.append(time.perf_counter() - start)
    return max(walls)


def flow_alone(args, layers):
    """The median seconds of attn_flow alone on these layers (attnbench-flow)."""
    path = os.path.join(args.work, "a_hat.bin")
    a = np.stack(layers)
    with open(path, "wb") as f:
        f.write(np.array([a.shape[1], a.shape[0]], "<u8").tobytes())
        f.write(a.astype("<f8").tobytes())
    out = subprocess.run([args.flow_time, path, str(max(args.runs, 3))], capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[0])


def read_flow(path):
    with h5py.File(path, "r") as f:
        return f["flow"][0]


def scipy_loop(layers):
    """GlobEnc's way: the whole graph's capacities times 1e7 as integers, one
    maximum_flow call per pair; the loop alone timed."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow
    n = layers[0].shape[0]
    size = (len(layers) + 1) * n
    adj = np.zeros((size, size))
    for l, a in enumerate(layers):
        adj[l * n:(l + 1) * n, (l + 1) * n:(l + 2) * n] = a.T     # key below -> query above
    graph = csr_matrix(np.round(adj * 1e7).astype(np.int32))
    flows = np.zeros((n, n))
    t = time.perf_counter()
    for q in range(n):
        for j in range(n):
            flows[q, j] = maximum_flow(graph, j, len(layers) * n + q).flow_value
    return time.perf_counter() - t, flows / 1e7


def networkx_loop(layers):
    """The paper's construction: the adjacency matrix of every layer (query
    above to key below), a DiGraph of it, one maximum_flow_value call per
    pair; the loop alone timed."""
    import networkx as nx
    n, L = layers[0].shape[0], len(layers)
    size = (L + 1) * n
    adj = np.zeros((size, size))
    for l in range(1, L + 1):
        adj[l * n:(l + 1) * n, (l - 1) * n:l * n] = layers[l - 1]
    g = nx.from_numpy_array(adj, create_using=nx.DiGraph())
    nx.set_edge_attributes(g, {e: g.edges[e]["weight"] for e in g.edges}, "capacity")
    flows = np.zeros((n, n))
    t = time.perf_counter()
    for q in range(n):
        for j in range(n):
            flows[q, j] = nx.maximum_flow_value(g, L * n + q, j)
    return time.perf_counter() - t, flows


def versus(args, name, n, loop, tolerance):
    results = os.path.join(args.work, "%s-%d.h5" % (name, n))
    out = os.path.join(args.work, "%s-%d-flow.h5" % (name, n))
    make(results, n)
    wall, cpu, rss = attnrun(args, results, out, args.runs)
    busy = two_at_once(args, results, out) if name == "scipy" else None
    layers = layers_of(results)
    alone = flow_alone(args, layers)
    theirs, flows = loop(layers)
    diff = float(np.abs(read_flow(out) - flows).max())
    ratio = theirs / wall
    print("%-9s n = %3d, %d layers: attnrun flow %.3f s (%.3f CPU s, %d MiB)%s, attn_flow "
          "alone %.4f s; %s loop %.2f s (%.2f ms a pair); %.0fx faster, the loops %.0fx "
          "(target %.0fx: %s); flows agree to %.1e (%s)" %
          (name, n, LAYERS, wall, cpu, rss // 1024,
           ", two at once %.3f s" % busy if busy is not None else "", alone, name, theirs,
           1e3 * theirs / (n * n), ratio, theirs / alone, TARGET[name],
           "met" if ratio >= TARGET[name] else "met by the loops" if theirs / alone >= TARGET[name]
           else "MISSED", diff, "ok" if diff <= tolerance else "DIFFER"))
    sys.stdout.flush()


def bert(args):
    for n in (128, 512):
        results = os.path.join(args.work, "bert-%d.h5" % n)
        out = os.path.join(args.work, "bert-%d-flow.h5" % n)
        make(results, n)
        line, walls = [], []
        for threads in (1, 2):
            wall, cpu, rss = attnrun(args, results, out, 1 if n > 128 else args.runs, threads)
            walls.append(wall)
            line.append("%d thread%s %.2f s (%.2f CPU s, %d MiB)" %
                        (threads, "" if threads == 1 else "s", wall, cpu, rss // 1024))
        print("bert      n = %3d, %d layers, one item: %s; %.0f us a pair on 1 thread, "
              "%.2fx on 2" % (n, LAYERS, ", ".join(line), 1e6 * walls[0] / (n * n),
                              walls[0] / walls[1]))
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnrun", default="build/attnrun")
    ap.add_argument("--flow-time", default="build/bench/attnbench-flow")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="scipy,networkx,bert")
    ap.add_argument("--work", default="build/bench/flow")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    only = args.only.split(",")
    print("attnrun flow (bench/flow.py): one item, 12 layers of 12 heads, %d cores" % os.cpu_count())
    if "scipy" in only:
        versus(args, "scipy", 64, scipy_loop, 1e-6)
    if "networkx" in only:
        versus(args, "networkx", 32, networkx_loop, 1e-9)
    if "bert" in only:
        bert(args)


if __name__ == "__main__":
    main()
