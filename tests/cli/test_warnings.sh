#!/usr/bin/env bash
# tests/cli/test_warnings.sh - the warnings of likely mistakes
# (docs/warnings.md): one line `attnrun: warning: ...` on stderr per kind,
# once per run, after a run that succeeded.
#   * each warning fires, its exact line, on the mistaken input: a torch
#     key_padding_mask without --mask-invert (items 0 and 2 unpadded: "2 of
#     4 items"; also in slices of one item, a mask (m) that keeps no key,
#     one item wholly padded, a rank-2 X), a Hugging Face attention_mask
#     with --mask-invert, all-zero W_K, W_Q and W_K, fused W_QKV, --scale
#     sqrt(d_k) and d_k (also in a dry run); all three kinds at once, in
#     one line each;
#   * the exit status is 0 with or without it, -q silences it (stderr
#     empty), and the datasets written are bit for bit those of the -q run;
#     a failing run (OUT exists) prints its error alone;
#   * legitimate look-alikes do not warn: the torch mask with
#     --mask-invert, the Hugging Face mask as it is, a mask (m) hiding some
#     keys, zero biases (every run here has them), a W_K half zeros,
#     --scale 1/sqrt(d_k), 1/d_k, 1, and 1 where d_k = 1;
#   * the results of the masks, inverted or not, against the float64
#     reference (tests/ref/models_ref.py): a warning changes nothing;
#   * on a terminal (script(1)): the plan line first, the progress line,
#     then the warning on a line of its own; nothing with -q;
#   * with ATTNRUN_MPI (make MPI=1 test): under mpirun -n 3, the same one
#     line, the counts the job's -- items in slices of one, a mask (m),
#     one long item whose query rows the ranks share.
# About 70 runs, ~15 s on two cores.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_warnings.sh     # from the repository root
#
# Environment:
#   ATTNRUN      the binary under test (default: build/attnrun)
#   ATTNRUN_MPI  the MPI build (build/attnrun-mpi); its checks are skipped
#                without it
#   PYTHON       a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT   hang guard of one run in seconds (default 60)
# Each check prints "ok NAME", "FAIL NAME: WHY" or "skip NAME: WHY"; the
# last line is "warnings: N passed, M failed"; the exit status is 1 when
# M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-60}
ATTNRUN_MPI=${ATTNRUN_MPI:-}

SUITE="warnings"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

suite_setup warnings numpy h5py

# warnings_cases.py: the input (every case's datasets in one file) and
# the check of a run's results against the float64 reference.
ref warnings_cases.py input "$T/in.h5" || { bad "setup: cannot write the input"; finish; }
IN=$T/in.h5
BASE=(--heads 2 --save weights,output)
W="attnrun: warning:"

# The lines, as docs/warnings.md gives them.
torch_line() {   # MASK COUNT TOTAL ITEMS
    echo "$W mask $1 hides every key of $2 of $3 $4, whose weights are all 0; for a torch" \
         "key_padding_mask (nonzero = padding) use --mask-invert"
}
HF_INVERTED="$W mask attention_mask, inverted by --mask-invert, hides every key of 2 of 4\
 items, whose weights are all 0; for a mask whose nonzero entries are the keys to attend\
 (Hugging Face's attention_mask) drop --mask-invert"
ZERO_WK="$W weight W_K_zero is all zeros (a failed export?); name the right dataset with --wk"
ZERO_QK="$W weights W_Q_zero and W_K_zero are all zeros (a failed export?); name the right\
 datasets with --wq and --wk"
ZERO_QKV="$W weight W_QKV_zero is all zeros (a failed export?); name the right dataset with --wqkv"
# d_k = 16 / 2 = 8: sqrt(d_k) = 2.82843, 1/sqrt(d_k) = 0.353553 (printf's %g)
SCALE_SQRT="$W --scale 2.828427 equals sqrt(d_k) = 2.82843 (d_k = 8); the usual scale is\
 1/sqrt(d_k) = 0.353553 (the default without --scale)"
SCALE_DK="$W --scale 8 equals d_k = 8; the usual scale is 1/sqrt(d_k) = 0.353553 (the default\
 without --scale)"

# attn ERR ARGS...: attnrun ARGS under the hang guard, stdout in $T/stdout,
# stderr in ERR; returns its status.
attn() {
    local err=$1
    shift
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$@" >"$T/stdout" 2>"$err"
}

