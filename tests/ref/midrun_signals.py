#!/usr/bin/env python3
"""tests/ref/midrun_signals.py - signals and broken pipes in the middle of a
run, for tests/cli/test_runtime.sh (guarantees 9, 11, 12 and 15).  Each
driver prints attnrun's exit status (as a shell gives it; 137 when the hang
guard killed it) and what it saw, or "early: WHY" when attnrun ended before
the event it waits for (process_control.py).  IN is the long run's input.

    midrun_signals.py each DIR SIGNAL...
        per SIGNAL (INT, TERM, ...): a run of DIR/in.h5 into DIR/sig/SIGNAL/,
        stderr in DIR/err_SIGNAL, signalled once its temporary has 16 KiB;
        prints "SIGNAL RC" (or "SIGNAL early: WHY") per line
    midrun_signals.py sigpipe DIR ERR
        SIGPIPE once the temporary of a run of DIR/in.h5 has 16 KiB; prints RC
    midrun_signals.py epipe_progress DIR
        a --progress run of DIR/in.h5 whose stderr is a pipe closed after
        its first byte (attnrun stopped meanwhile); prints RC
    midrun_signals.py fsync DIR MODE ERR
        a run of DIR/in.h5 (MODE -o or --in-place) under strace, each fsync
        delayed 3 s; SIGINT while it is in the fsync of its temporary;
        prints RC
    midrun_signals.py address_limit DIR ERR KB FIXTURE LONG
        a run under RLIMIT_AS of KB kB (FIXTURE when KB is 200000, else the
        long run of LONG) gets SIGTERM once its temporary has 16 KiB, or
        after 2 s; prints "RC signalled", or "RC ended before the signal"
    midrun_signals.py long_name_kill DIR IN BASE ERR
        SIGKILL once a file in DIR has 16 KiB, to a run of IN into DIR/BASE;
        prints RC
"""
import os
import resource
import select
import signal
import time

import process_control as pc
from subcommands import run


def each(d, *names):
    IN = os.path.join(d, "in.h5")
    for name in names:
        od = os.path.join(d, "sig", name)
        os.makedirs(od)
        try:
            p = pc.start([IN, "-o", os.path.join(od, "out.h5")] + pc.LONG, os.path.join(d, "err_%s" % name))
            pc.wait_until(pc.temp_at_least(od, 16384), p, "its temporary reached 16 KiB")
            os.kill(p.pid, getattr(signal, "SIG" + name))
            print(name, pc.finish(p, 5))
        except pc.Early as e:
            print(name, "early: %s" % e)
            pc.finish(p, 0.001)


def sigpipe(d, err):
    p = pc.start([os.path.join(d, "in.h5"), "-o", os.path.join(d, "out.h5")] + pc.LONG, err)
    pc.wait_until(pc.temp_at_least(d, 16384), p, "its temporary reached 16 KiB")
    os.kill(p.pid, signal.SIGPIPE)
    print(pc.finish(p))


def epipe_progress(d):
    r, w = os.pipe()
    p = pc.start([os.path.join(d, "in.h5"), "-o", os.path.join(d, "out.h5"), "--progress"] + pc.LONG, w)
    os.close(w)
    if not select.select([r], [], [], pc.TL)[0] or not os.read(r, 1):
        os.close(r)
        raise pc.Early("no progress on stderr within %g s" % pc.TL)
    pc.stop(p)
    os.close(r)
    pc.cont(p)
    print(pc.finish(p))


def fsync(d, mode, err):
    IN, OUT = os.path.join(d, "in.h5"), os.path.join(d, "out.h5")
    args = [IN, "-o", OUT] if mode == "-o" else [IN, "--in-place", "--group", "/r"]
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    p = pc.start(["-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync",
                  "-e", "inject=fsync:delay_exit=3000000", pc.ATTNRUN] + args + ["--heads", "1"],
                 err, prog="strace", env=env)
    kids = []

    def child():         # strace forks test processes first: the one running attnrun
        kids[:] = [k for k in pc.children(p.pid) if pc.argv0(k) == pc.ATTNRUN]
        return bool(kids)
    pc.wait_until(child, p, "strace started attnrun")
    pid = kids[0]
    if pc.NR is None:     # unknown system call numbers: a plain 1 s
        time.sleep(1)
    else:
        pc.wait_until(lambda: pc.syscall(pid) == pc.NR["fsync"] and pc.temps(d), p, "the fsync")
    os.kill(pid, signal.SIGINT)
    print(pc.finish(p, pc.TL + 5))


def address_limit(d, err, kb, fixture, long_input):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (int(kb) * 1024, int(kb) * 1024))
    out = os.path.join(d, "out.h5")
    args = [fixture, "-o", out, "--heads", "4"] if kb == "200000" else [long_input, "-o", out] + pc.LONG
    p = pc.start(args, err, preexec_fn=limit)
    cond = pc.temp_at_least(d, 16384)
    end = time.monotonic() + 2
    while p.poll() is None and not cond() and time.monotonic() < end:
        time.sleep(0.002)
    if p.poll() is not None:
        print(pc.rc_of(p.returncode), "ended before the signal")
        return
    p.send_signal(signal.SIGTERM)
    print(pc.finish(p, 5), "signalled")


def long_name_kill(d, inp, base, err):
    p = pc.start([inp, "-o", os.path.join(d, base)] + pc.LONG, err)

    def grown():
        for n in os.listdir(d):
            try:
                if os.stat(os.path.join(d, n)).st_size >= 16384:
                    return True
            except OSError:
                pass
        return False
    pc.wait_until(grown, p, "a file of 16 KiB in OUT's directory")
    p.send_signal(signal.SIGKILL)
    print(pc.finish(p))


if __name__ == "__main__":
    run({f.__name__: pc.supervised(f) for f in (each, sigpipe, epipe_progress, fsync, address_limit,
                                                long_name_kill)}, __doc__)
