"""tests/ref/progress_check.py - the progress lines of attnrun (docs/running.md,
"Progress"), for tests/cli/test_progress.sh.  Every expected number comes
from the input's shape and the options (B, n, the causal mask, the window,
the slice size), never from another run: the work a line counts is
recomputed here from the rule the page states.

    python3 tests/ref/progress_check.py
        self-check: the judge passes a good transcript and fails each of a
        set of bad ones (a late line, a jump of the time left, a falling
        share, a share of rows instead of work, too few lines)
    python3 tests/ref/progress_check.py input FILE.h5 B N D
        X (B, N, D) and W_Q, W_K, W_V, W_O (D, D), seeded
    python3 tests/ref/progress_check.py judge MODE FILE B N SLICE CAUSAL WINDOW [PLAN]
        the progress text in FILE of a run over B items of N queries (and
        N keys) in slices of SLICE items, CAUSAL 1 or 0, WINDOW 0 for none;
        MODE "lines" (a file) or "terminal" (script's typescript), where
        the line PLAN (the run's plan) comes first.  Prints "ok ..." or
        "FAIL ...".
    python3 tests/ref/progress_check.py watch NAME B N SLICE CAUSAL WINDOW RATE SHIM ATTNRUN ARGS...
        runs ATTNRUN ARGS (with --progress) with stderr a pipe, stamps each
        line as it arrives and judges the lines with their times too.
        RATE 1: the real clock; "fit:S": under SHIM (fake_clock.py build)
        with attnrun's CLOCK_MONOTONIC running R times as fast, R chosen
        from a first run with -q so that the run lasts about S of its
        seconds (the arrival times are scaled by R).  Prints "ok ..." or
        "FAIL ...".
    python3 tests/ref/progress_check.py same-results A.h5 B.h5
        A's weights and output equal B's (exit 1 and the name otherwise)

The unit (docs/running.md): the work of one item is, over its n query rows,
the keys each row sees under the causal mask and the window, plus 2 per
row (its q and its output projected), plus m for the item (k and v).

What a watched run must show:
  (a) at least 3 lines, and between two consecutive lines no more than
      max(1 s, the time 1 % of the work took): a gap over 1 s + GAP_SLACK
      (the time a report takes to be made, written and read) is allowed
      only if at most 1 % + WORK_SLACK of the work (the work a thread's
      task of attention adds before the next report) was done in it;
  (b) shares that rise, to 100 at the end, the last line "elapsed";
  (c) after the first 5 %, no time left more than 2 times the one before,
      nor less than half of the one before less the time between them
      (what passed), give or take TIME_SLACK: whole seconds rounded on
      both lines;
  (d) each line's share and rows in the unit above: the share is the
      work the rows name (of every item of the line's slice) over the
      total, B times one item's.
Under the fake clock the slacks in seconds grow by REAL_JITTER seconds of
the real clock, scaled by R (a pipe and a scheduler are no faster for it).
"""
import os
import re
import subprocess
import sys
import threading
import time

LINE = re.compile(r"attnrun: (\d+)% \((\d+)/(\d+) rows of items? (\d+)(?:-(\d+))?/(\d+)\)"
                  r"(?:, (?:(\d+) s|(\d+) min (\d\d) s|(\d+) h (\d\d) min) (left|elapsed))?")

GAP_SLACK = 0.5          # seconds: a report made, written and read
WORK_SLACK = 1.0         # percent: the work of the tasks in flight
TIME_SLACK = 1.5         # seconds: both times left rounded to whole seconds
REAL_JITTER = 0.01       # real seconds of a pipe and a scheduler, scaled by R
TIME_LIMIT = float(os.environ.get("TIME_LIMIT", "120"))


def cumulative_work(n, m, causal, window):
    """cum[r]: the work of rows [0, r) of one item, r = 0 .. n."""
    cum = [0] * (n + 1)
    for q in range(n):
        hi = min(q + 1, m) if causal else m
        lo = max(q - window + 1, 0) if window else 0
        cum[q + 1] = cum[q] + max(hi - lo, 0) + 2 + (m if q == 0 else 0)
    return cum


