#!/usr/bin/env bash
# tests/cli/test_summaries.sh - the summary outputs of `--save`: entropy,
# argmax, distance (B, H, n), mean (B, n, m) and result (B, n, H, d_model)
# (docs/outputs.md, "Summaries"), against the float64 numpy reference of
# tests/ref/summaries_ref.py (written from their definitions on top of
# tests/ref/models_ref.py, never from attnrun's output).
#
#   ATTNRUN=build/attnrun bash tests/cli/test_summaries.sh     # from the repository root
#
# Environment:
#   ATTNRUN               the binary under test (default: build/attnrun)
#   PYTHON                a python with numpy, h5py, xarray, h5netcdf (default /usr/bin/python3)
#   TIME_LIMIT            hang guard of one run in seconds (default 30)
#   ATTN_TEST_SANITIZED   set (by `make test SANITIZE=...`): the resident-memory
#                         bound of the long run is not checked
#
# Inputs are generated at test time with fixed seeds: rank-3 and rank-2 X,
# causal, a key-padding mask with fully masked rows, an attention bias of
# -inf (one head's row wholly hidden), sliding windows,
# --positions (one item with every position equal), GQA with RoPE,
# cross-attention (m != n) with and without --kv-positions, --layout linear,
# 3-D per-head weights, --preset gpt2, a NaN query row (--allow-nonfinite),
# crafted ties (d_model = 1, exact logits; the two equal maxima in
# different 512-key blocks of the online softmax), uniform attention
# (W_Q = 0: entropy log(q+1), argmax 0, distance q/2 by hand) and one long
# case (n = 1100: three key blocks, query rows in blocks under --memory 1K).
# Each runs with the summaries on the maps path (with scores/weights or
# mean saved) and on the online path (entropy,argmax,distance without maps),
# alone and mixed with the old outputs, in f32 and f64, under --memory 1K
# at --threads 1 and 2 and with --batch-slice 1, and with --store f16.
#
# Tolerances, float32 (float64: 1e-12 in place of 1e-5):
#   entropy   1e-5 * max(1, log m) absolute (the fixtures keep logits O(1..10))
#   distance  1e-5 * max(1, largest reference distance)
#   mean      1e-5 absolute (like weights)
#   result    1e-5 * max(1e-30, largest |result|); sum_h result + b_O against
#             the saved output: 1e-5 * max(|output|, |result|)
#   argmax    exact; a float32 run may only pick another key when its
#             float64 logit is within 1e-5 * max(1, |logits|) of the maximum
#             and not equal to it (none is expected; the crafted ties are
#             exact everywhere)
#   special rows exact: a query that sees no key has entropy 0, distance 0,
#   argmax -1 (and mean 0); a NaN row has entropy NaN, distance NaN, argmax -1.
# Row blocks, batch slices and thread counts must give the same bits, on
# each softmax path; the two paths agree within the tolerances with the
# same argmax.  The long run (B=1, n=16384, d_model 64, 4 heads,
# --save entropy,output) must stay under 1 GiB resident (GNU time's %M)
# and match the reference on a few rows computed alone.
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "summaries: N passed, M failed"; the exit status is 1 when M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-30}

SUITE="summaries"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, summaries_ref.py, models_ref.py
. "$TESTS/lib/checks.sh"

suite_setup summaries numpy h5py xarray h5netcdf

# ------------------------------------------------------ the reference itself

self_check summaries_ref.py

# ------------------------------------------------------- the inputs and runs

# The fixtures, the table of runs and their checks are in
# tests/ref/summaries_cases.py; run_table and verify_table in tests/lib/run_table.sh.
. "$TESTS/lib/run_table.sh"
run_table summaries_cases.py
[ "$RUN_TABLE_FAILED" -eq 0 ] && ok "every run ended with status 0"
verify_table summaries_cases.py

# ------------------------------------------------------------ --dry-run

# dry_has PLAN NAME SHAPE TYPE BYTES: the plan lists NAME with that shape,
# type and byte count.
dry_has() {
    grep -Eq "^ +$2 +\\($3\\) +$4 +$5 bytes" <<<"$1"
}
plan=$("$ATTNRUN" "$T/c/r3/in.h5" --heads 4 --save weights,entropy,argmax,distance,mean,result \
    --store f16 --dry-run 2>&1)
