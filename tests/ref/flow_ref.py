#!/usr/bin/env python3
"""tests/ref/flow_ref.py - attention flow computed by networkx on the
paper's construction, and the checks of tests/cli/test_flow.sh
(`attnrun flow`).

The reference is Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers" (ACL 2020), section 4: the layers as a directed graph with a
node per (layer, token), an edge between a token of one layer and a token
of the next of capacity the attention between them (with the residual
connection as rollout takes it, rollout_ref.layer_attention), and the flow
from an input token to a position the value of the maximum flow between
their nodes.  The graph is built as the paper's code builds it
(samiraabnar/attention_flow, attention_graph_util.py: an edge from each
query of layer l to each key of layer l - 1, the flow sought from the
position above the last layer down to the input token) and each value is
networkx's maximum_flow_value (its default, preflow-push), in float64,
from the weights attnrun saved read back with h5py; never from attnrun's
flow.

    flow_ref.py
        self-checks: graphs whose flows are known by hand
    flow_ref.py check OUT RESULTS R GROUP...
        OUT's flow (B, n, n) float64 against networkx's through RESULTS'
        GROUPs in order with residual R, within 1e-9; its axes, its
        layer_group, tokens and attributes (certificate_gap at most 1e-12);
        prints the largest difference
    flow_ref.py identity OUT
        every map of OUT's flow is the identity, exactly (--residual 1)
    flow_ref.py causal OUT
        every flow to an earlier position (key after query) is exactly 0
    flow_ref.py same A B
        the flows of A and B are the same bits (threads)
    flow_ref.py item RESULTS OUT ITEM
        one item's flows against networkx (long inputs: the rest unchecked)

Each check prints the reason and exits 1 when it is not so
(tests/ref/subcommands.py).
"""
import sys

import numpy as np
import h5py
import networkx as nx

import rollout_ref
from rollout_ref import check_tokens, head_means, layer_attention
from subcommands import check, fail, run

TOLERANCE = 1e-9
AXES = ("batch", "query", "key")


# ------------------------------------------------------------ the reference

def graph(layers):
    """The paper's graph of the layers Â (L of (n, n)): node l * n + i is
    token i above layer l (0: the input), an edge from each query of layer
    l to each key below it of capacity Â_l[q, k]."""
    n = layers[0].shape[0]
    g = nx.DiGraph()
    g.add_nodes_from(range((len(layers) + 1) * n))
    for l, a in enumerate(layers, start=1):
        for q in range(n):
            for k in range(n):
                if a[q, k] > 0:
                    g.add_edge(l * n + q, (l - 1) * n + k, capacity=float(a[q, k]))
    return g


def flows(layers):
    """(n, n) flow[q, j] from input token j to position q above the last
    layer."""
    n, top = layers[0].shape[0], len(layers) * layers[0].shape[0]
    g = graph(layers)
    out = np.zeros((n, n))
    for q in range(n):
        for j in range(n):
            out[q, j] = nx.maximum_flow_value(g, top + q, j)
    return out


def expected(results, residual, groups, items=None):
    """(B, n, n) the reference flow through groups of results."""
    with h5py.File(results, "r") as f:
        means = [head_means(f, g) for g in groups]
    chosen = range(means[0].shape[0]) if items is None else items
    return np.stack([flows([layer_attention(m[b], residual) for m in means]) for b in chosen])


def self_check():
    # one layer: each flow is its edge
    a = np.array([[1.0, 0.0], [0.25, 0.75]])
    check(np.abs(flows([a]) - a).max() != 0 and "one layer: not its edges")
    # two layers: token j reaches q through every middle token k, at most
    # min(Â_1[k, j], Â_2[q, k]) along each
    b = np.array([[0.5, 0.5], [0.9, 0.1]])
    want = np.array([[sum(min(a[k, j], b[q, k]) for k in range(2)) for j in range(2)]
                     for q in range(2)])
    check(np.abs(flows([a, b]) - want).max() > 1e-15 and "two layers: not the sum of minima")
    # a bottleneck: token 0 reaches the middle's token 0 alone, whose way
    # up to position 0 is 0.1 and to position 1 none
    c = np.array([[1.0, 0.0], [0.0, 1.0]])
    d = np.array([[0.1, 0.9], [0.0, 1.0]])
    got = flows([c, d])
    check(abs(got[0, 0] - 0.1) > 1e-15 and "bottleneck: %r, expected 0.1" % got[0, 0])
    check(got[1, 0] != 0 and "no path: %r, expected 0" % got[1, 0])
    # the identity with residual 1
    e = layer_attention(np.full((3, 3), 1 / 3), 1.0)
    check(np.abs(flows([e, e]) - np.eye(3)).max() != 0 and "residual 1: not the identity")
    print("self-check: 5 cases by hand")


