#!/usr/bin/env bash
# tests/cli/test_options.sh - each command's options (attnrun, attnrun plot,
# attnrun rollout, attnrun heads, attnrun view) are named alike in its option table (the
# source), its --help and its section of the manual page, and the program
# accepts every one of them (tests/ref/options_check.py, which collects
# each list on its own); and the usage errors the table's rows produce
# name the option as typed and what it expects.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_options.sh     # from the repository root
set -u

SUITE=options
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
suite_setup options h5py

for command in attnrun plot rollout flow heads view; do
    "$PY" "$TESTS/ref/options_check.py" "$command" "$ATTNRUN" "$ROOT/man/attnrun.1" "$ROOT" \
        >"$T/$command.log" 2>&1
    report_verdicts "$T/$command.log" $?
done

# A bad value of each kind of row: exit 2 and one line naming the option
# as typed, the value and what was expected.
cases=(
    'in.h5 -o o.h5 --heads 0|attnrun: --heads '\''0'\'': expected a whole number from 1 to 1048576 (see attnrun --help)'
    'in.h5 -o o.h5 -H x|attnrun: -H '\''x'\'': expected a whole number from 1 to 1048576'
    'in.h5 -o o.h5 --scale 0|attnrun: --scale '\''0'\'': expected a finite positive number'
    'in.h5 -o o.h5 --norm-eps -1|attnrun: --norm-eps '\''-1'\'': expected a small non-negative number such as 1e-6'
    'in.h5 -o o.h5 --memory 5Q|attnrun: --memory '\''5Q'\'': expected a size such as 512K, 256M or 2G'
    'in.h5 -o o.h5 --precision f16|attnrun: --precision '\''f16'\'': expected f32 or f64'
    'in.h5 -o o.h5 --weights-group layer|attnrun: --weights-group '\''layer'\'': expected an absolute group path'
    'in.h5 -o o.h5 --rope-dim 3|attnrun: --rope-dim '\''3'\'': expected an even number of features from 2'
    'in.h5 -o o.h5 --preset gpt3|attnrun: --preset '\''gpt3'\'': unknown (choose from gpt2, torch-mha, llama'
    'in.h5 -o o.h5 --wq none|attnrun: --wq none: only a bias can be left out'
    'in.h5 -o o.h5 --compress 10|attnrun: --compress '\''10'\'': expected a level from 0 to 9'
    'in.h5 -o o.h5 --casual|attnrun: unknown option '\''--casual'\'''
    'in.h5 -o o.h5 --heads|attnrun: --heads: missing its value'
    'plot r.h5 -o p.png --what heads|attnrun: --what '\''heads'\'': expected weights, scores, norms, mean, entropy, distance, value_norm, rollout, flow, first, previous, self, duplicate or induction (see attnrun plot --help)'
    'plot r.h5 -o p.png --item x|attnrun: --item '\''x'\'': expected a whole number from 0'
    'rollout r.h5 -o o.h5 --residual 2|attnrun: --residual '\''2'\'': expected a number from 0 to 1 (see attnrun rollout --help)'
    'rollout r.h5 -o o.h5 --memory 5Q|attnrun: --memory '\''5Q'\'': expected a size such as 512K, 256M or 2G'
    'rollout r.h5 -o o.h5 --groups layer0|attnrun: --groups '\''layer0'\'': expected absolute group paths separated by commas'
    'rollout r.h5 -o o.h5 --residul 0.3|attnrun: unknown option '\''--residul'\''; did you mean --residual?'
    'heads r.h5 --groups /a,b|attnrun: --groups '\''/a,b'\'': expected absolute group paths separated by commas'
    'heads r.h5 --groups /a,/a|attnrun: --groups: /a is named twice (see attnrun heads --help)'
    'heads r.h5 -o|attnrun: -o: missing its value'
    'heads r.h5 --quite|attnrun: unknown option '\''--quite'\''; did you mean --quiet?'
)
for case in "${cases[@]}"; do
    args=${case%%|*} expected=${case#*|}
    # shellcheck disable=SC2086
    "$ATTNRUN" $args >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qF -- "$expected" "$T/err"; then
        ok "usage error: $args"
    else
        bad "usage error: $args: exit $rc, $(head -c 300 "$T/err")"
    fi
done

finish