why=""
# r3: B=3, H=4, n=m=13, d_model=32; mean float16 (2 bytes), the rest 4
for row in "entropy|3, 4, 13|float32|624" "argmax|3, 4, 13|int32|624" \
           "distance|3, 4, 13|float32|624" "mean|3, 13, 13|float16|1014" \
           "result|3, 13, 4, 32|float32|19968"; do
    IFS='|' read -r name shape type bytes <<<"$row"
    dry_has "$plan" "$name" "$shape" "$type" "$bytes" || why="$why $name ($shape) $type $bytes;"
done
if [ -z "$why" ]; then
    ok "--dry-run lists entropy, argmax (int32), distance, mean (float16 under --store f16), result"
else
    bad "--dry-run does not list:$why"$'\n'"$plan"
fi
plan=$("$ATTNRUN" "$T/c/r2/in.h5" --heads 3 --save entropy,mean,result --dry-run 2>&1)
if dry_has "$plan" entropy "3, 11" float32 132 && dry_has "$plan" mean "11, 11" float32 484 &&
   dry_has "$plan" result "11, 3, 24" float32 3168; then
    ok "--dry-run of a rank-2 X: no batch axis on the summaries"
else
    bad "--dry-run of a rank-2 X:"$'\n'"$plan"
fi
plan=$("$ATTNRUN" "$T/c/long/in.h5" --heads 2 --save entropy,argmax,distance,output --dry-run 2>&1)
if grep -q '^softmax .*online' <<<"$plan"; then
    ok "--save entropy,argmax,distance,output plans the online softmax"
else
    bad "--save entropy,argmax,distance,output does not plan the online softmax:"$'\n'"$plan"
fi
plan=$("$ATTNRUN" "$T/c/long/in.h5" --heads 2 --save mean --dry-run 2>&1)
if grep -q '^softmax' <<<"$plan" && ! grep -q '^softmax .*online' <<<"$plan"; then
    ok "--save mean plans full rows (the maps path)"
else
    bad "--save mean: the plan's softmax line is not the maps path:"$'\n'"$plan"
fi
plan=$("$ATTNRUN" "$T/c/long/in.h5" --heads 2 --save mean,entropy --memory 1K --dry-run 2>&1)
if grep -q 'query rows in blocks' <<<"$plan"; then
    ok "--save mean --memory 1K on n = 1100 plans query rows in blocks"
else
    bad "--save mean --memory 1K on n = 1100: no row blocks in the plan:"$'\n'"$plan"
fi

# ------------------------------------------------------------ bad --save

for save in entropy,bogus entropies argmax,,mean "mean,result,Entropy"; do
    out=$T/o/bad.h5
    rm -f "$out"
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$T/c/r3/in.h5" --heads 4 -o "$out" \
        --save "$save" </dev/null >/dev/null 2>"$T/o/bad.err"
    rc=$?
    why=$(run_problem "$rc" 2 "$T/o/bad.err")
    [ -z "$why" ] && [ -e "$out" ] && why="OUT was left behind"
    if [ -z "$why" ]; then
        ok "--save $save: exit 2 ($(head -c 120 "$T/o/bad.err"))"
    else
        bad "--save $save: $why"
    fi
done

# ------------------------------------------------------------ n = 16384

# B=1, n=16384, d_model 64, 4 heads: --save entropy,output keeps no map
# (n^2 float32 per head would be 1 GiB each); checked on a few rows.
if PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/summaries_cases.py" long-input "$T/n16k.h5" 2>"$T/n16k.err"; then
    timeout -s KILL $((TIME_LIMIT * 10)) /usr/bin/time -f %M -o "$T/n16k.rss" \
        "$ATTNRUN" -q "$T/n16k.h5" -o "$T/n16k.out.h5" --heads 4 --save entropy,output \
        </dev/null >/dev/null 2>"$T/n16k.log"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        bad "n=16384 --save entropy,output: $(run_problem "$rc" 0 "$T/n16k.log")"
    else
        rss=$(tail -n 1 "$T/n16k.rss")
        if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then
            echo "    (sanitized build: resident memory ${rss} KiB not checked)"
        elif [ "$rss" -lt 1048576 ] 2>/dev/null; then
            ok "n=16384 --save entropy,output: max resident $((rss / 1024)) MiB < 1 GiB"
        else
            bad "n=16384 --save entropy,output: max resident ${rss} KiB, not under 1 GiB"
        fi
        PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/summaries_cases.py" long-check "$T/n16k.h5" \
            "$T/n16k.out.h5" >"$T/n16k.check" 2>&1
        report_verdicts "$T/n16k.check" $?
    fi
else
    bad "setup: the n=16384 input: $(tail -n 2 "$T/n16k.err")"
fi

finish
