#!/usr/bin/env bash
# tests/cli/test_progress.sh - the progress line (README, "Progress"):
#   * it advances per block of query rows, not only per batch item: one
#     item of n = 4096 whose maps are computed in blocks of rows shows
#     several distinct percentages before 100 %, each on a block boundary,
#     rising, each with a time left that parses, the last with the time
#     elapsed;
#   * into a file (--progress): whole lines, the first report, then one
#     line per further 5 %, then the end; stdout untouched; the results
#     the same as without progress;
#   * slices of several items name the items ("rows of items 1-2/3");
#   * on a terminal (script(1) gives attnrun a pseudo-terminal): one line
#     rewritten with \r and ended by one newline, shown by default, and
#     none with -q.
# Every expected position comes from the input's shape and the options
# (B, n, the slice size), not from another run of attnrun.  No check
# depends on how fast the machine is: the terminal check asks only for
# the first and the last report, which are always shown.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_progress.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT  hang guard of one run in seconds (default 60)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "progress: N passed, M failed"; the exit status is 1 when M > 0.
set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
PY=${PYTHON:-/usr/bin/python3}
TIME_LIMIT=${TIME_LIMIT:-60}
FIX=$PWD/fixtures

SUITE="progress"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"

suite_setup progress numpy h5py
if ! command -v script >/dev/null 2>&1; then
    bad "setup: script(1) not found (Debian: bsdutils)"
    finish
fi

# One item (B = 1) of n = 4096 queries: with the maps saved, one item's
# maps do not fit in a 16 MiB step, so its rows come in blocks.
"$PY" - "$T/long.h5" <<'EOF'
import sys
import numpy as np
import h5py
rng = np.random.default_rng(7)
D = 32
with h5py.File(sys.argv[1], "w") as f:
    f["X"] = rng.standard_normal((1, 4096, D)).astype(np.float32)
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
EOF
# (a causal window keeps the stored maps small; the rows are all computed)
LONG=(--heads 2 --save weights,output --store f16 --causal --window 256 --memory 16M)

# check.py MODE FILE B N SLICE: judges the progress text in FILE of a run
# over B items of N queries in slices of SLICE items; MODE "lines" (a
# file) or "terminal" (script's typescript).  Prints "ok ..." / "FAIL ...".
cat >"$T/check.py" <<'EOF'
import re, sys

mode, path, B, n, c = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
text = open(path, "rb").read().decode("utf-8")
name = "%s B=%d n=%d slice=%d" % (mode, B, n, c)
LINE = re.compile(r"attnrun: (\d+)% \((\d+)/(\d+) rows of items? (\d+)(?:-(\d+))?/(\d+)\), "
                  r"(?:(\d+) s|(\d+) min (\d\d) s|(\d+) h (\d\d) min) (left|elapsed)")
failures = []

def check(cond, why):
    if not cond:
        failures.append(why)

if mode == "terminal":
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
EOF

# judge NAME MODE FILE B N SLICE
judge() {
    local name=$1
    shift
    "$PY" "$T/check.py" "$@" >"$T/verdict.log" 2>&1
    local status=$?
    sed "s/^\(ok\|FAIL\) /\1 $name: /" "$T/verdict.log" >"$T/$name.log"
    report_verdicts "$T/$name.log" "$status"
}

# ------------------------------------------------- into a file: whole lines

timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$T/long.h5" -o "$T/p.h5" "${LONG[@]}" --progress \
    >"$T/stdout" 2>"$T/stderr"
rc=$?
problem=$(run_problem "$rc" 0 "$T/stderr")
if [ -n "$problem" ]; then
    bad "file: $problem"
else
    judge file lines "$T/stderr" 1 4096 1
    if [ -s "$T/stdout" ]; then
        bad "file: stdout not empty: $(head -c 200 "$T/stdout")"
    else
        ok "file: stdout untouched"
    fi
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$T/long.h5" -o "$T/q.h5" "${LONG[@]}" -q \
        >"$T/stdout" 2>"$T/stderr"
    rc=$?
    if [ "$rc" -ne 0 ] || [ -s "$T/stderr" ] || [ -s "$T/stdout" ]; then
        bad "file: -q: exit $rc, stderr $(head -c 200 "$T/stderr")"
    elif ! "$PY" - "$T/p.h5" "$T/q.h5" <<'EOF'
import sys
import numpy as np
import h5py
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    for name in ("weights", "output"):
        if not np.array_equal(a[name][...], b[name][...]):
            sys.exit("%s differs" % name)
EOF
    then
        bad "file: the results with progress differ from those without"
    else
        ok "file: the same results with and without progress; -q silent"
    fi
fi

# ------------------------------------- slices of several items: items named

timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$FIX/batch_bias.h5" -o "$T/b.h5" --heads 4 \
    --batch-slice 2 --progress >"$T/stdout" 2>"$T/stderr"
rc=$?
problem=$(run_problem "$rc" 0 "$T/stderr")
if [ -n "$problem" ]; then
    bad "items: $problem"
else
    # batch_bias.h5: X is (3, 6, 8); slices of 2 items: items 1-2, then 3
    judge items lines "$T/stderr" 3 6 2
    if grep -q 'rows of items 1-2/3' "$T/stderr" && grep -q 'rows of item 3/3' "$T/stderr"; then
        ok "items: slices 1-2/3 and 3/3 named"
    else
        bad "items: slices not named: $(tr '\n' '|' <"$T/stderr" | head -c 300)"
    fi
fi

# ------------------------------------------- on a terminal: one line, \r

# terminal NAME OPTIONS...: runs attnrun under script(1), its typescript
# (stdout and stderr both on the pseudo-terminal) in $T/NAME.tty.
terminal() {
    local name=$1
    shift
    local words
    printf -v words ' %q' "$ATTNRUN" "$T/long.h5" -o "$T/$name.h5" "${LONG[@]}" "$@"
    timeout -s KILL "$TIME_LIMIT" script -qec "$words" /dev/null </dev/null >"$T/$name.tty" 2>&1
}

terminal tty
rc=$?
if [ "$rc" -ne 0 ]; then
    bad "terminal: exit $rc: $(head -c 200 "$T/tty.tty")"
else
    judge terminal terminal "$T/tty.tty" 1 4096 1
fi

terminal quiet -q
rc=$?
if [ "$rc" -ne 0 ] || [ -s "$T/quiet.tty" ]; then
    bad "terminal -q: exit $rc, wrote $(head -c 200 "$T/quiet.tty" | od -c | head -n 2)"
else
    ok "terminal -q: nothing shown"
fi

finish
