#!/usr/bin/env bash
# tests/cli/test_expect.sh - `--expect OUTPUT=DATASET` (docs/running.md,
# "Checking against a reference"): the run's outputs against references
# computed in float64 by tests/ref/models_ref.py (tests/ref/expect_cases.py
# writes them), and the diagnosis that names the convention a user got
# wrong; then the warnings and hints for the same torch mistakes.
#   * the right run: exit 0, one line per output whose numbers (largest
#     difference, relative, tolerance) are numpy's; -q: silent; f64 with a
#     float64 reference: tolerance 1e-10; --expect-tol;
#   * each mistake -- --layout xw for nn.Linear weights, no --causal, both,
#     --heads 4 for 8 (and 16 and 8 for 4), a torch key_padding_mask
#     without --mask-invert, --scale, the RoPE style -- exits 4 with the
#     comparison's line (numpy's numbers, the place of the largest
#     difference) and a last line naming exactly the convention of the
#     reference, which then passes when given; none found: the runs and the
#     conventions tried, --kv-heads among them;
#   * the written results are those of the run without --expect, bit for
#     bit, and the re-runs leave no file behind;
#   * references of the wrong shape: exit 3 before anything is written --
#     head-averaged weights (pointed at mean=, which then passes), X or the
#     reference transposed (batch_first named), another shape, a name the
#     input lacks; bad --expect syntax: exit 2;
#   * --in-place, --append and --dry-run; memory that does not grow with B
#     (a 105 MB reference, peak RSS against the run without --expect);
#   * the warnings: most query rows left no key by a torch mask with
#     --causal, a causal reference with a run that is not; none on the
#     look-alikes (the same mask inverted, Hugging Face's left padding);
#   * the hints: a torch (n, n) attn_mask given to --mask, X transposed
#     against a mask or --tokens, h5py's bool, token ids, an appended group
#     that exists;
#   * with ATTNRUN_MPI (make MPI=1 test): the same lines under mpirun -n 3.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_expect.sh     # from the repository root
#
# Environment: ATTNRUN, ATTNRUN_MPI, PYTHON, TIME_LIMIT (hang guard of one
# run, default 60 s).  Each check prints "ok NAME", "FAIL NAME: WHY" or
# "skip NAME: WHY"; the last line is "expect: N passed, M failed".
set -u

TIME_LIMIT=${TIME_LIMIT:-60}
ATTNRUN_MPI=${ATTNRUN_MPI:-}

SUITE="expect"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

suite_setup expect numpy h5py

ref expect_cases.py input "$T/in.h5" || { bad "setup: cannot write the input"; finish; }
IN=$T/in.h5
MHA=(--preset torch-mha --heads 4)
R=/reference