# warns NAME EXPECTED ARGS...: `attnrun IN -o $T/NAME.h5 BASE ARGS` ends
# with status 0 and stderr exactly EXPECTED (lines; "": nothing); with -q
# also status 0, stderr empty, and the datasets bit for bit the same.
warns() {
    local name=$1 expected=$2 rc rcq same
    shift 2
    attn "$T/stderr" "$IN" -o "$T/$name.h5" "${BASE[@]}" "$@"
    rc=$?
    attn "$T/stderr.q" "$IN" -o "$T/$name-q.h5" "${BASE[@]}" "$@" -q
    rcq=$?
    if [ -n "$expected" ]; then printf '%s\n' "$expected" >"$T/expected"; else : >"$T/expected"; fi
    if [ "$rc" -ne 0 ]; then
        bad "$name: exit $rc: $(head -c 300 "$T/stderr")"
    elif ! cmp -s "$T/expected" "$T/stderr"; then
        bad "$name: stderr $(head -c 600 "$T/stderr" | tr '\n' '|'), expected $(tr '\n' '|' <"$T/expected")"
    elif [ "$rcq" -ne 0 ] || [ -s "$T/stderr.q" ]; then
        bad "$name: -q: exit $rcq, stderr $(head -c 300 "$T/stderr.q")"
    elif ! same=$(ref same_file.py datasets "$T/$name.h5" "$T/$name-q.h5" 2>&1); then
        bad "$name: the results with -q differ: $same"
    else
        ok "$name: $([ -n "$expected" ] && echo "$(wc -l <"$T/expected") warning line(s)" ||
                     echo "no warning"), exit 0; -q silent, the same results"
    fi
}

# ------------------------------------------------ the mask hides every key

warns torch-mask "$(torch_line key_padding_mask 2 4 items)" --mask key_padding_mask
expect "torch-mask: items 0 and 2 weigh 0, the rest as the reference" \
    ref warnings_cases.py check "$T/torch-mask.h5" "$IN" key_padding_mask
warns torch-mask-slices "$(torch_line key_padding_mask 2 4 items)" --mask key_padding_mask \
    --batch-slice 1
warns hf-mask-inverted "$HF_INVERTED" --mask attention_mask --mask-invert
warns one-item-empty "$(torch_line one_empty 1 4 items)" --mask one_empty
warns shared-mask-none "$(torch_line shared_none 4 4 items)" --mask shared_none
warns rank2-x "$(torch_line shared_none 1 1 item)" --mask shared_none --x X1

# the look-alikes
warns torch-mask-inverted "" --mask key_padding_mask --mask-invert
expect "torch-mask-inverted: the weights of the padding mask" \
    ref warnings_cases.py check "$T/torch-mask-inverted.h5" "$IN" key_padding_mask invert
warns hf-mask "" --mask attention_mask
expect "hf-mask: the weights of the padding mask" \
    ref warnings_cases.py check "$T/hf-mask.h5" "$IN" attention_mask
warns shared-mask-some "" --mask shared_some
warns no-mask "" --causal

# ------------------------------------------------------ all-zero weights

warns zero-wk "$ZERO_WK" --wk W_K_zero
warns zero-wk-f64 "$ZERO_WK" --wk W_K_zero --precision f64
expect "zero-wk: uniform weights, as the reference" \
    ref warnings_cases.py check "$T/zero-wk.h5" "$IN" - wk=W_K_zero
warns zero-wq-wk "$ZERO_QK" --wq W_Q_zero --wk W_K_zero
warns zero-wqkv "$ZERO_QKV" --wqkv W_QKV_zero
warns sparse-wk "" --wk W_K_sparse
warns last-wk "" --wk W_K_last
warns last-wk-f64 "" --wk W_K_last --precision f64

# ------------------------------------------- a scale that is sqrt(d_k) or d_k

warns scale-sqrt "$SCALE_SQRT" --scale 2.828427
warns scale-dk "$SCALE_DK" --scale 8
expect "scale-dk: the scale given is used, as the reference" \
    ref warnings_cases.py check "$T/scale-dk.h5" "$IN" - scale=8
for scale in 0.353553 0.125 1; do
    warns "scale-$scale" "" --scale "$scale"
done
warns scale-1-dk-1 "" --scale 1 --heads 16
# "within a thousandth" includes the thousandth: with d_k = 125, 125.125
# is d_k + 1e-3 * d_k exactly in binary (0.125 both ways)
ref attention_inputs.py random "$T/d125.h5" 1 3 125 5
if ! attn "$T/stderr" "$T/d125.h5" -o "$T/d125.out.h5" --heads 1 --save output --scale 125.125; then
    bad "scale-dk-edge: exit $?: $(head -c 300 "$T/stderr")"
elif [ "$(cat "$T/stderr")" != "$W --scale 125.125 equals d_k = 125; the usual scale is 1/sqrt(d_k) = 0.0894427 (the default without --scale)" ]; then
    bad "scale-dk-edge: stderr $(head -c 600 "$T/stderr" | tr '\n' '|'), expected the d_k warning"
else
    ok "scale-dk-edge: --scale 125.125 with d_k = 125, exactly a thousandth off, warns"
