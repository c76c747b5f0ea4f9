#!/usr/bin/env bash
# tests/cli/test_blocks.sh - shapes that cross the blocks: every variant
# (RoPE with and without --positions, sliding window, ALiBi, GQA, biases and
# --attn-bias, QK-norm) and every summary (entropy, argmax, distance, mean,
# result, norms, value_norm) at sequence lengths n on both sides of
# attnrun's internal work blocks, on both softmax paths (the full rows when
# a map is saved, the online one when none is) and in --memory row blocks,
# against the float64 references of tests/ref/models_ref.py and
# tests/ref/summaries_ref.py (tests/ref/blocks_ref.py), never against
# attnrun's own output.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_blocks.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy and h5py (default: /usr/bin/python3)
#   TIME_LIMIT  hang guard of one run in seconds (default 30)
#
# The block sizes are read from the source the suite sits in, never
# copied: the #defines PROJECT_ROWS, QUERY_BLOCK, ONLINE_QUERY_BLOCK,
# KEY_BLOCK and MEAN_KEYS of lib/math/math.c and ATTN_MAP_TILE of
# include/attn/attn_plan.h (a missing one fails the suite).  The lengths
# are PROJECT_ROWS - 1, PROJECT_ROWS, PROJECT_ROWS + 1 and 2 PROJECT_ROWS +
# 1 (255, 256, 257, 513 today), with C + 1 added for any other block C
# that the longest of them does not cross.
#
# Five cases (tests/ref/blocks_ref.py: RoPE + QK-norm + GQA + biases;
# RoPE at --positions + ALiBi at them; ALiBi of 6 heads + GQA + a 4-D
# --attn-bias; --window --causal with RoPE at --positions and MQA; --window
# alone), each at each n, run with every output on the full rows (maps) and
# every output the online softmax allows (online); where n exceeds
# ATTN_MAP_TILE, both again with --batch-slice 1 (whole query rows) and
# under --memory 1K (query rows in blocks of one tile), and for the causal
# window once more with sliding keys.  Each run's --dry-run --json plan
# must say the path, the row blocks and the sliding keys meant; each output
# must match the reference within the other suites' tolerances; the runs of
# one path must be the same bits whatever the step (docs/contract.md,
# section 2).  Then keys a query cannot see add exactly nothing, and under
# a stand-in BLAS that computes a row by its place in the block
# (tests/lib/blas_by_place.c, preloaded; needs a C compiler) items grouped
# in blocks and an item longer than one write the same bits whatever the
# slices, row blocks and threads, for self- and cross-attention and the
# linear layout.  About 150 runs, 40 s on two cores.
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "blocks: N passed, M failed"; the exit status is 1 when M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-30}

SUITE="blocks"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, blocks_ref.py, models_ref.py
. "$TESTS/lib/checks.sh"

suite_setup blocks numpy h5py

# ------------------------------------------------------ the block sizes

# define FILE NAME: N of the line "#define NAME ((size_t)N)" (or "#define
# NAME N") of FILE, relative to the repository's root; nothing when FILE
# has no such line or more than one.
define() {
    local found
    found=$(sed -nE "s/^[[:space:]]*#[[:space:]]*define[[:space:]]+$2[[:space:]]+\(*(\(size_t\)[[:space:]]*)?([0-9]+)[uUlL]*\)*([[:space:]].*)?$/\2/p" \
        "$ROOT/$1" 2>/dev/null)
    [ "$(printf '%s\n' "$found" | grep -c .)" -eq 1 ] && echo "$found"
}

BLOCK_CONSTANTS=""
said=""
for source in lib/math/math.c:PROJECT_ROWS lib/math/math.c:QUERY_BLOCK \
              lib/math/math.c:ONLINE_QUERY_BLOCK lib/math/math.c:KEY_BLOCK \
              lib/math/math.c:MEAN_KEYS include/attn/attn_plan.h:ATTN_MAP_TILE; do
    file=${source%%:*} name=${source#*:}
    value=$(define "$file" "$name")
    if [ -z "$value" ] || [ "$value" -lt 2 ]; then
        bad "setup: no single '#define $name <size>' in $ROOT/$file: the suite cannot tell the blocks"
        finish
    fi
    printf -v "$name" '%s' "$value"
    BLOCK_CONSTANTS="$BLOCK_CONSTANTS $name=$value"
    said="$said $name=$value ($file)"
done
ns=($((PROJECT_ROWS - 1)) "$PROJECT_ROWS" $((PROJECT_ROWS + 1)) $((2 * PROJECT_ROWS + 1)))
for block in "$QUERY_BLOCK" "$ONLINE_QUERY_BLOCK" "$KEY_BLOCK" "$MEAN_KEYS" "$ATTN_MAP_TILE"; do
    [ "$block" -ge "${ns[-1]}" ] && ns+=($((block + 1)))
done
BLOCK_NS="${ns[*]}"
export BLOCK_CONSTANTS BLOCK_NS
ok "block sizes read from the source:$said; n = $BLOCK_NS"

# ------------------------------------------------------- the inputs and runs

# The fixtures and the table of runs: tests/ref/blocks_ref.py (make_table,
# verify_table: tests/lib/run_table.sh).  Each run is planned first
# (--dry-run --json, beside its output as OUT.plan.json), then run.
. "$TESTS/lib/run_table.sh"
make_table blocks_ref.py cases

: >"$T/done.tsv"
failed=0
while IFS=$'\t' read -r -u 3 case mode args; do
    read -r -a argv <<<"$args"
    out=$T/o/$case.$mode.h5
    in=$T/c/$case/in.h5
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$in" -o "$out" "${argv[@]}" --dry-run --json \
        </dev/null >"$out.plan.json" 2>"$T/o/$case.$mode.log"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        bad "$case $mode: attnrun IN -o OUT $args --dry-run --json: $(run_problem "$rc" 0 "$T/o/$case.$mode.log")"
        failed=$((failed + 1))
        continue
    fi
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$in" -o "$out" "${argv[@]}" \
        </dev/null >"$T/o/$case.$mode.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] || [ ! -f "$out" ]; then
        bad "$case $mode: attnrun IN -o OUT $args: $(run_problem "$rc" 0 "$T/o/$case.$mode.log")"
        failed=$((failed + 1))
    else
        printf '%s\t%s\t%s\t%s\n' "$case" "$mode" "$out" "$args" >>"$T/done.tsv"
    fi
