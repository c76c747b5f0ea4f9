#!/usr/bin/env python3
"""tests/ref/input_changed_midrun.py - rewrites IN while attnrun reads it, for
tests/cli/test_runtime.sh (guarantee 2: attnrun notices and writes nothing).
attnrun is stopped mid-run (SIGSTOP), IN rewritten, and attnrun continued.

    input_changed_midrun.py HOW DIR ERR
        runs attnrun on DIR/in.h5 (the long run of process_control.py),
        stderr to ERR, and rewrites IN once attnrun's temporary has grown
        to 64 KiB; HOW is
          h5py-w     IN truncated by h5py.File(IN, "w")
          same-size  IN overwritten with as many known bytes
          truncate   IN overwritten with half as many known bytes
          in-place   --in-place, IN overwritten with as many known bytes
                     once the temporary copy has grown past IN's size
        prints attnrun's exit status, and for in-place "same" when IN
        still holds the known bytes afterwards, else "replaced"; or
        "early: WHY" (process_control.py).
"""
import functools
import os

import h5py

import process_control as pc
from subcommands import run

KNOWN = b"attnrun test: IN was rewritten while attnrun read it\n"


def rewrite(how, d, err):
    IN, OUT = os.path.join(d, "in.h5"), os.path.join(d, "out.h5")
    size = os.path.getsize(IN)
    known = (KNOWN * (size // 40 + 1))[:size]
    if how == "in-place":
        p = pc.start([IN, "--in-place", "--group", "/r"] + pc.LONG, err)
        pc.wait_until(pc.temp_at_least(d, size + 65536), p, "its temporary grew past IN's size")
    else:
        p = pc.start([IN, "-o", OUT] + pc.LONG, err)
        pc.wait_until(pc.temp_at_least(d, 65536), p, "its temporary reached 64 KiB")
    pc.stop(p)
    if how == "h5py-w":
        try:
            h5py.File(IN, "w").close()
        except Exception:
            pass
    else:
        with open(IN, "r+b") as f:
            f.write(known if how != "truncate" else known[: size // 2])
            f.truncate()
    pc.cont(p)
    rc = pc.finish(p)
    if how == "in-place":
        with open(IN, "rb") as f:
            print(rc, "same" if f.read() == known else "replaced")
    else:
        print(rc)


if __name__ == "__main__":
    run({how: pc.supervised(functools.partial(rewrite, how))
         for how in ("h5py-w", "same-size", "truncate", "in-place")}, __doc__)