def read_flow(path):
    with h5py.File(path, "r") as f:
        return f["flow"][()]


def check_layout(out):
    check(rollout_ref.check_layout(out, "flow", AXES, ("query_token", "key_token")))
    with h5py.File(out, "r") as f:
        if f["flow"].dtype != np.float64:
            fail("%s: flow is %s, expected float64" % (out, f["flow"].dtype))


def check_out(out, results, residual, group, *more):
    groups = (group,) + more
    residual = float(residual)
    want = expected(results, residual, groups)
    got = read_flow(out)
    if got.shape != want.shape:
        fail("%s: flow has shape %s, expected %s" % (out, got.shape, want.shape))
    diff = np.abs(got - want)
    if not (diff <= TOLERANCE).all():
        at = tuple(int(i) for i in np.argwhere(~(diff <= TOLERANCE))[0])
        fail("%s: flow at %s is %r, networkx says %r" % (out, at, float(got[at]), float(want[at])))
    check_layout(out)
    with h5py.File(out, "r") as f:
        layers = list(f["layer_group"].asstr()[()])
        if layers != list(groups):
            fail("%s: layer_group %s, expected %s" % (out, layers, list(groups)))
        attrs = dict(f.attrs)
        for key, value in (("attnrun_analysis", "flow"), ("source", results),
                           ("residual", residual)):
            if attrs.get(key) != value:
                fail("%s: attribute %s is %r, expected %r" % (out, key, attrs.get(key), value))
        gap = attrs.get("certificate_gap")
        if gap is None or not 0 <= gap <= 1e-12:
            fail("%s: certificate_gap %r, expected one at most 1e-12" % (out, gap))
    check_tokens(out, results, groups[0])
    print("%d items, %d layers of %d tokens; largest difference from networkx %.2g" %
          (want.shape[0], len(groups), want.shape[1], float(diff.max())))


def identity(out):
    got = read_flow(out)
    if not np.array_equal(got, np.broadcast_to(np.eye(got.shape[-1]), got.shape)):
        fail("%s: the flow with --residual 1 is not the identity: %s" % (out, got[0].tolist()))


def causal(out):
    got = read_flow(out)
    upper = np.triu(np.ones(got.shape[-2:], bool), 1)
    if (got[:, upper] != 0).any():
        fail("%s: a flow to an earlier position is not 0: %s" % (out, got[0].tolist()))
    if not (got[:, ~upper] > 0).any():
        fail("%s: every flow is 0" % out)


def same(a, b):
    x, y = read_flow(a), read_flow(b)
    if x.shape != y.shape or not np.array_equal(x.view(np.uint64), y.view(np.uint64)):
        fail("%s and %s differ" % (a, b))


def item(results, out, index):
    index = int(index)
    with h5py.File(out, "r") as f:
        groups = list(f["layer_group"].asstr()[()])
        residual = float(f.attrs["residual"])
    want = expected(results, residual, groups, [index])[0]
    got = read_flow(out)[index]
    diff = np.abs(got - want).max()
    check(not diff <= TOLERANCE and "%s: item %d differs from networkx by %.3g" % (out, index, diff))
    print("item %d: largest difference from networkx %.2g" % (index, diff))


if __name__ == "__main__":
    if len(sys.argv) == 1:
        self_check()
    else:
        run({"check": check_out, "identity": identity, "causal": causal, "same": same,
             "item": item}, __doc__)
