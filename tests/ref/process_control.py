#!/usr/bin/env python3
"""tests/ref/process_control.py - runs attnrun and orders events in the middle
of a run by polling (a temporary of some size, a stopped process, a blocked
system call seen in /proc), never by sleeping.  The drivers of
tests/cli/test_runtime.sh and test_append.sh (midrun_signals.py,
lock_contention.py, input_changed_midrun.py) are built on it.

The environment gives ATTNRUN (the binary) and TIME_LIMIT (seconds one wait
may take, default 10).  A driver is a function run under supervised(): when
the run ends before the event a driver waits for, Early is raised and the
driver prints "early: WHY"; whatever it started and left running (stopped
or waiting) is killed.
"""
import functools
import hashlib
import os
import signal
import subprocess
import time

TL = float(os.environ.get("TIME_LIMIT") or 10)
ATTNRUN = os.environ.get("ATTNRUN", "")
# The long run, on the suite's long.h5 (16384 items of n=4, d_model=8, seed
# 1): one item per slice on one thread (about 0.8 s on 2 cores), so there
# is time to act mid-run; its reference is cheap.
LONG = ["--heads", "2", "--save", "output", "--batch-slice", "1", "--threads", "1"]


class Early(Exception):
    pass


STARTED = []


def rc_of(code):
    return 128 - code if code < 0 else code


def start(args, err=None, prog=None, **kw):
    """attnrun (or prog) with args; stdin, stdout /dev/null; stderr to the
    file named err (or the descriptor/object given, or /dev/null)."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    kw.setdefault("stdout", subprocess.DEVNULL)
    argv = ([prog] if prog else [ATTNRUN]) + [str(a) for a in args]
    if isinstance(err, str):
        with open(err, "wb") as f:
            p = subprocess.Popen(argv, stderr=f, **kw)
    else:
        p = subprocess.Popen(argv, stderr=subprocess.DEVNULL if err is None else err, **kw)
    STARTED.append(p)
    return p


def wait_until(cond, p=None, what="", timeout=None):
    end = time.monotonic() + (TL if timeout is None else timeout)
    while True:
        if cond():
            return
        if p is not None and p.poll() is not None:
            raise Early("attnrun ended (exit %d) before %s" % (rc_of(p.returncode), what))
        if time.monotonic() > end:
            raise Early("no %s within %g s" % (what, TL if timeout is None else timeout))
        time.sleep(0.002)


def temps(d):
    return [n for n in os.listdir(d) if ".attnrun-tmp-" in n]


def temp_at_least(d, size):
    def cond():
        for n in temps(d):
            try:
                if os.stat(os.path.join(d, n)).st_size >= size:
                    return True
            except OSError:
                pass
        return False
    return cond


def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    return s[s.rindex(")") + 2]


def stop(p):
    os.kill(p.pid, signal.SIGSTOP)
    wait_until(lambda: state(p.pid) in ("T", "t", "Z", None), None, "stop")


def cont(p):
    os.kill(p.pid, signal.SIGCONT)


def finish(p, seconds=None):
    """The exit status as a shell gives it; 137 when it outlives seconds."""
    try:
        return rc_of(p.wait(TL if seconds is None else seconds))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return 137


NR = {"x86_64": {"fsync": 74, "flock": 73, "nanosleep": 35, "clock_nanosleep": 230},
      "aarch64": {"fsync": 82, "flock": 32, "nanosleep": 101, "clock_nanosleep": 115},
      }.get(os.uname().machine)


def syscall(pid):
    """The system call pid's main thread is in (a number), or None."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def has_open(pid, path):
    real = os.path.realpath(path)
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == real:
                return True
        except OSError:
            pass
    return False


def wait_blocked(p, path, seconds=3.0):
    """Until p holds path open and sleeps in flock (or a sleep between
    tries); True when seen, False when not within seconds (p still running)."""
    wait_until(lambda: has_open(p.pid, path), p, "opening IN")
    if NR is None:
        return False
    want = {NR["flock"], NR["nanosleep"], NR["clock_nanosleep"]}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if p.poll() is not None:
            raise Early("attnrun ended (exit %d) instead of waiting" % rc_of(p.returncode))
        if syscall(p.pid) in want:
            return True
        time.sleep(0.002)
    return False


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    s = f.read()
            except OSError:
                continue
            if int(s[s.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(d))
    return out


def argv0(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def supervised(fn):
    """fn as a driver: Early (the run ended before its event) prints
    'early: why'; whatever fn started and left running is killed."""
    @functools.wraps(fn)
    def driver(*args):
        try:
            fn(*args)
        except Early as e:
            print("early: %s" % e)
        finally:
            for p in STARTED:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return driver
