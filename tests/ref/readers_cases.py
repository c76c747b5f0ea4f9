#!/usr/bin/env python3
"""tests/ref/readers_cases.py - the hostile results files of
tests/cli/test_readers.sh (the commands that read results files -- rollout,
heads, plot -- are as safe as the run), and its drivers of runs that must be
interrupted or raced mid-read.  Values come from numpy's default_rng with
fixed seeds, so the same arguments always write the same files.

    readers_cases.py hostile DIR
        hand-made results files, each of two groups /layer0 and /layer1
        (attnrun_version "hand-made") holding weights (2, 2, 4, 4):
        nan.h5 (NaN, +inf and -inf among the weights), unnorm.h5 (rows
        summing to 3, one negative row), and with query_token and key_token
        (2, 4): nul.h5 (fixed-length strings holding NUL bytes), utf8.h5
        (variable-length UTF-8 strings of invalid bytes: 0xff 0xfe, an
        overlong pair, a lone surrogate), mega.h5 (tokens of 1 MiB);
        unwritten.h5, weights (2^40, 1, 2, 2) chunked, no chunk written;
        unwritten_map.h5, weights (1, 1, 2^20, 2^20) chunked (1, 1, 1024,
        1024), no chunk written
    readers_cases.py link PLAIN OUT TARGET WHAT
        a copy of the plain results file PLAIN (results at /layer0) as OUT,
        with /layer0 (WHAT = group) or /layer0/weights (WHAT = weights)
        replaced by an HDF5 external link to the same path in the file
        TARGET
    readers_cases.py foreign INDEX
        adds /evil, an external link to / of elsewhere.h5, to INDEX
    readers_cases.py index_format INDEX VALUE
        rewrites INDEX's attnrun_index attribute: VALUE "string" writes the
        string "1", else the integer VALUE
    readers_cases.py extra_tokens PART GROUP
        rewrites GROUP/query_token of PART (B, n) as (B + 1, n): its first
        item's tokens once more
    readers_cases.py many TEMPLATE INDEX N
        an --append index INDEX of N groups /layer0 ... /layer{N-1}, each
        linking to a part of its own in INDEX.parts/: a copy of the part
        TEMPLATE (one layer's results at /layer0) with the group renamed;
        the index as attnrun writes it (attnrun_index 1, the template's
        attnrun_version, the links in creation order)
    readers_cases.py differ OLD NEW
        exits 1 unless the rollout datasets of OLD and NEW differ
    readers_cases.py which OUT OLD NEW
        prints "old" or "new" when OUT's rollout and layer_group equal
        OLD's or NEW's exactly, else "mixture" and where it differs
    readers_cases.py stopped INDEX DIR SIZE ARGS...
        `$ATTNRUN rollout INDEX -o DIR/rollout.h5` (stderr in DIR/err) stopped
        (SIGSTOP) once its temporary has SIZE bytes, `$ATTNRUN ARGS` run to
        its end (stderr in DIR/writer.err), then continued; prints
        "READER_RC WRITER_RC", or "early: WHY" when the rollout ended first
    readers_cases.py signalled INDEX DIR SIGNAL SIZE
        `$ATTNRUN rollout INDEX -o DIR/out.h5` (stderr in DIR/err) gets
        SIGNAL (TERM, INT, ...) once its temporary has SIZE bytes; prints
        the exit status, or "early: WHY"

The drivers run $ATTNRUN and wait at most TIME_LIMIT seconds (default 10)
for an event (process_control.py).
"""
import os
import shutil
import signal
import subprocess

import numpy as np
import h5py

import process_control as pc
from subcommands import fail, run

VLEN_UTF8 = h5py.string_dtype("utf-8")


def maps(rng, shape, sums=1.0):
    w = rng.random(shape)
    return (sums * w / w.sum(axis=-1, keepdims=True)).astype(np.float32)


def two_layers(path, weights, tokens=None, dtype=None):
    with h5py.File(path, "w") as f:
        for layer in (0, 1):
            g = f.create_group("layer%d" % layer)
            g.attrs["attnrun_version"] = "hand-made"
            g["weights"] = weights
            if tokens is not None:
                g.create_dataset("query_token", data=tokens, dtype=dtype)
                g.create_dataset("key_token", data=tokens, dtype=dtype)


def unwritten(path, shape, chunks):
    with h5py.File(path, "w") as f:
        g = f.create_group("layer0")
        g.attrs["attnrun_version"] = "hand-made"
        g.create_dataset("weights", shape=shape, dtype=np.float32, chunks=chunks)


def hostile(d):
    rng = np.random.default_rng(20260305)
    w = maps(rng, (2, 2, 4, 4))
    w[0, 0, 1, 2] = np.nan
    w[0, 1, 2, 3] = np.inf
    w[1, 0, 0, 0] = -np.inf
    two_layers(os.path.join(d, "nan.h5"), w)
    w = maps(rng, (2, 2, 4, 4), 3.0)
    w[1, 1, 3] = -0.5
    two_layers(os.path.join(d, "unnorm.h5"), w)
    t = np.array([[b"a\0b", b"\0", b"c", b"d\0\0"]] * 2, dtype="S4")
    two_layers(os.path.join(d, "nul.h5"), maps(rng, (2, 2, 4, 4)), t, t.dtype)
    t = np.array([[b"\xff\xfe", b"\xc0\xaf", b"ok", b"\xed\xa0\x80"]] * 2, dtype=object)
    two_layers(os.path.join(d, "utf8.h5"), maps(rng, (2, 2, 4, 4)), t, VLEN_UTF8)
    big = "x" * (1 << 20)
    t = np.array([[big, "a", "b", big + "y"]] * 2, dtype=object)
    two_layers(os.path.join(d, "mega.h5"), maps(rng, (2, 2, 4, 4)), t, VLEN_UTF8)
    unwritten(os.path.join(d, "unwritten.h5"), (2 ** 40, 1, 2, 2), (1, 1, 2, 2))
    unwritten(os.path.join(d, "unwritten_map.h5"), (1, 1, 2 ** 20, 2 ** 20), (1, 1, 1024, 1024))


