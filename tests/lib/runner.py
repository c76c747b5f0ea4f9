#!/usr/bin/env python3
"""tests/lib/runner.py - runs test suites side by side and reports each in
one line as it finishes.

    python3 tests/lib/runner.py [--jobs N] [--tier full|quick] [--only NAME,...]
                                [--logs DIR] SUITE...

A SUITE is a cmocka binary, a bash script (`*.sh`) or a Python script
(`*.py`, run by $PYTHON).  Every suite works in its own scratch directory,
so up to N of them run at once (default: the cores this process may use).
A suite whose header holds the line `# tags: ... serial ...` (it times
something or measures memory; a reason may follow `--`) runs alone, after the others, so that a
parallel run never makes it flaky; in the quick tier, one tagged
`quick-untimed` too (its quick cases time nothing) runs beside the others.

With `--tier quick`, each suite is run with ATTN_TEST_TIER=quick: a
command-line suite then stops at its `quick_done` (tests/lib/checks.sh),
after its fastest cases; one tagged `quick` runs whole in either tier.
`--only` runs the suites named (a file's name without its folder and
extension; `cmocka.NAME` or NAME for a cmocka binary).

The suites share one Python worker (tests/lib/pyworker.py: numpy and h5py
imported once for the whole run; ATTN_TEST_NO_WORKER set: none).

Each suite's standard output and error go to DIR/NAME.log (default
build/test-logs).  When a suite ends, one line gives its verdict, its time
and its counts; a failing suite's whole log follows.  What a suite prints
as part of a check that passed (a planted failure its judge must find, a
process killed on purpose) stays in the log.  The run ends with the five
slowest suites and `suites: N passed, M failed`; the exit status is 1 when
any suite failed.  The time each suite took is kept in DIR/times, and the
next run starts the slowest first.
"""

import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SUMMARY = re.compile(r"^(\S.*): (\d+) passed, (\d+) failed$")
CMOCKA_RUN = re.compile(r"^\[==========\] (\d+) test\(s\) run\.")
CMOCKA_FAILED = re.compile(r"^\[  FAILED  \] (\d+) test\(s\)")
TAGS = re.compile(r"^#\s*tags:\s*(.*)$")


def name_of(path):
    """test_bad for tests/cli/test_bad.sh, layers for tests/lib/layers.py,
    cmocka.test_store for the cmocka binary build/tests/test_store."""
    base = os.path.basename(path)
    return os.path.splitext(base)[0] if base.endswith((".sh", ".py")) else "cmocka." + base


def tags_of(path):
    """The words of the suite's `# tags:` line, in its header (the comment
    lines it starts with), up to a `--` that starts the reason."""
    if not path.endswith((".sh", ".py")):
        return set()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f):
                line = line.strip()
                if n > 0 and not line.startswith("#"):
                    break
                m = TAGS.match(line)
                if m:
                    return set(m.group(1).split("--")[0].split())
    except OSError:
        pass
    return set()


def command_of(path):
    if path.endswith(".sh"):
        return ["bash", path]
    if path.endswith(".py"):
        return [os.environ.get("PYTHON", "python3"), path]
    return [path]


def counts_of(log):
    """(passed, failed) checks from a suite's log: the suite's own summary
    line, cmocka's totals, or its `ok`/`FAIL` lines."""
    passed = failed = 0
    summary = None
    cmocka_run = cmocka_failed = None
    for line in log.splitlines():
        m = SUMMARY.match(line)
        if m:
            summary = (int(m.group(2)), int(m.group(3)))
        m = CMOCKA_RUN.match(line)
        if m:
            cmocka_run = int(m.group(1))
        m = CMOCKA_FAILED.match(line)
        if m:
            cmocka_failed = int(m.group(1))
        if line.startswith("ok "):
            passed += 1
        elif line.startswith("FAIL "):
            failed += 1
    if summary:
        return summary
    if cmocka_run is not None:
        return cmocka_run - (cmocka_failed or 0), cmocka_failed or 0
    return passed, failed


