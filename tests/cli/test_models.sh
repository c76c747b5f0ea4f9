#!/usr/bin/env bash
# tests/cli/test_models.sh - attnrun on the attention of real model families
# (--preset gpt2, torch-mha, llama, mistral, qwen2, qwen3, gemma2, neox, gptj,
# bloom, bert) and on every variant alone and combined (--kv-heads, --layout,
# --wqkv/--qkv-split, --weights-group, --rope/--rope-dim/--rope-style,
# --positions/--kv-positions, --alibi/--alibi-slopes, --window, --softcap,
# --attn-bias, --mask-invert, --q-norm/--k-norm/--norm-eps, --kv), against
# the float64 numpy reference of tests/ref/models_ref.py, written from each
# family's published code and docs/models.md's formulas (never from
# attnrun's output).
#
#   ATTNRUN=build/attnrun bash tests/cli/test_models.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy and h5py (default: /usr/bin/python3)
#   TIME_LIMIT  hang guard of one run in seconds (default 20)
#
# Inputs are generated at test time with fixed seeds in a temporary
# directory removed on exit: one fixture per preset (weights under their
# Hugging Face / torch names inside a group, read with --weights-group) and
# one per variant.  Each variant runs in float32 with every output saved
# (full softmax), in float64, on the online softmax path (--save
# heads,output and --save output --memory 64K), and with --memory 64K at
# --threads 1 and 2, which must be bit-identical.  Tolerances: weights 1e-5
# absolute, the other outputs 1e-4 of the dataset's largest magnitude;
# float64 1e-12; -inf exactly where the reference masks.  Presets are also
# checked against the per-family function of models_ref.py, and every run
# with all outputs saved against the provenance attributes of
# docs/outputs.md.
# Bad inputs must end with the documented status and one "attnrun: " line.
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "models: N passed, M failed"; the exit status is 1 when M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-20}

SUITE="models"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, reference.py, models_ref.py
. "$TESTS/lib/checks.sh"

suite_setup models numpy h5py

# ------------------------------------------------------ the reference itself

self_check models_ref.py

# ------------------------------------------------------- the inputs and runs

# The fixtures, the table of runs and their checks are in
# tests/ref/models_cases.py; run_table and verify_table in tests/lib/run_table.sh.
. "$TESTS/lib/run_table.sh"
run_table models_cases.py
verify_table models_cases.py

# ------------------------------------------------------------ bad inputs

# Each: the status shown (2|3: either), exactly one "attnrun: " line, no
# signal, within the time limit, the text named (when given) in that line,
# no OUT left behind.
while IFS=$'\t' read -r -u 3 case statuses text args; do
    read -r -a argv <<<"$args"
    out=$T/o/bad.$case.h5
    rm -f "$out"
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$T/c/$case/in.h5" -o "$out" "${argv[@]}" \
        </dev/null >/dev/null 2>"$T/o/bad.err"
    rc=$?
    want=${statuses%%|*}
    case "|$statuses|" in *"|$rc|"*) want=$rc ;; esac
    name="$case ($args): exit $statuses"
    why=$(run_problem "$rc" "$want" "$T/o/bad.err")
    if [ -z "$why" ] && [ "$text" != - ] && ! grep -qF -- "$text" "$T/o/bad.err"; then
        why="the message does not name $text: $(head -c 300 "$T/o/bad.err")"
    fi
    if [ -z "$why" ] && [ -e "$out" ]; then
        why="OUT was left behind"
    fi
    if [ -z "$why" ]; then
        ok "$name ($(head -c 120 "$T/o/bad.err"))"
    else
        bad "$name: $why"
    fi
done 3<"$T/c/bad.tsv"

finish