def link(plain, out, target, what):
    shutil.copyfile(plain, out)
    path = {"group": "/layer0", "weights": "/layer0/weights"}.get(what)
    if path is None:
        fail("link: WHAT is group or weights, not %r" % what)
    with h5py.File(out, "a") as f:
        del f[path]
        f[path] = h5py.ExternalLink(target, path)


def foreign(index):
    with h5py.File(index, "a") as f:
        f["evil"] = h5py.ExternalLink("elsewhere.h5", "/")


def index_format(index, value):
    with h5py.File(index, "a") as f:
        del f.attrs["attnrun_index"]
        f.attrs["attnrun_index"] = "1" if value == "string" else np.int64(int(value))


def extra_tokens(part, group):
    with h5py.File(part, "a") as f:
        g = f[group]
        t = g["query_token"]
        values, dtype = t[()], t.dtype
        del g["query_token"]
        g.create_dataset("query_token", data=np.concatenate([values, values[:1]]), dtype=dtype)


def many(template, index, n):
    parts = index + ".parts"
    os.makedirs(parts)
    with h5py.File(template, "r") as t:
        version = t["layer0"].attrs["attnrun_version"]
    base = os.path.basename(index)
    with h5py.File(index, "w", track_order=True) as f:
        f.attrs["attnrun_index"] = np.int64(1)
        f.attrs["attnrun_version"] = version
        for i in range(int(n)):
            part = os.path.join(parts, "layer%d.1.h5" % i)
            shutil.copyfile(template, part)
            if i:
                with h5py.File(part, "a") as p:
                    p.move("layer0", "layer%d" % i)
            f["layer%d" % i] = h5py.ExternalLink("%s.parts/layer%d.1.h5" % (base, i), "/layer%d" % i)


def read_rollout(path):
    with h5py.File(path, "r") as f:
        return f["rollout"][()], list(f["layer_group"][()])


def differ(old, new):
    if np.array_equal(read_rollout(old)[0], read_rollout(new)[0]):
        fail("%s and %s hold the same rollout: the replacement changes nothing" % (old, new))


def which(out, old, new):
    o, og = read_rollout(out)
    a, ag = read_rollout(old)
    b, bg = read_rollout(new)
    if o.shape == a.shape and np.array_equal(o, a) and og == ag:
        print("old")
    elif o.shape == b.shape and np.array_equal(o, b) and og == bg:
        print("new")
    elif o.shape != a.shape:
        print("mixture: shape %s, not %s" % (o.shape, a.shape))
    else:
        items = [i for i in range(o.shape[0])
                 if not np.array_equal(o[i], a[i]) and not np.array_equal(o[i], b[i])]
        like_old = [i for i in range(o.shape[0]) if np.array_equal(o[i], a[i])]
        print("mixture: items like the old index's %s, neither's %s" % (like_old, items))


@pc.supervised
def stopped(index, d, size, *args):
    p = pc.start(["rollout", index, "-o", os.path.join(d, "rollout.h5")], os.path.join(d, "err"))
    pc.wait_until(pc.temp_at_least(d, int(size)), p, "a temporary of %s bytes" % size)
    pc.stop(p)
    with open(os.path.join(d, "writer.err"), "wb") as err:
        try:
            writer = subprocess.run([pc.ATTNRUN] + list(args), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err, timeout=pc.TL).returncode
        except subprocess.TimeoutExpired:
            writer = 137
    pc.cont(p)
    print("%d %d" % (pc.finish(p), pc.rc_of(writer)))


@pc.supervised
def signalled(index, d, name, size):
    p = pc.start(["rollout", index, "-o", os.path.join(d, "out.h5")], os.path.join(d, "err"))
    pc.wait_until(pc.temp_at_least(d, int(size)), p, "a temporary of %s bytes" % size)
    os.kill(p.pid, getattr(signal, "SIG" + name))
    print(pc.finish(p, 5))


def mutants(src, d, count, seed):
    """COUNT copies of SRC in D, mutant-K.h5, each with one to four bytes
    set to random values at random places (seeded)."""
    data = open(src, "rb").read()
    rng = np.random.default_rng(int(seed))
    for k in range(int(count)):
        b = bytearray(data)
        for at in rng.integers(0, len(b), rng.integers(1, 5)):
            b[at] = int(rng.integers(0, 256))
        with open(os.path.join(d, "mutant-%d.h5" % k), "wb") as f:
            f.write(bytes(b))


if __name__ == "__main__":
    run({"hostile": hostile, "link": link, "foreign": foreign, "index_format": index_format,
         "extra_tokens": extra_tokens, "many": many, "differ": differ, "which": which,
         "stopped": stopped, "signalled": signalled, "mutants": mutants}, __doc__)
