#!/usr/bin/env bash
# tests/cli/test_fast.sh - the paths taken for speed give the same answers:
#   * --threads 1 and --threads 2 write bit-identical datasets;
#   * the online softmax (no maps saved) matches a float64 numpy reference
#     and the full path within the float32 tolerances;
#   * query rows in blocks (one item's maps larger than --memory) write
#     the same bits as the whole rows, and match the reference.
# The reference (tests/ref/fast_paths_check.py) is written from
# docs/contract.md §2, independently of attnrun.  Run from the repository
# root: ATTNRUN=build/attnrun bash tests/cli/test_fast.sh
set -u


SUITE="fast"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, fast_paths_check.py
. "$TESTS/lib/checks.sh"

suite_setup fast numpy h5py
tmp=$T

# fast_paths_check.py: the inputs, and the checks of outputs against each
# other (compare) and against float64 numpy (reference).
fast_check() { "$PY" "$TESTS/ref/fast_paths_check.py" "$@"; }
compare() { fast_check compare "$@"; }
reference() { fast_check reference "$@"; }

fast_check inputs "$tmp" || { bad "setup: cannot write the inputs"; finish; }

# run NAME ARGS...: attnrun into $tmp/NAME.h5, quietly.
run() {
    local name=$1
    shift
    if ! "$ATTNRUN" -q "$@" -o "$tmp/$name.h5" >"$tmp/$name.log" 2>&1; then
        bad "$name: attnrun $* failed: $(head -n 1 "$tmp/$name.log")"
        return 1
    fi
}

# check LABEL COMMAND...: ok when the command succeeds, else its message.
check() {
    local label=$1 why
    shift
    if why=$("$@" 2>&1); then
        ok "$label"
    else
        bad "$label: $why"
    fi
}

# threads_pair LABEL TAG A B ARGS...: attnrun ARGS at --threads A and at B
# (into TAG_tA.h5 and TAG_tB.h5), the two bit-identical.  Status 0 when
# both runs ended well, whatever the comparison found.
threads_pair() {
    local label=$1 tag=$2 a=$3 b=$4
    shift 4
    run "${tag}_t$a" "$@" --threads "$a" && run "${tag}_t$b" "$@" --threads "$b" || return 1
    check "$label: --threads $a and $b bit-identical" \
        compare "$tmp/${tag}_t$a.h5" "$tmp/${tag}_t$b.h5" exact
    return 0
}

# ---- the same bits for every thread count ---------------------------------
SELF=("$tmp/self.h5" --heads 4 --causal --mask pad)
CROSS=("$tmp/cross.h5" --heads 4 --kv mem)
for save in "scores,weights,heads,output,q,k,v" "output"; do
    tag=${save%%,*}
    threads_pair "self-attention --save $save" "self_$tag" 1 2 "${SELF[@]}" --save "$save"
    threads_pair "cross-attention --save $save" "cross_$tag" 1 2 "${CROSS[@]}" --save "$save"
done
# many small products at once: a BLAS that is not safe to call from several
# threads at a time shows here
threads_pair "1024 items of (32, 64)" many 1 2 "$tmp/many.h5" --heads 4 --save weights,output
# one slice of one item per step: the pipeline takes many steps
if threads_pair "--batch-slice 1" self_slices 1 3 "${SELF[@]}" --batch-slice 1; then
    # the step size follows the threads, so it must not change a bit:
    # every projection row goes through a full block of rows
    check "--batch-slice 1 and the whole batch in one slice: bit-identical" \
        compare "$tmp/self_slices_t1.h5" "$tmp/self_scores_t1.h5" exact
fi
if run self_slices_2 "${SELF[@]}" --batch-slice 2 --threads 2; then
    check "--batch-slice 2 and 1: bit-identical" \
        compare "$tmp/self_slices_2.h5" "$tmp/self_slices_t1.h5" exact
fi

