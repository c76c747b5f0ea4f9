#!/usr/bin/env bash
# tests/cli/test_sliding.sh - sliding keys (docs/running.md, "Steps"): a
# causal window run in blocks of query rows reads and projects each
# block's own rows of X and keeps only the k and v its window reaches, so
# that neither its memory nor its projections grow with the whole item;
# and it writes the bits the whole item's run does.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_sliding.sh    # from the repository root
#
# Environment:
#   ATTNRUN               the binary under test (default: build/attnrun)
#   PYTHON                a python with numpy and h5py (default /usr/bin/python3)
#   ATTN_TEST_SANITIZED   set (by `make test SANITIZE=...`): the resident
#                         memory is not checked
#
# Inputs (tests/ref/sliding_check.py, seeded numpy): small.h5, B = 2 of
# n = 1100 (four blocks of 256 rows and a short one), 4 heads over 2 K/V
# heads, biases, RoPE at positions with a jump, ALiBi and a key mask; a
# window of 100 keys (inside one block of rows) and of 300 (reaching back
# over a block boundary).  long.h5, one item of n = 32768 whose X, K and V
# take 96 MiB, under --memory 24M.
set -u

SUITE="sliding"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
ALLOWANCE=48                                # MiB, as docs/running.md states

suite_setup sliding numpy h5py
check() { PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/sliding_check.py" "$@"; }
memory() { PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/memory_check.py" "$@"; }
check inputs "$T" || { bad "setup: cannot write the inputs"; finish; }
cd "$T" || exit 1

SMALL=(small.h5 --heads 4 --kv-heads 2 --causal --rope 10000 --positions P --alibi --mask M)
MAPS=output,heads,q,weights
ONLINE=output,entropy,distance,argmax
for p in f32 f64; do
    for w in 100 300; do
        for save in "$MAPS" "$ONLINE"; do
            name="$p --window $w --save $save"
            run=("${SMALL[@]}" --precision "$p" --window "$w" --save "$save")
            "$ATTNRUN" "${run[@]}" --memory 1M -o s.h5 --dry-run --json >plan.json 2>&1
            expect "$name: blocks of rows slide their keys" check sliding plan.json
            "$ATTNRUN" -q "${run[@]}" --memory 1M -o s.h5 2>err.txt ||
                bad "$name: sliding run failed: $(head -c 300 err.txt)"
            ref=output
            [ "$save" = "$MAPS" ] && ref=output,weights,heads,q
            expect "$name: against the float64 reference" check reference small.h5 s.h5 "$w" "$ref"
            # the whole item in one step, and blocks of rows whose keys
            # cannot slide (k saved: written whole)
            "$ATTNRUN" -q "${run[@]}" -o whole.h5 2>err.txt ||
                bad "$name: whole run failed: $(head -c 300 err.txt)"
            expect "$name: bit for bit the whole item's run" check same "$save" s.h5 whole.h5
            "$ATTNRUN" "${run[@]}" --save "$save,k" --memory 1M -o k.h5 --dry-run --json \
                >plan.json 2>&1
            expect "$name: saving k, the keys do not slide" check whole plan.json
            "$ATTNRUN" -q "${run[@]}" --save "$save,k" --memory 1M -o k.h5 2>err.txt ||
                bad "$name: run with k failed: $(head -c 300 err.txt)"
            expect "$name: bit for bit the run whose keys do not slide" check same "$save" s.h5 k.h5
            rm -f s.h5 whole.h5 k.h5
        done
    done
done
"$ATTNRUN" -q "${SMALL[@]}" --window 300 --save "$ONLINE" --memory 1M --threads 1 -o one.h5 &&
    "$ATTNRUN" -q "${SMALL[@]}" --window 300 --save "$ONLINE" --memory 1M --threads 3 -o three.h5
expect "sliding on 1 and 3 threads: the same bits" check same "$ONLINE" one.h5 three.h5

# A fused weight with the heads interleaved, in torch.nn.Linear's layout
FUSED=(fused.h5 --heads 4 --wqkv W_QKV --bqkv B_QKV --qkv-split heads --layout linear --causal
       --window 50 --save output)
"$ATTNRUN" "${FUSED[@]}" --memory 1M -o s.h5 --dry-run --json >plan.json 2>&1
expect "fused, heads interleaved: blocks of rows slide their keys" check sliding plan.json
"$ATTNRUN" -q "${FUSED[@]}" --memory 1M -o s.h5 2>err.txt || bad "fused: $(head -c 300 err.txt)"
expect "fused, heads interleaved: against the float64 reference" check fused fused.h5 s.h5 50
"$ATTNRUN" -q "${FUSED[@]}" -o whole.h5 2>err.txt || bad "fused whole: $(head -c 300 err.txt)"
expect "fused, heads interleaved: bit for bit the whole item's run" check same output s.h5 whole.h5
rm -f s.h5 whole.h5

# One long item: under --memory 24M its steps slide and fit (its X, K and
# V alone take 96 MiB), its peak resident memory stays within the cap,
# the parameters and the allowance, and it writes what the whole run does.
LONG=(long.h5 --heads 4 --causal --window 256 --save output)
"$ATTNRUN" "${LONG[@]}" --memory 24M -o s.h5 --dry-run --json >plan.json 2>&1
expect "long: the plan slides its keys" check sliding plan.json
expect "long: the plan holds no more than the cap" memory plan plan.json
"$ATTNRUN" "${LONG[@]}" --save output,v --memory 24M -o s.h5 --dry-run --json >plan.json 2>&1
expect "long saving v: the least step is over the cap (whole K and V)" check over plan.json
limit=$(( 24 + $(memory parameters long.h5 f32) / 1048576 + 1 + ALLOWANCE ))
if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then
    expect "long: runs (sanitized build: resident memory not checked)" \
        memory rss 0 120 "$ATTNRUN" -q "${LONG[@]}" --memory 24M -o s.h5
else
    expect "long: peak resident memory within 24 MiB + parameters + $ALLOWANCE MiB" \
        memory rss "$limit" 120 "$ATTNRUN" -q "${LONG[@]}" --memory 24M -o s.h5
fi
"$ATTNRUN" -q "${LONG[@]}" -o whole.h5 2>err.txt || bad "long: whole run failed: $(head -c 300 err.txt)"
expect "long: bit for bit the whole item's run" check same output s.h5 whole.h5

finish
