#!/usr/bin/env bash
# tests/cli/test_memory.sh - --memory caps every path (docs/running.md,
# "Steps"): the peak resident memory of a run stays under the cap plus the
# layer's parameters plus ALLOWANCE (the program, its libraries, HDF5's
# caches, the threads' stacks and OpenBLAS's buffers), and the run writes
# the bits an unconstrained one does.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_memory.sh     # from the repository root
#
# Environment:
#   ATTNRUN               the binary under test (default: build/attnrun)
#   PYTHON                a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT            hang guard of one run in seconds (default 120)
#   ATTN_TEST_SANITIZED   set (by `make test SANITIZE=...`): the resident
#                         memory is not checked (the sanitizers' shadow
#                         memory is not attnrun's)
#
# Inputs (tests/ref/memory_check.py, seeded numpy): one long item, n = 4096,
# d_model 1024, 8 heads over 2 K/V heads (GQA); one long item with small
# maps (d_model 256, 2 heads); a large batch, B = 64 of n = 256, d_model
# 512, 8 heads, run on 8 threads so that the steps grow to the cap.  On
# each: --save result, --save output,entropy,distance,argmax (the online
# path and the summaries), --save mean and the default outputs (the maps),
# in f32 and f64, each under the smallest cap of 64M, 128M, 256M its least
# step fits in (the plan, --dry-run --json, must say its steps hold no more
# than the cap).  A run that held whole items' q, heads, output or result
# (what attnrun did before 1.6: 365 MiB for --save result under
# --memory 64M on the long item, 127 MiB for the online path) fails here.
# 48 runs, about a minute on two cores; the files run to 512 MiB.
#
# tags: serial quick-untimed -- it measures each run's peak resident memory
# against its cap, many runs of up to 256 MiB, 8 threads each (its quick
# case, one run under 64 MiB, runs beside other suites)
set -u

SUITE="memory"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, memory_check.py
. "$TESTS/lib/checks.sh"
TIME_LIMIT=${TIME_LIMIT:-120}
ALLOWANCE=48                                # MiB, as docs/running.md states

suite_setup memory numpy h5py
check() { PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/memory_check.py" "$@"; }
# (the quick tier's one case needs long.h5 alone)
check inputs "$T" ${QUICK:+long} || { bad "setup: cannot write the inputs"; finish; }

# capped NAME INPUT PRECISION CAP SLICE ARGS...: attnrun INPUT ARGS under
# --memory CAP: its plan within the cap, its peak resident memory within
# CAP + the parameters + ALLOWANCE, its outputs those of the unconstrained
# run of ARGS, whole query rows in slices of SLICE items (--batch-slice).
capped() {
    local name=$1 input=$2 precision=$3 cap=$4 slice=$5 params limit
    shift 5
    local run=("$T/$input.h5" --precision "$precision" "$@")
    if ! timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "${run[@]}" --batch-slice "$slice" \
            -o "$T/ref.h5" >"$T/ref.log" 2>&1; then
        bad "$name: the unconstrained run failed: $(head -c 300 "$T/ref.log")"
        return
    fi
    "$ATTNRUN" "${run[@]}" --memory "$cap" -o "$T/out.h5" --dry-run --json >"$T/plan.json" 2>&1
    expect "$name: the plan holds no more than the cap" check plan "$T/plan.json"
    params=$(check parameters "$T/$input.h5" "$precision")
    limit=$(( ${cap%M} + params / 1048576 + 1 + ALLOWANCE ))
    if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then
        expect "$name: runs (sanitized build: resident memory not checked)" \
            check rss 0 "$TIME_LIMIT" "$ATTNRUN" -q "${run[@]}" --memory "$cap" -o "$T/out.h5"
    else
        expect "$name: peak resident memory within $cap + parameters + $ALLOWANCE MiB" \
            check rss "$limit" "$TIME_LIMIT" "$ATTNRUN" -q "${run[@]}" --memory "$cap" \
            -o "$T/out.h5"
    fi
    [ -f "$T/out.h5" ] &&
        expect "$name: bit-identical to the unconstrained run" check same "$T/out.h5" "$T/ref.h5"
    rm -f "$T/out.h5" "$T/ref.h5"
}

ONLINE=output,entropy,distance,argmax
for p in f32 f64; do
    small=64M mid=128M
    [ "$p" = f64 ] && small=128M mid=256M

    # one long item: X, K and V whole, the rest by rows; the default
    # outputs (scores, weights, heads, output) on one with smaller maps
    capped "long $p --save result" long "$p" "$small" 1 --heads 8 --save result
    quick_done                      # the quick tier: this first case alone
    capped "long $p --save $ONLINE" long "$p" "$small" 1 --heads 8 --save "$ONLINE"
    capped "long $p --save mean" long "$p" "$mid" 1 --heads 8 --save mean
    capped "long $p, the default outputs" maps "$p" "$mid" 1 --heads 2

    # a large batch, steps grown to the cap by 8 threads
    for save in result "$ONLINE" mean; do
        capped "B=64 $p --save $save" wide "$p" "$small" 8 --heads 8 --threads 8 --save "$save"
    done
    capped "B=64 $p, the default outputs" wide "$p" "$mid" 8 --heads 8 --threads 8
done

finish
