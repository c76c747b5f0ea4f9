#!/usr/bin/env bash
# tests/cli/test_progress.sh - the progress line (docs/running.md, "Progress"):
#   * it advances per block of query rows, not only per batch item: one
#     item of n = 4096 whose maps are computed in blocks of rows shows
#     several distinct percentages before 100 %, each on a block boundary,
#     rising, each with a time left that parses, the last with the time
#     elapsed;
#   * into a file (--progress): whole lines, the first report, then one
#     line per further 5 %, then the end; stdout untouched; the results
#     the same as without progress;
#   * slices of several items name the items ("rows of items 1-2/3");
#   * on a terminal (script(1) gives attnrun a pseudo-terminal): first a
#     line naming the plan (heads, d_k, layout, masks, outputs: expected
#     from the options), then one line rewritten with \r and ended by one
#     newline, shown by default, and none with -q; the plan line only
#     there (a file gets progress lines alone).
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

# progress_check.py: the input, the judge of a progress text and the
# comparison of two runs' results.
progress_check() { "$PY" "$TESTS/ref/progress_check.py" "$@"; }

# One item (B = 1) of n = 4096 queries: with the maps saved, one item's
# maps do not fit in a 16 MiB step, so its rows come in blocks.
progress_check input "$T/long.h5" || { bad "setup: cannot write the input"; finish; }
# (a causal window keeps the stored maps small; the rows are all computed)
LONG=(--heads 2 --save weights,output --store f16 --causal --window 256 --memory 16M)

# judge NAME MODE FILE B N SLICE [PLAN]: the progress text in FILE of a
# run over B items of N queries in slices of SLICE items, MODE "lines" (a
# file) or "terminal" (script's typescript, the line PLAN first); its
# verdict named NAME.
judge() {
    local name=$1
    shift
    progress_check judge "$@" >"$T/verdict.log" 2>&1
    local status=$?
    sed "s/^\(ok\|FAIL\) /\1 $name: /" "$T/verdict.log" >"$T/$name.log"
    report_verdicts "$T/$name.log" "$status"
}

# attn_ok WHAT ARGS...: attnrun ARGS under the hang guard, its streams in
# $T/stdout and $T/stderr; a FAIL "WHAT: ..." and status 1 unless it ended
# with status 0.
attn_ok() {
    local what=$1 rc problem
    shift
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    problem=$(run_problem "$rc" 0 "$T/stderr")
    [ -z "$problem" ] && return 0
    bad "$what: $problem"
    return 1
}

# ------------------------------------------------- into a file: whole lines

if attn_ok file "$T/long.h5" -o "$T/p.h5" "${LONG[@]}" --progress; then
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
    elif ! progress_check same-results "$T/p.h5" "$T/q.h5"; then
        bad "file: the results with progress differ from those without"
    else
        ok "file: the same results with and without progress; -q silent"
    fi
fi

# ------------------------------------- slices of several items: items named

if attn_ok items "$FIX/batch_bias.h5" -o "$T/b.h5" --heads 4 --batch-slice 2 --progress; then
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
    # d_model 32 in 2 heads: d_k 16; no --mask; LONG's causal window
    judge terminal terminal "$T/tty.tty" 1 4096 1 \
        "attnrun: 2 heads (2 K/V), d_k 16, layout xw, no mask (causal, window 256), saving weights,output"
fi

terminal quiet -q
rc=$?
if [ "$rc" -ne 0 ] || [ -s "$T/quiet.tty" ]; then
    bad "terminal -q: exit $rc, wrote $(head -c 200 "$T/quiet.tty" | od -c | head -n 2)"
else
    ok "terminal -q: nothing shown"
fi

finish
