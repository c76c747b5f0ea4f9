#!/usr/bin/env python3
"""tests/ref/lock_contention.py - attnrun against another holder of its lock:
a second --in-place run, an h5py writer, another append's commit.  Drivers
for tests/cli/test_runtime.sh (guarantee 3) and test_append.sh; each prints
exit statuses and what it saw on one line, or "early: WHY" when attnrun
ended before the event it waits for (process_control.py).

    lock_contention.py two_runs DIR MODE ERR1 ERR2
        two --in-place runs of DIR/in.h5 (groups /g1, /g2): the first is
        stopped once its copy of IN is made, the second starts (with --wait
        when MODE is "wait"); prints "RC2 RC1 WAITED", WAITED "blocked"
        when the second was seen waiting in flock, "unseen", or "-"
    lock_contention.py sigterm_while_waiting DIR ERR
        an h5py writer holds DIR/in.h5; an --in-place --wait run gets
        SIGTERM while it waits; prints "RC same|changed blocked|unseen"
    lock_contention.py held DIR ERR
        an h5py writer holds DIR/in.h5 while an -o run starts; prints
        "RC same|changed"
    lock_contention.py held_wait DIR ERR
        an h5py writer holds DIR/in.h5 until an -o --wait run waits for it,
        then lets go; prints "RC blocked|unseen"
    lock_contention.py kinds DIR
        the flock an -o run and an --in-place run of DIR/in.h5 hold, each
        probed while it is stopped mid-run; prints "0 O_SH O_EX I_SH I_EX",
        each "held" or "free"
    lock_contention.py append_index ATTNRUN FIXTURE DIR MODE ERR
        holds the lock of the index directory DIR (as another append's
        commit does) while `-o DIR/results.h5 --append --group /layer1`
        waits for it; then sends SIGTERM (MODE "signal") or lets go
        (MODE "release"); prints the run's exit status
"""
import fcntl
import os
import signal
import time

import h5py

import process_control as pc
from subcommands import run


def two_runs(d, mode, err1, err2):
    IN = os.path.join(d, "in.h5")
    size = os.path.getsize(IN)
    p1 = pc.start([IN, "--in-place", "--group", "/g1"] + pc.LONG, err1)
    pc.wait_until(pc.temp_at_least(d, size), p1, "the first run's copy of IN")
    pc.stop(p1)
    extra = ["--wait"] if mode == "wait" else []
    p2 = pc.start([IN, "--in-place", "--group", "/g2"] + pc.LONG + extra, err2)
    waited = "-"
    if mode == "wait":
        try:
            waited = "blocked" if pc.wait_blocked(p2, IN) else "unseen"
            if p2.poll() is not None:
                raise pc.Early("the --wait run ended (exit %d) while the lock was held" % pc.rc_of(p2.returncode))
        except pc.Early:
            pc.cont(p1)
            pc.finish(p1)
            raise
        rc2 = None
    else:
        rc2 = pc.finish(p2)
    pc.cont(p1)
    rc1 = pc.finish(p1)
    if rc2 is None:
        rc2 = pc.finish(p2)
    print(rc2, rc1, waited)


def sigterm_while_waiting(d, err):
    IN = os.path.join(d, "in.h5")
    holder = h5py.File(IN, "a")
    before = pc.sha(IN)
    p = pc.start([IN, "--in-place", "--group", "/g", "--heads", "4", "--wait"], err)
    try:
        blocked = pc.wait_blocked(p, IN)
    except pc.Early:
        holder.close()
        raise
    os.kill(p.pid, signal.SIGTERM)
    rc = pc.finish(p, 5)
    same = pc.sha(IN) == before
    holder.close()
    print(rc, "same" if same else "changed", "blocked" if blocked else "unseen")


def held(d, err):
    IN, OUT = os.path.join(d, "in.h5"), os.path.join(d, "out.h5")
    holder = h5py.File(IN, "a")
    before = pc.sha(IN)
    rc = pc.finish(pc.start([IN, "-o", OUT, "--heads", "4"], err))
    same = pc.sha(IN) == before
    holder.close()
    print(rc, "same" if same else "changed")


def held_wait(d, err):
    IN, OUT = os.path.join(d, "in.h5"), os.path.join(d, "out.h5")
    holder = h5py.File(IN, "a")
    p = pc.start([IN, "-o", OUT, "--heads", "4", "--wait"], err)
    try:
        blocked = pc.wait_blocked(p, IN)
    finally:
        holder.close()
    if os.path.exists(OUT):
        raise pc.Early("OUT was written while the h5py writer held IN")
    print(pc.finish(p), "blocked" if blocked else "unseen")


def probe(path, kind):
    """'held' when a flock of kind on path would block, else 'free'."""
    with open(path, "rb") as f:
        try:
            fcntl.flock(f, kind | fcntl.LOCK_NB)
        except BlockingIOError:
            return "held"
        fcntl.flock(f, fcntl.LOCK_UN)
        return "free"


def kinds(d):
    IN, OUT = os.path.join(d, "in.h5"), os.path.join(d, "out.h5")
    size = os.path.getsize(IN)
    answers = []
    for mode in ("-o", "--in-place"):
        args = [IN, "-o", OUT] if mode == "-o" else [IN, "--in-place", "--group", "/g"]
        p = pc.start(args + pc.LONG)
        pc.wait_until(pc.temp_at_least(d, size if mode != "-o" else 16384), p, "a temporary")
        pc.stop(p)
        answers += [probe(IN, fcntl.LOCK_SH), probe(IN, fcntl.LOCK_EX)]
        p.kill()
        p.wait()
        for t in pc.temps(d):
            os.unlink(os.path.join(d, t))
    print(0, *answers)


def append_index(attnrun, fixture, d, mode, err):
    lock = os.open(d, os.O_RDONLY | os.O_DIRECTORY)     # another append's commit, in effect
    fcntl.flock(lock, fcntl.LOCK_EX)
    p = pc.start([fixture, "-o", os.path.join(d, "results.h5"), "--heads", "1",
                  "--append", "--group", "/layer1"], err, prog=attnrun)
    end = time.monotonic() + 10
    flock = pc.NR["flock"] if pc.NR else None
    while pc.syscall(p.pid) != flock:
        if p.poll() is not None:
            raise pc.Early("exit %d without waiting for the lock" % p.returncode)
        if time.monotonic() > end or flock is None:
            raise pc.Early("not seen waiting in flock")
        time.sleep(0.005)
    time.sleep(0.1)
    if mode == "signal":
        p.send_signal(signal.SIGTERM)
    else:
        os.close(lock)
    print(pc.finish(p, 10))


if __name__ == "__main__":
    run({f.__name__: pc.supervised(f) for f in (two_runs, sigterm_while_waiting, held, held_wait,
                                                kinds, append_index)}, __doc__)