# odd sizes, one item per slice: the second slot's buffers must still be
# aligned (the sanitizer build stops at a misaligned access)
for prec in f32 f64; do
    if run "odd_$prec" "$tmp/odd.h5" --heads 2 --causal --mask pad --batch-slice 1 --precision "$prec"; then
        check "odd sizes, --batch-slice 1, $prec: matches float64 numpy" \
            reference "$tmp/odd.h5" "$tmp/odd_$prec.h5" 2 1 pad -
    fi
done

# ---- online softmax against the reference and the full path ---------------
[ -f "$tmp/self_output_t1.h5" ] &&
    check "online softmax (causal, masked, an item with no key) matches float64 numpy" \
        reference "$tmp/self.h5" "$tmp/self_output_t1.h5" 4 1 pad -
[ -f "$tmp/self_scores_t1.h5" ] &&
    check "full path (causal, masked) matches float64 numpy" \
        reference "$tmp/self.h5" "$tmp/self_scores_t1.h5" 4 1 pad -
[ -f "$tmp/self_output_t1.h5" ] && [ -f "$tmp/self_scores_t1.h5" ] &&
    check "online and full paths agree within float32 tolerance" \
        compare "$tmp/self_output_t1.h5" "$tmp/self_scores_t1.h5" online
[ -f "$tmp/cross_output_t1.h5" ] &&
    check "online softmax with --kv (m = 700 keys: two key blocks) matches float64 numpy" \
        reference "$tmp/cross.h5" "$tmp/cross_output_t1.h5" 4 0 - mem

# ---- NaN with --allow-nonfinite: as weights . V written out ---------------
# A NaN in X reaches K and V, and through weight 0 (0 . NaN) every query of
# its item, in either path and whatever the blocks; the item whose keys are
# all masked keeps weights and heads 0.
NAN_RUN=("$tmp/nan.h5" --heads 2 --causal --mask pad --allow-nonfinite)
for save in "scores,weights,heads,output" "heads,output"; do
    tag=${save%%,*}
    threads_pair "NaN input, --save $save" "nan_$tag" 1 2 "${NAN_RUN[@]}" --save "$save" &&
        check "NaN input, --save $save: NaN exactly where float64 numpy has it" \
            reference "$tmp/nan.h5" "$tmp/nan_${tag}_t1.h5" 2 1 pad -
done

# An infinite value in the V of one K/V group only (GQA): each group's
# values are checked on their own, so a row that sees no key gets 0 . inf =
# NaN in that group's heads and exactly 0 in the other's.
for save in "weights,heads" "heads,output"; do
    if run "inf_group_${save%%,*}" "$tmp/inf_group.h5" --heads 4 --kv-heads 2 --mask pad \
        --allow-nonfinite --save "$save"; then
        check "an infinite V in K/V group 1 only, --save $save: NaN in that group's heads alone" \
            fast_check inf_group "$tmp/inf_group_${save%%,*}.h5"
    fi
done

# ---- query rows in blocks -------------------------------------------------
LONG=("$tmp/long.h5" --heads 2 --causal)
plan=$("$ATTNRUN" "${LONG[@]}" --memory 1K --dry-run 2>&1)
if grep -q 'query rows in blocks of 256' <<<"$plan"; then
    ok "--memory 1K on (1024, 1024) maps plans blocks of 256 query rows (one chunk each)"
else
    bad "--memory 1K: no row blocks of 256 in the plan:"$'\n'"$plan"
fi
if run long_blocks "${LONG[@]}" --memory 1K --threads 2 && run long_whole "${LONG[@]}" --threads 1; then
    check "row blocks and whole rows write bit-identical datasets" \
        compare "$tmp/long_blocks.h5" "$tmp/long_whole.h5" exact
    check "row blocks match float64 numpy" reference "$tmp/long.h5" "$tmp/long_blocks.h5" 2 1 - -
fi
if run long_online "${LONG[@]}" --save heads,output; then
    check "online softmax over n = 1024 causal keys (blocks of keys rescaled) matches float64 numpy" \
        reference "$tmp/long.h5" "$tmp/long_online.h5" 2 1 - -
fi

finish
