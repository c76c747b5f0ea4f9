#!/usr/bin/env bash
# tests/cli/test_progress.sh - the progress line (docs/running.md, "Progress"):
#   * a long item moves: runs of one item whose stderr is a pipe, each line
#     stamped as it arrives (progress_check.py watch), on the online path
#     (--save output; --save entropy,output) and on the maps path in
#     blocks of rows, must show (a) a line at least every second or every
#     1 % of the work, whichever is rarer, (b) shares that rise to 100,
#     (c) after the first 5 % no time left more than twice, or less than
#     half, the one before (less the time between them), (d) shares and
#     rows counted in the work the page defines (visible query-key pairs
#     and projected rows), recomputed from the shapes and the causal mask
#     and window;  one online run on the real clock (lines a second
#     apart), the others under fake_clock.py's CLOCK_MONOTONIC made so
#     fast that the run lasts minutes, where 1 % takes longer than a
#     second and the lines come a percent apart;
#   * into a file (--progress): whole lines, rising, in the unit; stdout
#     untouched; the results the same as without progress;
#   * slices of several items name the items ("rows of items 1-2/3");
#   * on a terminal (script(1) gives attnrun a pseudo-terminal): first a
#     line naming the plan (heads, d_k, layout, masks, outputs: expected
#     from the options), then one line rewritten with \r and ended by one
#     newline, shown by default, and none with -q; the plan line only
#     there (a file gets progress lines alone).
# The judge's own self-check first: it must fail a late line, too few
# lines, a falling share, a jump of the time left either way and a share
# counted in rows.  Every expected position comes from the input's shape
# and the options (B, n, the slice size), not from another run of attnrun.
# The timing checks allow for a machine that is slow or busy (a late line
# passes when little work was done in its wait); a machine so fast that
# the real-clock run takes under two seconds makes it show fewer lines.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_progress.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT  hang guard of one run in seconds (default 120)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "progress: N passed, M failed"; the exit status is 1 when M > 0.
#
# tags: serial quick-untimed -- it times the progress line on the real clock
set -u
skip() { echo "skip $*"; }

TIME_LIMIT=${TIME_LIMIT:-120}
export TIME_LIMIT
FIX=$PWD/fixtures

SUITE="progress"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"

suite_setup progress numpy h5py
if ! command -v script >/dev/null 2>&1; then
    bad "setup: script(1) not found (Debian: bsdutils)"
    finish
fi

# progress_check.py: the inputs, the judge of a progress text (or of a
# run it watches) and the comparison of two runs' results.
progress_check() { "$PY" "$TESTS/ref/progress_check.py" "$@"; }
self_check progress_check.py

# One item (B = 1) of n = 4096 queries: with the maps saved, one item's
# maps do not fit in a 16 MiB step, so its rows come in blocks.
progress_check input "$T/long.h5" 1 4096 32 || { bad "setup: cannot write the input"; finish; }
# (a causal window keeps the stored maps small; the rows are all computed)
LONG=(--heads 2 --save weights,output --store f16 --causal --window 256 --memory 16M)

# judge NAME MODE FILE B N SLICE CAUSAL WINDOW [PLAN]: the progress text
# in FILE of a run over B items of N queries in slices of SLICE items
# (CAUSAL 1 or 0, WINDOW 0 for none), MODE "lines" (a file) or "terminal"
# (script's typescript, the line PLAN first); its verdict named NAME.
judge() {
    local name=$1
    shift
    progress_check judge "$@" >"$T/verdict.log" 2>&1
    local status=$?
    sed "s/^\(ok\|FAIL\) /\1 $name: /" "$T/verdict.log" >"$T/$name.log"
    report_verdicts "$T/$name.log" "$status"
}

# watch NAME B N SLICE CAUSAL WINDOW RATE ARGS...: attnrun ARGS watched
# and judged by progress_check.py watch (RATE 1: the real clock; fit:S:
# the fake clock, the run made to last about S seconds).
watch() {
    local name=$1
    shift
    progress_check watch "$name" "${@:1:6}" "$SHIM" "$ATTNRUN" "${@:7}" >"$T/$name.log" 2>&1
    report_verdicts "$T/$name.log" $?
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

# --------------------------------------------- a long item moves: watched

# Timed, so left to the full tier: the quick tier (tests/README.md) runs
# the untimed checks below, and beside other suites (quick-untimed).
if [ -z "$QUICK" ]; then
    SHIM=                             # the fake clock's shim, when it builds

    # The real clock: one item of 32768 queries, d_model 64 in 4 heads,
    # causal, online (a few seconds).  One thread, here and below: while the
    # thread that reports waits for a core, no other computes on, so that a
    # busy machine makes lines late but never with much work between them.
    if progress_check input "$T/online.h5" 1 32768 64; then
        watch online-output 1 32768 1 1 0 1 \
            "$T/online.h5" -o "$T/online-out.h5" --heads 4 --causal --save output --threads 1 \
            --progress
    else
        bad "setup: cannot write the online input"
    fi

    # The fake clock.
    if ! command -v cc >/dev/null; then
        skip "fake clock: no C compiler (cc) to build the LD_PRELOAD shim"
    elif ! out=$("$PY" "$TESTS/ref/fake_clock.py" build "$T" 2>&1); then
        skip "fake clock: the shim does not build: $(printf '%s\n' "$out" | tail -n 1)"
    else
        SHIM=$T/fake_time.so
    fi
    if [ -n "$SHIM" ] && progress_check input "$T/short.h5" 1 8192 64 &&
            progress_check input "$T/maps.h5" 1 8192 32; then
        # the summaries on the online path: 8192 queries, 4 heads, causal
        watch online-entropy 1 8192 1 1 0 fit:300 \
            "$T/short.h5" -o "$T/short-out.h5" --force --heads 4 --causal --save entropy,output \
            --threads 1 --progress
        # the maps in blocks of rows: 8192 queries, 4 heads, causal window 256
        watch maps-blocks 1 8192 1 1 256 fit:300 \
            "$T/maps.h5" -o "$T/maps-out.h5" --force --heads 4 --causal --window 256 \
            --save weights,output --store f16 --memory 32M --threads 1 --progress
    elif [ -n "$SHIM" ]; then
        bad "setup: cannot write the inputs of the fake clock's runs"
    fi
    rm -f "$T"/*-out.h5
fi

# ------------------------------------------------- into a file: whole lines

if attn_ok file "$T/long.h5" -o "$T/p.h5" "${LONG[@]}" --progress; then
    judge file lines "$T/stderr" 1 4096 1 1 256
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
    judge items lines "$T/stderr" 3 6 2 0 0
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
    judge terminal terminal "$T/tty.tty" 1 4096 1 1 256 \
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
