"""tests/ref/progress_check.py - the progress line of attnrun (docs/running.md,
"Progress"), for tests/cli/test_progress.sh.  Every expected position comes
from the input's shape and the options, never from another run.

    python3 tests/ref/progress_check.py input FILE.h5
        one item (B = 1) of n = 4096 queries, d_model 32
    python3 tests/ref/progress_check.py judge MODE FILE B N SLICE [PLAN]
        the progress text in FILE of a run over B items of N queries in
        slices of SLICE items; MODE "lines" (a file) or "terminal"
        (script's typescript), where the line PLAN (the run's plan) comes
        first.  Prints "ok ..." or "FAIL ...".
    python3 tests/ref/progress_check.py same-results A.h5 B.h5
        A's weights and output equal B's (exit 1 and the name otherwise)
"""
import re
import sys

LINE = re.compile(r"attnrun: (\d+)% \((\d+)/(\d+) rows of items? (\d+)(?:-(\d+))?/(\d+)\), "
                  r"(?:(\d+) s|(\d+) min (\d\d) s|(\d+) h (\d\d) min) (left|elapsed)")


def make_input(path):
    import numpy as np
    import h5py
    rng = np.random.default_rng(7)
    D = 32
    with h5py.File(path, "w") as f:
        f["X"] = rng.standard_normal((1, 4096, D)).astype(np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)


def same_results(a_path, b_path):
    import numpy as np
    import h5py
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        for name in ("weights", "output"):
            if not np.array_equal(a[name][...], b[name][...]):
                sys.exit("%s differs" % name)


def judge(mode, path, B, n, c, plan=None):
    B, n, c = int(B), int(n), int(c)
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

    reports = []
    for s in shown:
        m = LINE.fullmatch(s)
        if not m:
            check(False, "unexpected line %r" % s)
            continue
        g = m.groups()
        seconds = (int(g[6]) if g[6] else int(g[7]) * 60 + int(g[8]) if g[7]
                   else int(g[9]) * 3600 + int(g[10]) * 60)
        check(seconds < 3600, "a time of %d s for a run of seconds: %r" % (seconds, s))
        first, last = int(g[3]), int(g[4] or g[3])
        reports.append(dict(pct=int(g[0]), rows=int(g[1]), n=int(g[2]), first=first, last=last,
                            B=int(g[5]), kind=g[11], line=s))

    check(len(reports) >= 2, "fewer than 2 reports: %r" % shown)
    total = B * n
    done_before = 0
    for i, r in enumerate(reports):
        check(r["n"] == n and r["B"] == B, "n or B wrong in %r" % r["line"])
        # the items of the slice: [s c + 1, min(s c + c, B)]
        s = (r["first"] - 1) // c
        check(r["first"] == s * c + 1 and r["last"] == min(s * c + c, B),
              "items %d-%d are no slice of %d: %r" % (r["first"], r["last"], c, r["line"]))
        count = r["last"] - r["first"] + 1
        done = (r["first"] - 1) * n + count * r["rows"]
        check(r["pct"] == done * 100 // total, "%d%% for %d of %d rows: %r" % (r["pct"], done, total, r["line"]))
        check(done > done_before, "not rising: %r" % r["line"])
        done_before = done
        at_end = i == len(reports) - 1
        check(r["kind"] == ("elapsed" if at_end else "left"), "wrong time field: %r" % r["line"])
        if mode == "lines" and 0 < i < len(reports) - 1:
            prev = reports[i - 1]["pct"]
            check(r["pct"] // 5 > prev // 5, "a line within the same 5 %%: %r" % r["line"])
    check(reports and reports[-1]["pct"] == 100 and reports[-1]["last"] == B and reports[-1]["rows"] == n,
          "does not end at 100 %% of every row: %r" % (reports[-1]["line"] if reports else None))
    mid = sorted({r["pct"] for r in reports if r["pct"] < 100})
    if mode == "lines" and B == 1:
        # several blocks of one item, each report on a block boundary
        check(len(mid) >= 3, "fewer than 3 percentages before 100: %r" % mid)
        block = reports[0]["rows"]
        check(block < n, "the first report is the whole item (%d rows)" % block)
        check(all(r["rows"] % block == 0 for r in reports[:-1]),
              "reports off the blocks of %d rows: %r" % (block, [r["rows"] for r in reports]))
    if mode == "terminal":
        check(len(mid) >= 1, "no report before 100 %%: %r" % shown)

    if failures:
        print("FAIL %s: %s" % (name, "; ".join(failures[:3])))
    else:
        print("ok %s: %d reports, before 100 %%: %s" % (name, len(reports), mid))


COMMANDS = {"input": (make_input, (1,)), "judge": (judge, (5, 6)),
            "same-results": (same_results, (2,))}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 not in COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]][0](*sys.argv[2:])
