#!/usr/bin/env bash
# tests/cli/test_store.sh - the stored form of the outputs:
#   * --store f16|bf16|f32|f64: the stored type of scores and weights only,
#     rounded once to nearest even from the computed value
#     (docs/outputs.md);
#   * masked tiles: chunks of the maps (256 x 256 along query and key) that
#     --causal / --window hide wholly are never written, and every reader
#     (h5py, h5dump, xarray) still sees -inf scores and 0 weights there;
#   * --compress N: shuffle + deflate on every output, the same bits as
#     --compress 0;
#   * --threads 1, 2, 4 and --memory row blocks: the same bits;
#   * the chunks as stored (read_direct_chunk): whole, the padding past the
#     dataset's end the fill.
# Inputs are generated at test time with fixed seeds: "big" (B=2, n=m=600,
# d_model=32, H=2: 3 x 3 tiles per map, partial at the edges), the same in
# HDF5's newest format for --in-place, "ovf" (scores beyond 65504 with
# --scale 1000), "small" (maps smaller than a tile), "rank2" (no batch
# axis), "cross" (--kv, n=300, m=700, causal top-left), "edge" (n=m=257),
# "flat" (compressible), "ties" / "ties32" (rounding ties, d_k = 1).
# About 65 runs, ~10 to 15 s on two cores.
# Every expected value comes from numpy: the float64 reference of
# tests/ref/models_ref.py, the roundings and tile counts of tests/ref/store_ref.py,
# or another run of attnrun whose equality docs/outputs.md or
# docs/running.md requires (the same computation stored another way, with
# other threads or compression).
#
#   ATTNRUN=build/attnrun bash tests/cli/test_store.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy, h5py, xarray and h5netcdf (default /usr/bin/python3)
#   H5DUMP      default h5dump
#   TIME_LIMIT  hang guard of one run in seconds (default 30)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "store: N passed, M failed"; the exit status is 1 when M > 0.
set -u

H5DUMP=${H5DUMP:-h5dump}
TIME_LIMIT=${TIME_LIMIT:-30}

SUITE="store"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, store_ref.py, models_ref.py
. "$TESTS/lib/checks.sh"

suite_setup store numpy h5py xarray h5netcdf
if ! command -v "$H5DUMP" >/dev/null 2>&1; then
    bad "setup: $H5DUMP not found (Debian: hdf5-tools)"
    finish
fi
export H5DUMP

self_check store_ref.py

# ------------------------------------------------------------- the inputs