class Suite:
    def __init__(self, path, logs):
        self.path = path
        self.name = name_of(path)
        self.tags = tags_of(path)
        self.log = os.path.join(logs, self.name + ".log")
        self.proc = None
        self.start = self.seconds = self.cpu = 0.0
        self.status = None
        self.counts = (0, 0)
        self.alone = False          # runs with no other suite (main: the tags and the tier)

    def launch(self, env):
        if "quick" in self.tags:
            env = dict(env, ATTN_TEST_TIER="full")      # whole, in either tier
        # The processor time of the Python scripts its worker forks
        # (tests/lib/pyclient adds each one's seconds here).
        self.pycpu = self.log[:-len(".log")] + ".pycpu"
        if os.path.exists(self.pycpu):
            os.remove(self.pycpu)
        env = dict(env, ATTN_TEST_PYCPU=self.pycpu)
        self.start = time.monotonic()
        out = open(self.log, "wb")
        self.proc = subprocess.Popen(command_of(self.path), stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        out.close()

    def collect(self):
        self.seconds = time.monotonic() - self.start
        self.status = self.proc.returncode
        with open(self.log, encoding="utf-8", errors="replace") as f:
            self.counts = counts_of(f.read())
        try:
            with open(self.pycpu) as f:
                self.cpu += sum(float(line) for line in f if line.strip())
            os.remove(self.pycpu)
        except (OSError, ValueError):
            pass
        # A suite that ended well but counted a failure still failed.
        if self.status == 0 and self.counts[1]:
            self.status = 1

    def kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass


# What the shared worker imports before any suite asks: numpy and h5py,
# and what any suite's suite_setup names, where installed.
SHARED_MODULES = ["?xarray", "?h5netcdf", "?netCDF4"]


def start_shared_worker(env):
    """One Python worker (tests/lib/pyworker.py) for every suite of this
    run: its folder and pid, put in env as ATTN_SHARED_PYWORKER and
    ATTN_SHARED_PYWORKER_PID for suite_setup (tests/lib/checks.sh), so
    that numpy and h5py are imported once rather than once a suite.  None
    when it cannot start (each suite then starts its own)."""
    if env.get("ATTN_TEST_NO_WORKER"):
        return None
    folder = tempfile.mkdtemp(prefix="attnrun-pyworker.")
    try:
        os.mkfifo(os.path.join(folder, "requests"))
        os.mkfifo(os.path.join(folder, "ready"))
        ready = os.open(os.path.join(folder, "ready"), os.O_RDWR | os.O_NONBLOCK)
        worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyworker.py")
        with open(os.path.join(folder, "log"), "wb") as log:
            proc = subprocess.Popen([env.get("PYTHON", "python3"), worker, folder, str(os.getpid())]
                                    + SHARED_MODULES, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
        said = b""
        if select.select([ready], [], [], 120)[0]:
            said = os.read(ready, 64)
        os.close(ready)
        if said.strip() != b"ready":
            proc.kill()
            proc.wait()
            raise OSError("the shared Python worker did not start")
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    env["ATTN_SHARED_PYWORKER"] = folder
    env["ATTN_SHARED_PYWORKER_PID"] = str(proc.pid)
    return proc, folder


def stop_shared_worker(shared):
    if shared is None:
        return
    proc, folder = shared
    proc.kill()
    proc.wait()
    shutil.rmtree(folder, ignore_errors=True)


def read_times(path):
    times = {}
    try:
        with open(path) as f:
            for line in f:
                name, _, secs = line.rpartition(" ")
                try:
                    times[name] = float(secs)
                except ValueError:
                    pass
    except OSError:
        pass
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--tier", choices=("full", "quick"), default="full")
    ap.add_argument("--only", default="")
    ap.add_argument("--logs", default="build/test-logs")
    ap.add_argument("suites", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.logs, exist_ok=True)

    suites = [Suite(p, args.logs) for p in args.suites]
    if args.only:
        # test_store names the command-line suite and the cmocka test both
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        picked = [s for s in suites if s.name in wanted or s.name.split(".")[-1] in wanted]
        unknown = wanted - {n for s in picked for n in (s.name, s.name.split(".")[-1])}
        if unknown:
            print("runner: no suite named %s; the suites are: %s"
                  % (", ".join(sorted(unknown)), " ".join(s.name for s in suites)), file=sys.stderr)
            return 2
        suites = picked

    times_file = os.path.join(args.logs, "times" if args.tier == "full" else "times-quick")
    known = read_times(times_file)
    # The longest first (as last measured; the order given otherwise), so
    # that the last suites to start are short ones.
    order = {s.name: i for i, s in enumerate(suites)}
    for s in suites:
        s.alone = "serial" in s.tags and not (args.tier == "quick" and "quick-untimed" in s.tags)
    parallel = sorted((s for s in suites if not s.alone),
                      key=lambda s: (-known.get(s.name, 0.0), order[s.name]))
    serial = [s for s in suites if s.alone]
    jobs = max(1, args.jobs)

    env = dict(os.environ)
    if args.tier == "quick":
        env["ATTN_TEST_TIER"] = "quick"
    print("running %d suites, %d at a time%s%s; logs in %s/"
          % (len(suites), jobs, " (%d of them alone, after the others)" % len(serial) if serial else "",
             ", the quick tier" if args.tier == "quick" else "", args.logs), flush=True)

    began = time.monotonic()
    shared = start_shared_worker(env)
    done, running = [], []
    pending = parallel + serial

    def finish(suite):
        suite.collect()
        done.append(suite)
        passed, failed = suite.counts
        verdict = "ok  " if suite.status == 0 else "FAIL"
        extra = "" if suite.status == 0 else ", exit %s" % suite.status
        print("%s %-22s %6.1f s  %6.1f s cpu  %d passed, %d failed%s"
              % (verdict, suite.name, suite.seconds, suite.cpu, passed, failed, extra), flush=True)
        if suite.status != 0:
            print("---- %s ----" % suite.log, flush=True)
            with open(suite.log, encoding="utf-8", errors="replace") as f:
                sys.stdout.write(f.read())
            print("---- end of %s ----" % suite.name, flush=True)

    def stop(signum, _frame):
        for s in running:
            s.kill()
        stop_shared_worker(shared)
        sys.exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)

    while pending or running:
        while pending and len(running) < jobs:
            nxt = pending[0]
            if nxt.alone and running:
                break
            pending.pop(0)
            nxt.launch(env)
            running.append(nxt)
            if nxt.alone:
                break
        # wait4: the suite's processor time, its own and that of every
        # process it waited for; collect adds the scripts the Python worker
        # forked for it (the worker itself, orphaned on purpose, is not
        # counted)
        pid, status, usage = os.wait4(-1, 0)
        if shared is not None and pid == shared[0].pid:
            shared[0].returncode = os.waitstatus_to_exitcode(status)
        for s in running:
            if s.proc.pid == pid:
                s.cpu = usage.ru_utime + usage.ru_stime
                # A status as the shell gives it: 128 + N for signal N.
                code = os.waitstatus_to_exitcode(status)
                s.proc.returncode = code if code >= 0 else 128 - code
                running.remove(s)
                finish(s)
                break

    wall = time.monotonic() - began
    stop_shared_worker(shared)
    known.update({s.name: s.seconds for s in done})
    with open(times_file, "w") as f:
        for name, secs in sorted(known.items()):
            f.write("%s %.1f\n" % (name, secs))

    failed = [s for s in done if s.status != 0]
    slowest = sorted(done, key=lambda s: -s.seconds)[:5]
    checks = sum(s.counts[0] + s.counts[1] for s in done)
    print("slowest: " + ", ".join("%s %.0f s" % (s.name, s.seconds) for s in slowest))
    if failed:
        print("failed: " + " ".join(s.name for s in failed))
    print("checks: %d passed, %d failed, in %.0f s (%.0f s of processor time)"
          % (sum(s.counts[0] for s in done), sum(s.counts[1] for s in done), wall,
             sum(s.cpu for s in done)))
    if args.tier == "quick":
        print("this was the quick tier (each suite's fastest cases): `make test` runs every check")
    print("suites: %d passed, %d failed" % (len(done) - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
