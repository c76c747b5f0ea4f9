#!/usr/bin/env bash
# tests/cli/test_smoke.sh - every subcommand once on the toy fixture, its
# results judged against the fixture's float64 reference
# (tests/ref/smoke_check.py): the run, plot, rollout, flow and heads, --version,
# --help of each and a --dry-run.  The first suite of `make test-quick`.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_smoke.sh    # from the repository root
#
# tags: quick -- the quick tier runs all of it
set -u

SUITE="smoke"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
suite_setup smoke numpy h5py

TOY=$ROOT/fixtures/toy.h5
expect "attnrun --version" "$ATTNRUN" --version
for sub in "" plot rollout flow heads; do
    if "$ATTNRUN" $sub --help 2>&1 | grep -q "^Usage: attnrun"; then
        ok "attnrun${sub:+ $sub} --help"
    else
        bad "attnrun${sub:+ $sub} --help: no usage"
    fi
done
run "$TOY" -o "$T/out.h5" --heads 1 --dry-run
why=$(run_problem "$rc" 0 "$T/stderr")
if [ -z "$why" ] && [ ! -e "$T/out.h5" ] && grep -q . "$T/stdout" "$T/stderr"; then
    ok "--dry-run: a plan and no file"
else
    bad "--dry-run: ${why:-wrote a file or said nothing}"
fi
expect "attnrun toy.h5 -o out.h5 --heads 1" "$ATTNRUN" -q "$TOY" -o "$T/out.h5" --heads 1
expect "attnrun rollout" "$ATTNRUN" rollout -q "$T/out.h5" -o "$T/rollout.h5"
expect "attnrun flow" "$ATTNRUN" flow -q "$T/out.h5" -o "$T/flow.h5"
if "$ATTNRUN" heads -q "$T/out.h5" >"$T/heads.csv" 2>"$T/stderr"; then
    ok "attnrun heads"
else
    bad "attnrun heads: $(head -c 300 "$T/stderr")"
fi
expect "attnrun plot" "$ATTNRUN" plot "$T/out.h5" -o "$T/toy.png"
ref smoke_check.py "$T" "$ROOT/fixtures" >"$T/check.log" 2>&1
report_verdicts "$T/check.log" $?
finish