def make_input(path, B, N, D):
    import numpy as np
    import h5py
    B, N, D = int(B), int(N), int(D)
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        f["X"] = rng.standard_normal((B, N, D)).astype(np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)


def same_results(a_path, b_path):
    import numpy as np
    import h5py
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        for name in ("weights", "output"):
            if not np.array_equal(a[name][...], b[name][...]):
                sys.exit("%s differs" % name)


def parse(shown, failures):
    """The reports of the progress lines `shown` (strings)."""
    reports = []
    for s in shown:
        m = LINE.fullmatch(s)
        if not m:
            failures.append("unexpected line %r" % s)
            continue
        g = m.groups()
        seconds = (None if g[11] is None else int(g[6]) if g[6]
                   else int(g[7]) * 60 + int(g[8]) if g[7] else int(g[9]) * 3600 + int(g[10]) * 60)
        first = int(g[3])
        reports.append(dict(pct=int(g[0]), rows=int(g[1]), n=int(g[2]), first=first,
                            last=int(g[4] or g[3]), B=int(g[5]), seconds=seconds, kind=g[11],
                            line=s))
    return reports


def judge_reports(reports, B, n, c, causal, window, mode, times=None, rate=1.0):
    """The failures (strings) of the reports of a run over B items of n
    queries in slices of c; times: each line's arrival, in the run's
    seconds, for (a) and (c)."""
    failures = []

    def check(cond, why):
        if not cond:
            failures.append(why)

    cum = cumulative_work(n, n, causal, window)
    item = cum[n]
    total = B * item
    jitter = REAL_JITTER * rate
    span = []                            # (lo, hi): the work each line can stand for
    for i, r in enumerate(reports):
        check(r["n"] == n and r["B"] == B, "(d) n or B wrong in %r" % r["line"])
        s = (r["first"] - 1) // c        # the items of the slice: [s c + 1, min(s c + c, B)]
        check(r["first"] == s * c + 1 and r["last"] == min(s * c + c, B),
              "(d) items %d-%d are no slice of %d: %r" % (r["first"], r["last"], c, r["line"]))
        count = r["last"] - r["first"] + 1
        rows = min(r["rows"], n)
        # (d) the rows whose work is done: within = work per item of the slice
        lo = (r["first"] - 1) * item + count * cum[rows]
        hi = (r["first"] - 1) * item + count * (cum[rows + 1] - 1 if rows < n else item) + count - 1
        hi = min(hi, total)
        span.append((lo, hi))
        top = hi * 100 // total if hi == total else min(hi * 100 // total, 99)
        check(lo * 100 // total <= r["pct"] <= top,
              "(d) %d%% for rows %d of items %d-%d: the work %d..%d of %d is %d..%d%%: %r"
              % (r["pct"], r["rows"], r["first"], r["last"], lo, hi, total, lo * 100 // total,
                 top, r["line"]))
        at_end = i == len(reports) - 1
        if at_end:
            check(r["kind"] == "elapsed", "(b) the last line gives no time elapsed: %r" % r["line"])
        else:
            check(r["kind"] == "left" or (i == 0 and r["kind"] is None),
                  "(c) no time left: %r" % r["line"])
        if r["seconds"] is not None:
            check(r["seconds"] < 3600 * rate, "(c) a time of %d s for a run of seconds: %r"
                  % (r["seconds"], r["line"]))
        # (b) rising: a line per further percent into a file; on a terminal, never back
        if i > 0:
            prev = reports[i - 1]
            if mode == "lines":
                check(r["pct"] > prev["pct"], "(b) not rising: %r after %r" % (r["line"], prev["line"]))
            check(hi >= span[i - 1][0] and r["pct"] >= prev["pct"],
                  "(b) falling: %r after %r" % (r["line"], prev["line"]))
    check(len(reports) >= 2, "(b) fewer than 2 reports: %r" % [r["line"] for r in reports])
    check(reports and reports[-1]["pct"] == 100 and reports[-1]["last"] == B
          and reports[-1]["rows"] == n,
          "(b) does not end at 100 %% of every row: %r" % (reports[-1]["line"] if reports else None))

    if times is not None:
        # (a) a line at least every second or every 1 %, whichever is rarer
        check(len(reports) >= 3, "(a) fewer than 3 lines: %r" % [r["line"] for r in reports])
        late = []
        for i in range(1, len(reports)):
            gap = times[i] - times[i - 1]
            work = 100.0 * (span[i][1] - span[i - 1][0]) / total
            if gap > 1 + GAP_SLACK + jitter and work > 1 + WORK_SLACK:
                late.append("%.2f s and %.2f %% of the work before %r" % (gap, work,
                                                                         reports[i]["line"]))
        check(not late, "(a) %d late lines: %s" % (len(late), "; ".join(late[:2])))
        # (c) the time left moves smoothly after the first 5 %
        jumps = []
        for i in range(1, len(reports)):
            a, b = reports[i - 1], reports[i]
            if a["pct"] < 5 or a["kind"] != "left" or b["kind"] != "left":
                continue
            gap = times[i] - times[i - 1]
            slack = TIME_SLACK + jitter
            if b["seconds"] > 2 * a["seconds"] + slack or a["seconds"] - gap > 2 * b["seconds"] + slack:
                jumps.append("%r then, %.2f s later, %r" % (a["line"], gap, b["line"]))
        check(not jumps, "(c) %d jumps of the time left: %s" % (len(jumps), "; ".join(jumps[:2])))
    return failures