# store_cases COMMAND ARGS...: tests/ref/store_cases.py -- the fixtures and
# the table of runs (make), the checks of the finished runs (verify) and
# the --dry-run input (dry-input).
store_cases() { PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/store_cases.py" "$@"; }

. "$TESTS/lib/run_table.sh"            # make_table
make_table store_cases.py

# ------------------------------------------------------------ the runs

: >"$T/done.tsv"
while IFS=$'\t' read -r -u 3 name fix mode args; do
    read -r -a argv <<<"$args"
    out=$T/o/$name.h5
    if [ "$mode" = inplace ]; then
        cp "$T/c/$fix.h5" "$out"
        timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$out" --in-place "${argv[@]}" \
            </dev/null >"$T/o/$name.log" 2>&1
    else
        timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$T/c/$fix.h5" -o "$out" "${argv[@]}" \
            </dev/null >"$T/o/$name.log" 2>&1
    fi
    rc=$?
    if [ "$rc" -ne 0 ] || [ ! -f "$out" ]; then
        how="-o OUT"
        [ "$mode" = inplace ] && how="--in-place"
        bad "run $name: attnrun $fix.h5 $how $args: $(run_problem "$rc" 0 "$T/o/$name.log")"
    else
        printf '%s\t%s\n' "$name" "$out" >>"$T/done.tsv"
    fi
done 3<"$T/c/runs.tsv"

# ------------------------------------------------------------ the checks


store_cases verify "$T/c" "$T/done.tsv" >"$T/verify.log" 2>&1
report_verdicts "$T/verify.log" $?

# ------------------------------------------------------------ --dry-run

# The bytes of the scores line of a plan: "  scores   (B, H, n, m)  type  N bytes ...".
plan_bytes() {
    awk '$1 == "scores" { for (i = 2; i < NF; i++) if ($(i + 1) == "bytes") { print $i; exit } }'
}
store_cases dry-input "$T/c/dry.h5" || bad "setup: cannot write the --dry-run input"
DENSE=$((1 * 2 * 1024 * 1024 * 4))
declare -A PLAN
for v in "dense:" "causal:--causal" "window:--causal --window 100" "f16:--causal --store f16"; do
    tag=${v%%:*}
    read -r -a argv <<<"${v#*:}"
    plan=$(timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" "$T/c/dry.h5" --heads 2 --dry-run "${argv[@]}" 2>"$T/dry.err")
    rc=$?
    PLAN[$tag]=$(plan_bytes <<<"$plan")
    if [ "$rc" -ne 0 ] || [ -z "${PLAN[$tag]}" ]; then
        bad "--dry-run ${v#*:}: $(run_problem "$rc" 0 "$T/dry.err") no scores bytes in: $(head -c 300 <<<"$plan")"
        PLAN[$tag]=""
    fi
done
if [ -n "${PLAN[causal]}" ]; then
    if [ "${PLAN[causal]}" -lt "$DENSE" ]; then
        ok "--dry-run --causal (1, 2, 1024, 1024): scores ${PLAN[causal]} bytes < dense $DENSE"
    else
        bad "--dry-run --causal (1, 2, 1024, 1024): scores ${PLAN[causal]} bytes, not below dense $DENSE"
    fi
fi
if [ -n "${PLAN[causal]}" ] && [ -n "${PLAN[window]}" ]; then
    if [ "${PLAN[window]}" -lt "${PLAN[causal]}" ]; then
        ok "--dry-run --causal --window 100: scores ${PLAN[window]} bytes < causal ${PLAN[causal]}"
    else
        bad "--dry-run --causal --window 100: scores ${PLAN[window]} bytes, not below causal ${PLAN[causal]}"
    fi
fi
if [ -n "${PLAN[causal]}" ] && [ -n "${PLAN[f16]}" ]; then
    if [ "${PLAN[f16]}" -lt "${PLAN[causal]}" ]; then
        ok "--dry-run --causal --store f16: scores ${PLAN[f16]} bytes < f32 ${PLAN[causal]}"
    else
        bad "--dry-run --causal --store f16: scores ${PLAN[f16]} bytes, not below f32 ${PLAN[causal]}"
    fi
fi

# ------------------------------------------------------------ usage errors

# exit 2, one "attnrun: " line, no OUT and no temporary left behind.  Only
# judged when the valid names were accepted (runs c32_s32 and c64_64):
# otherwise "unknown option --store" would pass them all.
STORE_ACCEPTED=1
grep -q '^c32_s32	' "$T/done.tsv" && grep -q '^c64_64	' "$T/done.tsv" || STORE_ACCEPTED=0
usage_error() {
    local what=$1 dir rc why
    shift
    if [ "$STORE_ACCEPTED" -eq 0 ]; then
        bad "usage error: $what: not checked: --store f32 / --precision f64 --store f64 were refused"
        return
    fi
    dir=$(mktemp -d "$T/usage.XXXXXX")
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$T/c/small.h5" --heads 4 -o "$dir/out.h5" "$@" \
        </dev/null >/dev/null 2>"$T/usage.err"
    rc=$?
    why=$(run_problem "$rc" 2 "$T/usage.err")
    if [ -z "$why" ] && [ -n "$(ls -A "$dir")" ]; then
        why="left behind: $(ls -A "$dir" | tr '\n' ' ')"
    fi
    if [ -z "$why" ]; then
        ok "usage error: $what ($(head -c 150 "$T/usage.err"))"
    else
        bad "usage error: $what: $why"
    fi
}
usage_error "--store f64 without --precision f64" --store f64
usage_error "--store f64 with --precision f32" --precision f32 --store f64
usage_error "--store f64 with --dry-run" --store f64 --dry-run
usage_error "--store f8 (unknown)" --store f8
usage_error "--store fp16 (unknown)" --store fp16
usage_error "--store bf16x (unknown)" --store bf16x
usage_error "--store '' (empty)" --store ''
usage_error "--store without a value" --store

finish