fi

attn "$T/stderr" "$IN" --dry-run "${BASE[@]}" --scale 8
rc=$?
printf '%s\n' "$SCALE_DK" >"$T/expected"
if [ "$rc" -ne 0 ] || ! cmp -s "$T/expected" "$T/stderr" || ! grep -q '^heads ' "$T/stdout"; then
    bad "dry run: exit $rc, stderr $(head -c 300 "$T/stderr")"
elif attn "$T/stderr" "$IN" --dry-run "${BASE[@]}" --scale 8 -q && [ ! -s "$T/stderr" ]; then
    ok "dry run: the scale's warning after the plan; none with -q"
else
    bad "dry run -q: $(head -c 300 "$T/stderr")"
fi

# ------------------------------------------------ together, and failing

warns all-three "$SCALE_DK"$'\n'"$(torch_line key_padding_mask 2 4 items)"$'\n'"$ZERO_WK" \
    --mask key_padding_mask --wk W_K_zero --scale 8

: >"$T/exists.h5"
attn "$T/stderr" "$IN" -o "$T/exists.h5" "${BASE[@]}" --mask key_padding_mask --scale 8
rc=$?
problem=$(run_problem "$rc" 2 "$T/stderr")
if [ -n "$problem" ]; then
    bad "failing run: $problem"
elif grep -q "^$W" "$T/stderr"; then
    bad "failing run: a warning beside the error: $(head -c 300 "$T/stderr")"
else
    ok "failing run: exit 2, its error alone"
fi

# ------------------------------------------------ on a terminal

# terminal NAME OPTIONS...: attnrun under script(1), its typescript (both
# streams on the pseudo-terminal, "\n" as "\r\n") in $T/NAME.tty.
terminal() {
    local name=$1 words
    shift
    printf -v words ' %q' "$ATTNRUN" "$IN" -o "$T/$name.h5" "${BASE[@]}" "$@"
    timeout -s KILL "$TIME_LIMIT" script -qec "$words" /dev/null </dev/null >"$T/$name.tty" 2>&1
}

if ! command -v script >/dev/null 2>&1; then
    skip "terminal: script(1) not found (Debian: bsdutils)"
else
    terminal tty --mask key_padding_mask
    rc=$?
    expect "terminal: the plan, the progress line, then the warning on its own line" \
        test "$rc" -eq 0 + \
        ref warnings_cases.py tty "$T/tty.tty" \
            "attnrun: 2 heads (2 K/V), d_k 8, layout xw, mask key_padding_mask, saving weights,output" \
            "$(torch_line key_padding_mask 2 4 items)"
    terminal quiet --mask key_padding_mask -q
    rc=$?
    if [ "$rc" -ne 0 ] || [ -s "$T/quiet.tty" ]; then
        bad "terminal -q: exit $rc, wrote $(head -c 200 "$T/quiet.tty" | od -c | head -n 2)"
    else
        ok "terminal -q: nothing shown"
    fi
fi

# ------------------------------------------------ MPI: one line, the job's counts

case $ATTNRUN_MPI in
    ""|/*) ;;
    *) ATTNRUN_MPI=$PWD/$ATTNRUN_MPI ;;
esac
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -n 3)
# mpi NAME EXPECTED ARGS...: three ranks, status 0, stderr exactly EXPECTED.
mpi() {
    local name=$1 expected=$2 rc
    shift 2
    timeout -s KILL "$TIME_LIMIT" "${MPIRUN[@]}" "$ATTNRUN_MPI" "$IN" -o "$T/mpi-$name.h5" \
        "${BASE[@]}" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    printf '%s\n' "$expected" >"$T/expected"
    if [ "$rc" -ne 0 ] || ! cmp -s "$T/expected" "$T/stderr"; then
        bad "mpi $name: exit $rc, stderr $(head -c 600 "$T/stderr" | tr '\n' '|')"
    else
        ok "mpi $name: one line of each kind, the job's count"
    fi
}
if [ -z "$ATTNRUN_MPI" ]; then
    skip "mpi: ATTNRUN_MPI not given (make MPI=1 test gives it)"
elif [ ! -x "$ATTNRUN_MPI" ] || ! command -v mpirun >/dev/null 2>&1; then
    bad "mpi: $ATTNRUN_MPI or mpirun not found"
else
    mpi slices "$SCALE_DK"$'\n'"$(torch_line key_padding_mask 2 4 items)"$'\n'"$ZERO_WK" \
        --mask key_padding_mask --wk W_K_zero --scale 8 --batch-slice 1
    mpi shared "$(torch_line shared_none 4 4 items)" --mask shared_none
    mpi long-item "$(torch_line long_padding_mask 1 1 item)" --x X_long \
        --mask long_padding_mask --memory 1K
fi

finish