def verdict(name, failures, reports):
    """One line: ok, or FAIL with the first failure of each rule."""
    if failures:
        first = {}
        for f in failures:
            first.setdefault(f[:3] if f.startswith("(") else "", f)
        print("FAIL %s: %s" % (name, "; ".join(first[k][:400] for k in sorted(first))))
    else:
        mid = [r["pct"] for r in reports if r["pct"] < 100]
        print("ok %s: %d lines, before 100 %%: %s" % (name, len(reports),
                                                      mid if len(mid) < 12 else mid[:5] + ["..."] + mid[-3:]))


def judge(mode, path, B, n, c, causal, window, plan=None):
    B, n, c, causal, window = int(B), int(n), int(c), causal == "1", int(window)
    text = open(path, "rb").read().decode("utf-8")
    name = "%s B=%d n=%d slice=%d" % (mode, B, n, c)
    failures = []

    def check(cond, why):
        if not cond:
            failures.append(why)

    if mode == "terminal":
        # the plan first, on a line of its own
        first, _, rest = text.partition("\r\n")
        check(first == plan, "the first line is %r, not the plan %r" % (first, plan))
        text = rest
        # the pty turns "\n" into "\r\n": one newline, at the very end
        check(text.endswith("\r\n") and text.count("\n") == 1,
              "not one line ended by one newline: %r" % text[-200:])
        check(text.startswith("\r"), "does not start with \\r: %r" % text[:80])
        shown = [s.rstrip(" ") for s in text.rstrip("\r\n").split("\r") if s != ""]
    else:
        check(text.endswith("\n") and "\r" not in text, "not whole lines: %r" % text[:200])
        shown = text.splitlines()
    reports = parse(shown, failures)
    failures += judge_reports(reports, B, n, c, causal, window, mode)
    verdict(name, failures, reports)


