#!/usr/bin/env python3
"""tests/ref/provenance_check.py - the provenance attributes attnrun writes on
the group that holds its results (docs/contract.md §3).

    provenance_check.py attributes OUT GROUP PRECISION CAUSAL
        a run of fixtures/batch_bias.h5 with --heads 4: every provenance
        attribute present on GROUP, the input's name and --heads in the
        command line, heads/d_k/d_v 4, scale 1/sqrt(4), causal CAUSAL (0 or
        1), precision PRECISION, created_utc ISO-8601 UTC and within 10
        minutes of now
    provenance_check.py group_option OUT
        --group /results/run1: the outputs and provenance there, none at /,
        the batch scale inside the group
    provenance_check.py created_utc OUT EXPECTED
        the root's created_utc is exactly EXPECTED (under a fake clock)

Each prints the reason and exits 1 when OUT is not so (tests/ref/subcommands.py).
"""
import datetime
import math
import re

import h5py

from reference import OUTPUTS
from subcommands import fail, run

ATTRIBUTES = ("attnrun_version", "command_line", "input_file", "heads", "d_k", "d_v",
              "scale", "causal", "precision", "created_utc")
ISO_UTC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def check_created_now(t):
    if not re.fullmatch(ISO_UTC, t):
        fail("created_utc %r is not ISO-8601 UTC ending in Z" % t)
    when = datetime.datetime.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    if abs((now - when).total_seconds()) > 600:
        fail("created_utc %s is not now (%s UTC)" % (t, now.isoformat(timespec="seconds")))


def attributes(out, group, precision, causal):
    with h5py.File(out, "r") as f:
        a = f[group].attrs
        for key in ATTRIBUTES:
            if key not in a:
                fail("attribute %s missing on %s (has %s)" % (key, group, sorted(a)))
        if not text(a["attnrun_version"]):
            fail("attnrun_version is empty")
        cl = text(a["command_line"])
        if "batch_bias.h5" not in cl or "--heads" not in cl:
            fail("command_line %r lacks the input name or --heads" % cl)
        if not text(a["input_file"]).endswith("batch_bias.h5"):
            fail("input_file is %r" % text(a["input_file"]))
        if int(a["heads"]) != 4 or int(a["d_k"]) != 4 or int(a["d_v"]) != 4:
            fail("heads/d_k/d_v = %s/%s/%s, expected 4/4/4" % (a["heads"], a["d_k"], a["d_v"]))
        if abs(float(a["scale"]) - 1 / math.sqrt(4)) > 1e-12:
            fail("scale %r, expected %r" % (float(a["scale"]), 1 / math.sqrt(4)))
        if int(a["causal"]) != int(causal):
            fail("causal %s, expected %s" % (a["causal"], causal))
        if text(a["precision"]) != precision:
            fail("precision %r, expected %r" % (text(a["precision"]), precision))
        check_created_now(text(a["created_utc"]))


def group_option(out):
    with h5py.File(out, "r") as f:
        if "results/run1" not in f:
            fail("no group /results/run1 (file has %s)" % list(f))
        g = f["results/run1"]
        held = sorted(k for k in OUTPUTS if k in g)
        if held != ["heads", "output", "scores", "weights"]:
            fail("/results/run1 holds outputs %s, expected heads, output, scores, weights" % held)
        at_root = sorted(k for k in OUTPUTS if k in f)
        if at_root:
            fail("outputs at / as well: %s" % at_root)
        for key in ("attnrun_version", "heads", "scale", "created_utc"):
            if key not in g.attrs:
                fail("attribute %s missing on /results/run1" % key)
        if "heads" in f.attrs:
            fail("provenance written on / instead of (or as well as) the group")
        if g["weights"].dims[0][0].parent.name != "/results/run1":
            fail("weights' batch scale lives at %s" % g["weights"].dims[0][0].name)


def created_utc(out, expected):
    with h5py.File(out, "r") as f:
        got = text(f.attrs.get("created_utc"))
    if got != expected:
        fail("created_utc %r" % (got,))


if __name__ == "__main__":
    run({f.__name__: f for f in (attributes, group_option, created_utc)}, __doc__)
