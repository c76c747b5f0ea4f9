#!/usr/bin/env python3
"""tests/lib/pyworker.py DIR PID [MODULE...] - one Python per suite (or one
for a whole run of tests/lib/runner.py, shared by its suites): numpy, h5py
and the MODULEs imported once, then each script the suite (PID) runs
forked from this process.

A command-line suite starts it (suite_setup in tests/lib/checks.sh) and
from then on runs its Python through tests/lib/pyclient (`$PY`, so `ref`
too), which behaves as `python3 SCRIPT ARGS...` would: the script runs as `__main__` with those
arguments, in the caller's directory, with the caller's environment
(PYTHONPATH included) and standard input, in a child of its own forked
from here; its standard output and error come back to the caller (the
output first), and so does its exit status (128 + N when signal N ended
it).  A fork costs milliseconds where starting Python and importing numpy
and h5py costs a quarter to half a second, and every script still starts
from the same clean state: nothing one script does reaches another.

The protocol: the caller makes a directory R under DIR holding `argv`
(its working directory, the script and its arguments, each ended by a
NUL), `env` (`env -0`) and a FIFO `status`, then writes the line
"R PID" (PID: the caller's, whose standard input the script reads) to the
FIFO DIR/requests.  The child writes R/out and R/err; this process writes
the status and the processor seconds used by the child and the processes
it waited for ("STATUS SECONDS") to R/status once the child has ended.
It leaves when the suite, PID, has gone (for the shared worker, PID is
the runner's).
"""

import os
import select
import signal
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # no BLAS threads across fork()
import atexit  # noqa: E402  (imported once, for every script)
import importlib  # noqa: E402
import resource  # noqa: E402
import runpy  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402


def imported(folder):
    """Imports numpy, h5py and the MODULEs; writes "ready" (or "lacks
    NAME") to the FIFO DIR/ready, which the suite reads.  A MODULE written
    ?NAME is imported where it is installed (the runner's shared worker:
    a suite that needs it finds out with has_modules.py)."""
    said = "ready"
    for name in ["numpy", "h5py"] + sys.argv[3:]:
        optional = name.startswith("?")
        try:
            importlib.import_module(name.lstrip("?"))
        except ImportError:
            if optional:
                continue
            said = "lacks " + name
            break
    fd = os.open(os.path.join(folder, "ready"), os.O_WRONLY)
    os.write(fd, said.encode() + b"\n")
    os.close(fd)
    return said == "ready"


BASE_PATH = [p for p in sys.path[1:]
             if p not in os.environ.get("PYTHONPATH", "").split(":")]


def like_caller(caller):
    """Gives this process the caller's limits (ulimit), umask and ignored
    signals, as a process it started would have, and ends it (and what it
    started) should the caller end first (a hang guard's kill)."""
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            res = getattr(resource, name)
            try:
                resource.setrlimit(res, resource.prlimit(caller, res))
            except (OSError, ValueError):
                pass
    try:
        with open("/proc/%d/status" % caller) as f:
            fields = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        os.umask(int(fields["Umask"], 8))
        ignored = int(fields["SigIgn"], 16)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
            if ignored >> (sig - 1) & 1:
                signal.signal(sig, signal.SIG_IGN)
    except (OSError, KeyError, ValueError):
        pass
    os.setpgid(0, 0)

    def watch():
        while True:
            try:
                os.kill(caller, 0)
            except ProcessLookupError:
                os.killpg(0, signal.SIGKILL)
            except OSError:
                pass
            threading.Event().wait(0.25)
    threading.Thread(target=watch, daemon=True).start()


def child(req, caller):
    """Runs the request in R (this process, just forked): never returns."""
    code = 1
    try:
        with open(os.path.join(req, "argv"), "rb") as f:
            parts = [p.decode("utf-8", "surrogateescape") for p in f.read().split(b"\0")[:-1]]
        with open(os.path.join(req, "env"), "rb") as f:
            env = dict(e.decode("utf-8", "surrogateescape").split("=", 1)
                       for e in f.read().split(b"\0") if b"=" in e)
        cwd, argv = parts[0], parts[1:]
        try:
            stdin = os.open("/proc/%s/fd/0" % caller, os.O_RDONLY)
        except OSError:
            stdin = os.open(os.devnull, os.O_RDONLY)
        out = os.open(os.path.join(req, "out"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(os.path.join(req, "err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, to in ((stdin, 0), (out, 1), (err, 2)):
            os.dup2(fd, to)
            os.close(fd)
        os.chdir(cwd)
        like_caller(int(caller))
        os.environ.clear()
        os.environ.update(env)
        script = os.path.abspath(argv[0])
        extra = [p for p in env.get("PYTHONPATH", "").split(":") if p]
        sys.path[:] = [os.path.dirname(script)] + extra + BASE_PATH
        sys.argv = argv
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code & 0xFF
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            atexit._run_exitfuncs()
        except BaseException:
            pass
    except BaseException:
        try:
            traceback.print_exc()
        except BaseException:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def answer(req, status, cpu):
    try:
        fd = os.open(os.path.join(req, "status"), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return                       # the caller has gone
    try:
        os.write(fd, b"%d %.3f\n" % (status, cpu))
    finally:
        os.close(fd)


def main():
    folder, suite = sys.argv[1], int(sys.argv[2])
    if not imported(folder):
        return
    requests = os.open(os.path.join(folder, "requests"), os.O_RDWR | os.O_NONBLOCK)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children = {}
    pending = b""
    while True:
        try:
            ready, _, _ = select.select([requests, wake_r], [], [], 1.0)
        except InterruptedError:
            ready = []
        if wake_r in ready:
            os.read(wake_r, 4096)
        while children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            answer(children.pop(pid), code if code >= 0 else 128 - code,
                   usage.ru_utime + usage.ru_stime)
        if requests in ready:
            try:
                pending += os.read(requests, 65536)
            except BlockingIOError:
                pass
            *lines, pending = pending.split(b"\n")
            for line in lines:
                req, _, caller = line.decode("utf-8", "surrogateescape").rpartition(" ")
                if not req:
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    os.close(requests)
                    os.close(wake_r)
                    os.close(wake_w)
                    child(req, caller)
                children[pid] = req
        try:
            os.kill(suite, 0)
        except ProcessLookupError:
            return


if __name__ == "__main__":
    main()