# attn ARGS...: attnrun ARGS under the hang guard, stderr in $T/stderr;
# sets rc.
attn() {
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

# checked STATUS NAME OUTPUT=REF[,...] ARGS...: `attnrun IN -o $T/out.h5
# --expect LIST ARGS`; true when it exits STATUS, else a FAIL.
checked() {
    local status=$1 name=$2 list=$3
    shift 3
    rm -f "$T/out.h5"
    attn "$IN" -o "$T/out.h5" --expect "$list" "$@"
    [ "$rc" -eq "$status" ] && return
    bad "$name: exit $rc, expected $status: $(head -c 400 "$T/stderr" | tr '\n' '|')"
    return 1
}

# numpys_lines OUTPUT=REF[,...] TOL: nothing when $T/stderr's line of each
# comparison (of $T/out.h5 with IN) is numpy's (expect_cases.py line),
# else why not.
numpys_lines() {
    local pair
    for pair in ${1//,/ }; do
        ref expect_cases.py line "$T/stderr" "$T/out.h5" / "$IN" "${pair%%=*}" "${pair#*=}" \
            "$2" 2>&1 || return
    done
}

# passes NAME OUTPUT=REF[,...] ARGS...: exit 0, and each comparison's line
# numpy's (tolerance 1e-5 unless TOL is set).
passes() {
    local name=$1 list=$2 why=""
    shift 2
    checked 0 "$name" "$list" "$@" || return
    why=$(numpys_lines "$list" "${TOL:-1e-5}")
    if [ -n "$why" ]; then bad "$name: $why"; else ok "$name: exit 0, numpy's differences"; fi
}

# differs NAME OUTPUT=REF[,...] FIRST WITH ARGS...: exit 4, each line
# numpy's, the last naming WITH (FIRST: see expect_cases.py diagnosis);
# then ARGS with WITH passes.
differs() {
    local name=$1 list=$2 first=$3 with=$4 why=""
    shift 4
    checked 4 "$name" "$list" "$@" || return
    [[ $first != *" "* ]] && why=$(numpys_lines "$list" 1e-5)
    [ -z "$why" ] && why=$(ref expect_cases.py diagnosis "$T/stderr" "$first" "$with" 2>&1)
    if [ -n "$why" ]; then
        bad "$name: $why"
        return
    fi
    local fix=(${with//(*)/})               # "with --scale 1 (1)": --scale 1
    fix=("${fix[@]:1}")
    if [[ ${fix[0]} != --* ]]; then         # not an option: the caller checks the fix
        ok "$name: exit 4, numpy's differences, '$with' named"
        return
    fi
    rm -f "$T/fixed.h5"
    attn "$IN" -o "$T/fixed.h5" --expect "$list" "$@" "${fix[@]}"
    if [ "$rc" -ne 0 ]; then
        bad "$name: exit 4 and '$with' named, but with it: exit $rc $(head -c 300 "$T/stderr")"
    else
        ok "$name: exit 4, numpy's differences, '$with' named, and with it exit 0"
    fi
}

# fails NAME STATUS EXPECTED ARGS...: exit STATUS, stderr exactly the line
# EXPECTED, and no output written.
fails() {
    local name=$1 status=$2 expected=$3
    shift 3
    rm -f "$T/out.h5"
    attn "$IN" -o "$T/out.h5" "$@"
    local why
    why=$(run_problem "$rc" "$status" "$T/stderr")
    if [ -n "$why" ]; then
        bad "$name: $why"
    elif [ "$(cat "$T/stderr")" != "$expected" ]; then
        bad "$name: $(cat "$T/stderr"), expected $expected"
    elif [ -e "$T/out.h5" ]; then
        bad "$name: an output was written"
    else
        ok "$name: exit $status, the line, nothing written"
    fi
}

# ---------------------------------------------------------------- passing

passes right "weights=$R/mha/weights,output=$R/mha/output" "${MHA[@]}"
attn "$IN" -o "$T/q.h5" "${MHA[@]}" --expect "weights=$R/mha/weights" -q
if [ "$rc" -eq 0 ] && [ ! -s "$T/stderr" ]; then ok "right -q: exit 0, silent"
else bad "right -q: exit $rc, $(head -c 300 "$T/stderr")"; fi
passes mean "mean=$R/mean" "${MHA[@]}"
TOL=1e-10 passes f64 "weights=$R/f64/weights" "${MHA[@]}" --precision f64
passes f64-against-f32 "weights=$R/mha/weights" "${MHA[@]}" --precision f64
TOL=2 passes expect-tol "weights=$R/mha/weights" --heads 4 --expect-tol 2
passes gqa "weights=$R/gqa/weights" --heads 4 --kv-heads 2 --wqkv W_QKV_gqa --layout linear \
    --bo out_proj.bias --wo out_proj.weight

# ------------------------------------------------------------- diagnosed

differs layout "weights=$R/mha/weights" weights "with --layout linear" --heads 4
differs layout-causal "weights=$R/causal/weights,output=$R/causal/output" weights \
    "with --layout linear --causal" --heads 4
differs heads-4-for-8 "weights=$R/heads8/weights,output=$R/heads8/output" \
    "weights have 4 heads, the reference 8" "with --heads 8" "${MHA[@]}"
differs heads-16-for-8 "output=$R/heads8/output" output "with --heads 8" --preset torch-mha --heads 16
differs heads-8-for-4 "output=$R/mha/output" output "with --heads 4" --preset torch-mha --heads 8
differs mask-invert "output=$R/padded/output" output "with --mask-invert" "${MHA[@]}" \
    --mask key_padding_mask
differs scale "weights=$R/scale1/weights" weights "with --scale 1 (1)" --heads 4 --layout linear \
    --bq b_Q --bk b_K --bv b_V --bo b_O
differs x-transposed-square "weights=$R/square/weights" weights \
    "with X transposed (store x.transpose(0, 1))" "${MHA[@]}" --x X_sq_seq
passes square-batch-first "weights=$R/square/weights" "${MHA[@]}" --x X_sq
differs rope-style "weights=$R/rope/weights" weights "with --rope-style gptj" --heads 4 \
    --layout linear --rope 10000

# the causal reference: the warning before the lines
attn "$IN" -o "$T/c.h5" "${MHA[@]}" --expect "weights=$R/causal/weights"
if [ "$rc" -eq 4 ] && [ "$(head -n 1 "$T/stderr")" = "attnrun: warning: $R/causal/weights is\
 causal (0 for every key after its query) but the run is not; use --causal" ] &&
    why=$(ref expect_cases.py diagnosis "$T/stderr" weights "with --causal" 2>&1); then
    ok "causal: the warning first, exit 4, --causal named"
else
    bad "causal: exit $rc: $(head -c 500 "$T/stderr" | tr '\n' '|') ${why:-}"
fi
attn "$IN" -o "$T/c2.h5" "${MHA[@]}" --causal --expect "weights=$R/causal/weights"
if [ "$rc" -eq 0 ] && ! grep -q warning "$T/stderr"; then ok "causal run: no warning"
else bad "causal run: exit $rc: $(head -c 300 "$T/stderr")"; fi

# nothing matches (RoPE without --rope): the runs and what was tried
attn "$IN" -o "$T/none.h5" "${MHA[@]}" --expect "weights=$R/rope/weights"
last=$(tail -n 1 "$T/stderr")
if [ "$rc" -eq 4 ] &&
    [[ $last == "attnrun: expect: weights differ by "*"; no convention tried matches the first item ("*" runs: --layout xw, --causal, --heads 2, --heads 8, --heads 1, --heads 16, --scale 0.25 (1/d_k), --scale 1 (1), --kv-heads 2, --kv-heads 1, and their pairs); the nearest, "*", differs by "* ]]; then
    ok "no match: exit 4, the conventions tried named"
else
    bad "no match: exit $rc: $last"
fi

# a convention to drop: the phrase says without
attn "$IN" -o "$T/w.h5" "${MHA[@]}" --mask leftpad --mask-invert --expect "output=$R/leftpad/output"
if [ "$rc" -eq 4 ] && [ "$(tail -n 1 "$T/stderr" | sed 's/(.*)/(D)/')" = "attnrun: expect: output\
 differs by $(grep -o 'largest difference [^ ]*' "$T/stderr" | cut -d' ' -f3); it matches (D) without\
 --mask-invert" ]; then ok "without: 'without --mask-invert' named for Hugging Face's mask"
else bad "without: exit $rc: $(tail -n 1 "$T/stderr")"; fi

# the written results: those of the run without --expect; no file left
attn "$IN" -o "$T/plain.h5" --heads 4
attn "$IN" -o "$T/checked.h5" --heads 4 --expect "weights=$R/mha/weights"
expect "results: a failed --expect leaves the run's results as without it" \
    ref same_file.py datasets "$T/plain.h5" "$T/checked.h5"
left=$(ls -A "$T" | grep -c '^\.attnrun-expect')
if [ "$left" -eq 0 ]; then ok "re-runs: no file left beside the results"
else bad "re-runs: $left files left: $(ls -A "$T")"; fi

# ----------------------------------------------------------- wrong shapes

fails mean-as-weights 3 "attnrun: --expect weights: $R/mean is (3, 8, 8), the weights averaged\
 over the heads (torch's average_attn_weights=True); compare it with --expect mean=$R/mean" \
    "${MHA[@]}" --expect "weights=$R/mean"
fails x-transposed 3 "attnrun: --expect weights: $R/mha/weights is (3, 4, 8, 8) but weights are\
 (8, 4, 3, 3): X looks transposed, (n, B, ...) as torch keeps it with batch_first=False; store it\
 as t.transpose(0, 1)" "${MHA[@]}" --x X_seq --expect "weights=$R/mha/weights"
fails reference-transposed 3 "attnrun: --expect output: $R/seq/output is (8, 3, 16) but output is\
 (3, 8, 16): X or the reference looks transposed, (n, B, ...) as torch keeps it with\
 batch_first=False; store the one that is as t.transpose(0, 1)" \
    "${MHA[@]}" --expect "output=$R/seq/output"
fails other-shape 3 "attnrun: --expect weights: $R/short is (3, 4, 8, 7) but weights are\
 (3, 4, 8, 8)" "${MHA[@]}" --expect "weights=$R/short"
fails missing 3 "attnrun: --expect weights: $IN has no dataset $R/nothing" \
    "${MHA[@]}" --expect "weights=$R/nothing"
fails dry-run-shape 3 "attnrun: --expect weights: $R/short is (3, 4, 8, 7) but weights are\
 (3, 4, 8, 8)" "${MHA[@]}" --dry-run --expect "weights=$R/short"
fails syntax 2 "attnrun: --expect 'weights': expected OUTPUT=DATASET, such as\
 weights=/reference/attn_weights (see attnrun --help)" "${MHA[@]}" --expect weights
fails unknown-output 2 "attnrun: --expect wieghts: no output of that name (the names of --save)\
 (see attnrun --help)" "${MHA[@]}" --expect wieghts=/x
fails twice 2 "attnrun: --expect names weights twice (see attnrun --help)" "${MHA[@]}" \
    --expect weights=/a,weights=/b

# ----------------------------------------------- in place, appended, dry
cp "$IN" "$T/inplace.h5"
timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$T/inplace.h5" --in-place --group /res "${MHA[@]}" \
    --expect "weights=$R/mha/weights" 2>"$T/stderr"
rc=$?
why=$(ref expect_cases.py line "$T/stderr" "$T/inplace.h5" /res "$T/inplace.h5" weights \
      "$R/mha/weights" 1e-5 2>&1)
if [ "$rc" -eq 0 ] && [ -z "$why" ]; then ok "--in-place: the group compared"
else bad "--in-place: exit $rc $why"; fi
timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$IN" -o "$T/index.h5" --append --group /l0 "${MHA[@]}" \
    --expect "output=$R/mha/output" 2>"$T/stderr"
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^attnrun: expect: output vs $R/mha/output: largest difference .*, within 1e-05$" "$T/stderr"; then
    ok "--append: the appended group compared"
else bad "--append: exit $rc $(head -c 300 "$T/stderr")"; fi
attn "$IN" -o "$T/dry.h5" "${MHA[@]}" --dry-run --expect "weights=$R/mha/weights"
if [ "$rc" -eq 0 ] && [ ! -e "$T/dry.h5" ] && ! grep -q "attnrun: expect" "$T/stderr"; then
    ok "--dry-run: shapes checked, nothing compared or written"
else bad "--dry-run: exit $rc $(head -c 300 "$T/stderr")"; fi

# -------------------------------------------- memory does not grow with B
if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then
    # ASan keeps freed blocks in quarantine (HDF5's buffers of every read):
    # its resident size is not the program's
    skip "memory: a sanitized build's resident size is ASan's (the plain build checks it)"
elif [ -z "$QUICK" ]; then
    ref expect_cases.py big "$T/big.h5" 1600
    peak() {   # peak RSS in KiB of attnrun ARGS
        /usr/bin/time -f %M -o "$T/rss" "$ATTNRUN" -q "$T/big.h5" "$@" 2>/dev/null
        rc=$?
        cat "$T/rss"
    }
    plain=$(peak -o "$T/big1.h5" --heads 4 --save weights --memory 32M)
    checked=$(peak -o "$T/big2.h5" --heads 4 --save weights --memory 32M \
              --expect weights=/reference/weights)
    if [ "$rc" -eq 0 ] && [ "$checked" -lt $((plain + 8192)) ]; then
        ok "memory: a 105 MB reference compared within 8 MiB of the run's peak ($plain KiB, with --expect $checked KiB)"
    else
        bad "memory: exit $rc, peak $checked KiB with --expect, $plain KiB without"
    fi
fi

# ------------------------------------------------------------- warnings
WARN="attnrun: warning:"
attn "$IN" -o "$T/w1.h5" "${MHA[@]}" --causal --mask allpad
if [ "$rc" -eq 0 ] && [ "$(cat "$T/stderr")" = "$WARN mask allpad with the causal mask leaves 18\
 of 24 query rows (75%) no key to attend, whose weights are all 0; for a torch key_padding_mask\
 (nonzero = padding) use --mask-invert" ]; then
    ok "rows-see-no-key: the line, 18 of 24 rows counted by hand"
else bad "rows-see-no-key: exit $rc $(cat "$T/stderr")"; fi
attn "$IN" -o "$T/w1q.h5" "${MHA[@]}" --causal --mask allpad -q
if [ "$rc" -eq 0 ] && [ ! -s "$T/stderr" ]; then ok "rows-see-no-key -q: silent"
else bad "rows-see-no-key -q: $(cat "$T/stderr")"; fi
for look in "--causal --mask allpad --mask-invert" "--causal --mask leftpad" "--mask allpad"; do
    attn "$IN" -o "$T/w2.h5" "${MHA[@]}" $look --force
    if [ "$rc" -eq 0 ] && [ ! -s "$T/stderr" ]; then ok "no warning: $look"
    else bad "look-alike $look: $(cat "$T/stderr")"; fi
done

# ---------------------------------------------------------------- hints
fails attn-mask 3 "attnrun: $IN: mask attn_mask has shape (8, 8); expected (B, m) = (3, 8) or\
 (m,) = (8,): (n, m) is torch's attn_mask, one for every item; for a causal one use --causal,\
 else --attn-bias (0 keeps, -inf hides)" "${MHA[@]}" --mask attn_mask
fails mask-x-transposed 3 "attnrun: $IN: mask key_padding_mask has shape (3, 8); expected (B, m) =\
 (8, 3) or (m,) = (3,): X looks transposed, stored (n, B, D) as torch keeps it with\
 batch_first=False; store X.transpose(0, 1)" "${MHA[@]}" --x X_seq --mask key_padding_mask
fails bool-x 3 "attnrun: $IN: dataset allpad has boolean (h5py stores bool as an HDF5 enum)\
 elements; floating-point expected" "${MHA[@]}" --x allpad
fails token-ids 3 "attnrun: $IN: the tokens dataset leftpad has integer elements; strings\
 expected (token ids: store the decoded tokens, in h5py f[name] = np.array(tokens,\
 dtype=h5py.string_dtype()))" "${MHA[@]}" --tokens leftpad
"$PY" -c "
import h5py, numpy as np, sys
with h5py.File(sys.argv[1], 'a') as f:
    f['words'] = np.array([['t%d' % i for i in range(8)]] * 3, dtype=h5py.string_dtype())
" "$IN"
fails tokens-x-transposed 3 "attnrun: $IN: the tokens dataset words has shape (3, 8); expected (3,)\
 or (8, 3): one token per query of X_seq; X looks transposed, stored (n, B, D) as torch keeps it\
 with batch_first=False: store X.transpose(0, 1)" "${MHA[@]}" --x X_seq --tokens words
attn "$IN" -o "$T/idx.h5" --append --group /l0 "${MHA[@]}" -q
attn "$IN" -o "$T/idx.h5" --append --group /l0 "${MHA[@]}"
if [ "$rc" -eq 2 ] && [ "$(cat "$T/stderr")" = "attnrun: $T/idx.h5: already holds results at /l0;\
 use --force to replace it" ]; then ok "append to a group that exists: --force named"
else bad "append existing: exit $rc $(cat "$T/stderr")"; fi

# ------------------------------------------------------------------ MPI
if [ -z "$ATTNRUN_MPI" ]; then
    skip "mpi: ATTNRUN_MPI not given (make MPI=1 test gives it)"
elif [ ! -x "$ATTNRUN_MPI" ] || ! command -v mpirun >/dev/null 2>&1; then
    bad "mpi: $ATTNRUN_MPI or mpirun not found"
else
    for args in "--heads 4|weights=$R/causal/weights,output=$R/causal/output|4" \
                "--preset torch-mha --heads 4|weights=$R/mha/weights|0" \
                "--preset torch-mha --heads 4 --causal --mask allpad|output=$R/causal/output|4"; do
        IFS='|' read -r opts list status <<<"$args"
        rm -f "$T/m1.h5" "$T/m2.h5"
        timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$IN" -o "$T/m1.h5" $opts --expect "$list" \
            2>"$T/serial" >/dev/null
        timeout -s KILL "$TIME_LIMIT" mpirun --allow-run-as-root --oversubscribe -n 3 \
            "$ATTNRUN_MPI" "$IN" -o "$T/m2.h5" $opts --expect "$list" 2>"$T/mpi.raw" >/dev/null
        rc=$?
        grep '^attnrun: ' "$T/mpi.raw" >"$T/mpi"
        if [ "$rc" -eq "$status" ] && cmp -s "$T/serial" "$T/mpi"; then
            ok "mpi $opts: exit $status, the serial run's lines"
        else
            bad "mpi $opts: exit $rc; $(tr '\n' '|' <"$T/mpi") against $(tr '\n' '|' <"$T/serial")"
        fi
    done
fi

finish