def stamped_run(argv, env):
    """Runs argv; (status, [(seconds, line)]) with each stderr line's
    arrival time (time.monotonic), stdout discarded."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    timer = threading.Timer(TIME_LIMIT, p.kill)
    timer.start()
    lines = []
    try:
        for raw in p.stderr:
            lines.append((time.monotonic(), raw.decode("utf-8", "replace").rstrip("\n")))
        status = p.wait()
    finally:
        timer.cancel()
    return status, lines


def watch(name, B, n, c, causal, window, rate, shim, attnrun, *args):
    B, n, c, causal, window = int(B), int(n), int(c), causal == "1", int(window)
    argv = [attnrun] + list(args)
    env = dict(os.environ)
    r = 1.0
    if rate.startswith("fit:"):
        # how long the run takes, without progress; then a clock that makes it last S seconds
        start = time.monotonic()
        status, lines = stamped_run(argv + ["-q"], env)
        took = time.monotonic() - start
        if status != 0:
            print("FAIL %s: the run with -q ended with status %d: %r" % (name, status, lines[:2]))
            return
        r = max(1.0, float(rate[4:]) / max(took, 1e-3))
        env.update(LD_PRELOAD=shim, FAKE_CLOCK_RATE="%.6g" % r,
                   ASAN_OPTIONS=(env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":"))
    elif float(rate) != 1:
        sys.exit("RATE is 1 or fit:SECONDS, not %r" % rate)
    status, lines = stamped_run(argv, env)
    if status != 0:
        print("FAIL %s: exit %d: %r" % (name, status, [s for _, s in lines[:2]]))
        return
    failures = []
    reports = parse([s for _, s in lines], failures)
    times = [(t - lines[0][0]) * r for t, _ in lines]
    failures += judge_reports(reports, B, n, c, causal, window, "lines", times, r)
    verdict("%s (clock x%.3g)" % (name, r), failures, reports)


def transcript(n, dones, times, lefts, rows_unit=False):
    """Progress lines of one causal item of n queries: done work, times, times left."""
    cum = cumulative_work(n, n, True, 0)
    total = cum[n]
    shown = []
    for done, left in zip(dones, lefts):
        rows = max(r for r in range(n + 1) if cum[r] <= done)
        pct = min(done * 100 // total, 99) if done < total else 100
        if rows_unit:
            pct = rows * 100 // n
        tail = "%d s elapsed" % left if done == total else "%d s left" % left
        shown.append("attnrun: %d%% (%d/%d rows of item 1/1), %s" % (pct, rows, n, tail))
    failures = []
    reports = parse(shown, failures)
    return failures + judge_reports(reports, 1, n, 1, True, 0, "lines", times)


def self_check():
    """The judge passes a run with a line a second and fails each fault."""
    n = 400
    total = cumulative_work(n, n, True, 0)[n]
    steps = [total * k // 20 for k in range(1, 21)]         # 5 % a second
    times = [float(k) for k in range(1, 21)]
    lefts = [20 - k for k in range(1, 20)] + [20]
    good = transcript(n, steps, times, lefts)
    assert not good, good
    bad = {      # each fault, and the rule that must catch it
        "a late line": ("(a)", transcript(n, steps[:9] + steps[10:], times[:9] + times[10:],
                                          lefts[:9] + lefts[10:])),
        "too few lines": ("(a)", transcript(n, steps[-2:], times[-2:], lefts[-2:])),
        "a falling share": ("(b)", transcript(n, steps[:5] + [steps[3]] + steps[6:], times, lefts)),
        "a jump of the time left": ("(c)", transcript(n, steps, times,
                                                      lefts[:10] + [40] + lefts[11:])),
        "a drop of the time left": ("(c)", transcript(n, steps, times,
                                                      lefts[:10] + [1] + lefts[11:])),
        "a share of rows": ("(d)", transcript(n, steps, times, lefts, rows_unit=True)),
    }
    for what, (rule, failures) in bad.items():
        assert any(f.startswith(rule) for f in failures), \
            "the judge let %s pass rule %s: %r" % (what, rule, failures)
    print("the judge fails %s and passes a good run" % ", ".join(sorted(bad)))


COMMANDS = {"input": (make_input, (4,)), "judge": (judge, (7, 8)),
            "same-results": (same_results, (2,))}

if __name__ == "__main__":
    if len(sys.argv) == 1:
        self_check()
    elif sys.argv[1] == "watch" and len(sys.argv) >= 12:
        watch(*sys.argv[2:])
    elif sys.argv[1] not in COMMANDS or len(sys.argv) - 2 not in COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    else:
        COMMANDS[sys.argv[1]][0](*sys.argv[2:])