done 3<"$T/c/runs.tsv"
[ "$failed" -eq 0 ] && ok "every run and its plan ended with status 0 ($(wc -l <"$T/done.tsv") runs)"

verify_table blocks_ref.py

# Keys a query cannot see add exactly nothing (tests/ref/unseen_keys.py):
# a window over tokens all 0 but the first, rows past the window exactly 0,
# on the online path within one key block, in f32 and f64.
ref unseen_keys.py make "$T/unseen.h5" 64 8
for precision in f32 f64; do
    run "$T/unseen.h5" -o "$T/unseen.$precision.h5" --heads 2 --causal --window 8 \
        --save heads,output --precision "$precision" -q
    if [ "$rc" -ne 0 ]; then
        bad "unseen keys, $precision: attnrun exited $rc: $(head -c 300 "$T/stderr")"
    else
        ref unseen_keys.py check "$T/unseen.$precision.h5" 8 >"$T/unseen.log"
        report_verdicts "$T/unseen.log" $?
    fi
done

# A key the mask hides past the first key block (KEY_BLOCK + 38 of
# KEY_BLOCK + 88): its logit overflows to +inf (a bias of float32's largest
# value, --scale 1e32) and must not count as an overflow on the online path,
# which adds the bias block by block.
ref unseen_keys.py masked-overflow "$T/masked.h5" $((KEY_BLOCK + 88)) $((KEY_BLOCK + 38))
run "$T/masked.h5" -o "$T/masked.out.h5" --heads 2 --mask keep --attn-bias AB --scale 1e32 \
    --save output -q
if [ "$rc" -eq 0 ]; then
    ok "a hidden key's overflowing logit past the first key block: exit 0"
else
    bad "a hidden key's overflowing logit past the first key block: exit $rc: $(head -c 300 "$T/stderr")"
fi

# ----------------------------------------- a BLAS that cares about places
# The same bits whatever the steps hold only because every projection row
# keeps its block and its place in it (the blocks of PROJECT_ROWS rows
# aligned on the batch).  A BLAS that computes a row by its place
# (tests/lib/blas_by_place.c, preloaded) makes a row put anywhere else
# change its bits on every machine, not only where OpenBLAS picks a kernel
# that does so (Haswell, Zen).  Items several to a block (n = 40, keys of
# --kv m = 26) and an item longer than one (n = 2 PROJECT_ROWS + 1, m = 2
# PROJECT_ROWS + 2), on both softmax paths, for causal self-attention, the
# linear layout and cross-attention (--kv, whose K and V rows have blocks
# of their own): the default run against --batch-slice 1 and 2, --memory
# 1K and --threads 1.  The stand-in moves every third row, so a row moved
# by a multiple of 3 places goes unseen: n and m are not multiples of 3.
build_by_place                          # BY_PLACE, by_place (checks.sh)
ref attention_inputs.py random "$T/grouped.h5" 5 40 32 3 --kv 26
ref attention_inputs.py random "$T/long.h5" 2 $((2 * PROJECT_ROWS + 1)) 16 4 --kv $((2 * PROJECT_ROWS + 2))
[ -n "$BY_PLACE" ] || finish
for input in grouped long; do
    for kind in "self:--causal" "linear:--layout linear --causal" "cross:--kv KV"; do
        read -r -a attention <<<"${kind#*:}"
        for path in maps:scores,weights,heads,output online:entropy,argmax,heads,output; do
            name="$input ${kind%%:*} ${path%%:*}" save=${path#*:}
            base=$T/place.$input.${kind%%:*}.${path%%:*}
            by_place run "$T/$input.h5" -o "$base.default.h5" --heads 4 "${attention[@]}" --save "$save" -q
            [ "$rc" -eq 0 ] || { bad "$name under blas_by_place: exit $rc: $(head -c 300 "$T/stderr")"; continue; }
            for way in "--batch-slice 1" "--batch-slice 2" "--memory 1K" "--threads 1"; do
                read -r -a extra <<<"$way"
                out=$base.${way// /_}.h5
                by_place run "$T/$input.h5" -o "$out" --heads 4 "${attention[@]}" --save "$save" -q "${extra[@]}"
                if [ "$rc" -ne 0 ]; then
                    bad "$name $way under blas_by_place: exit $rc: $(head -c 300 "$T/stderr")"
                elif why=$(ref same_file.py datasets "$base.default.h5" "$out" 2>&1); then
                    ok "$name under blas_by_place: $way writes the default run's bits"
                else
                    bad "$name under blas_by_place: $way differs from the default run: $why"
                fi
            done
        done
    done
done

finish
