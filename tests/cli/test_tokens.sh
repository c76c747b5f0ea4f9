#!/usr/bin/env bash
# tests/cli/test_tokens.sh - --tokens and --kv-tokens (docs/outputs.md,
# "Tokens"):
#   * sources: string datasets (n) and (B, n), variable and fixed length,
#     null- and space-padded, ASCII and UTF-8 ("Ġthe", "日本", emoji), in
#     groups, and string-array attributes (OBJECT@ATTR, @ATTR for the
#     root); looked up from the root, not under --weights-group;
#   * the output: query_token and key_token, variable-length UTF-8,
#     attached to the dimension scales (batch, query / key), named in the
#     `coordinates` of every result along their axes; read back with h5py,
#     xarray (engines netcdf4 and h5netcdf) and ncdump -h;
#   * cross-attention: tokens label the queries only, unless --kv-tokens;
#   * more tokens than one read takes (4096): whole rows and parts of one
#     row, variable and fixed length; --batch-slice and --memory runs give
#     the same token datasets; --in-place, and --force over attnrun's own;
#   * every refusal: exit 3 (2 for usage), one line naming the problem, no
#     output file, the input unchanged; checked before any output exists
#     (--dry-run refuses too);
#   * with FAULT_ATTNRUN: every allocation of a tokens run failing in turn
#     ends with exit 1 and one line, nothing left, no sanitizer report.
# Expected tokens are the strings the fixtures were written with.  About
# 60 runs (plus the allocation sweep), ~15 s on two cores.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_tokens.sh     # from the repository root
#
# Environment:
#   ATTNRUN        the binary under test (default: build/attnrun)
#   FAULT_ATTNRUN  the fault-injection build (make builds build/fault/attnrun);
#                  the allocation sweep is skipped without it
#   PYTHON         a python with numpy, h5py, xarray, h5netcdf and netCDF4
#                  (default /usr/bin/python3)
#   NCDUMP         default ncdump (Debian: netcdf-bin)
#   TIME_LIMIT     hang guard of one run in seconds (default 30)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "tokens: N passed, M failed"; the exit status is 1 when M > 0.
set -u

FAULT_ATTNRUN=${FAULT_ATTNRUN:-}
NCDUMP=${NCDUMP:-ncdump}
TIME_LIMIT=${TIME_LIMIT:-30}

SUITE="tokens"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"

suite_setup tokens numpy h5py xarray h5netcdf netCDF4
if ! command -v "$NCDUMP" >/dev/null 2>&1; then
    bad "setup: $NCDUMP not found (Debian: netcdf-bin)"
    finish
fi
case $FAULT_ATTNRUN in
    ""|/*) ;;
    *) FAULT_ATTNRUN=$PWD/$FAULT_ATTNRUN ;;
esac

# ------------------------------------------------------------- the inputs

# tokens_cases COMMAND ARGS...: tests/ref/tokens_cases.py -- the fixtures
# and the table of runs (make), the checks of the finished runs (verify).
tokens_cases() { "$PY" "$TESTS/ref/tokens_cases.py" "$@"; }

. "$TESTS/lib/run_table.sh"            # make_table
make_table tokens_cases.py

# ------------------------------------------------------------ the runs

# Each run writes into an empty directory of its own; a refusal must leave
# it empty (no output, no temporary) and an --in-place input unchanged.
: >"$T/done.tsv"
while IFS=$'\t' read -r -u 3 name fix mode status phrase args; do
    read -r -a argv <<<"$args"
    dir=$T/o/$name
    mkdir -p "$dir"
    if [ "$mode" = inplace ]; then
        out=$T/o/$name.in.h5
        cp "$T/c/$fix.h5" "$out"
        before=$(sha256sum <"$out")
        where=("$out" --in-place)
    else
        out=$dir/out.h5
        where=("$T/c/$fix.h5" -o "$out")
        [[ " $args " = *" --dry-run "* ]] && where=("$T/c/$fix.h5")
    fi
    # an empty value ("--tokens ''") does not survive the word split
    [ "$name" = refuse_empty ] && argv+=("")
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "${where[@]}" "${argv[@]}" \
        </dev/null >"$dir.stdout" 2>"$dir.stderr"
    rc=$?
    problem=$(run_problem "$rc" "$status" "$dir.stderr")
    if [ -n "$problem" ]; then
        bad "run $name: attnrun $fix.h5 ${where[*]:1} $args: $problem"
    elif [ "$status" -ne 0 ]; then
        if ! grep -qF -- "$phrase" "$dir.stderr"; then
            bad "run $name: the message does not say '$phrase': $(head -c 300 "$dir.stderr")"
        elif [ -n "$(ls -A "$dir")" ]; then
            bad "run $name: refused, but left $(ls -A "$dir" | tr '\n' ' ')"
        elif [ "$mode" = inplace ] && [ "$(sha256sum <"$out")" != "$before" ]; then
            bad "run $name: refused, but the --in-place input changed"
        elif [ "$mode" = inplace ] && [ -n "$(find "$T/o" -maxdepth 1 -name '*attnrun-tmp*')" ]; then
            bad "run $name: refused, but left a temporary next to the input"
        else
            ok "run $name: exit $status, '$(head -c 120 "$dir.stderr" | sed 's/^attnrun: [^:]*: //')'"
        fi
    elif [[ " $args " = *" --dry-run "* ]]; then
        [ -z "$(ls -A "$dir")" ] && ok "run $name: --dry-run with tokens exits 0 and writes nothing" ||
            bad "run $name: --dry-run wrote $(ls -A "$dir")"
    else
        printf '%s\t%s\n' "$name" "$out" >>"$T/done.tsv"
    fi
done 3<"$T/c/runs.tsv"

# --in-place twice: a second run adding other results must not replace the
# first one's tokens without --force; with it, it does (and the input of
# the refused run stays as it was).
ip=$T/o/inplace.in.h5
if [ -f "$ip" ]; then
    cp "$ip" "$T/o/twice.in.h5"
    before=$(sha256sum <"$T/o/twice.in.h5")
    "$ATTNRUN" -q "$T/o/twice.in.h5" --in-place -H 2 --group /r --tokens tok1 --save heads \
        </dev/null >/dev/null 2>"$T/o/twice.stderr"
    rc=$?
    problem=$(run_problem "$rc" 2 "$T/o/twice.stderr")
    if [ -n "$problem" ]; then
        bad "--in-place over earlier tokens without --force: $problem"
    elif ! grep -qF "already has an object named 'query_token'; use --force" "$T/o/twice.stderr"; then
        bad "--in-place over earlier tokens without --force: $(head -c 300 "$T/o/twice.stderr")"
    elif [ "$(sha256sum <"$T/o/twice.in.h5")" != "$before" ]; then
        bad "--in-place over earlier tokens without --force: the input changed"
    else
        ok "--in-place over earlier tokens without --force: exit 2, input unchanged"
    fi
    if "$ATTNRUN" -q "$T/o/twice.in.h5" --in-place -H 2 --group /r --tokens tok1 --save heads \
        --force </dev/null >/dev/null 2>"$T/o/twice.stderr"; then
        printf '%s\t%s\n' inplace_force "$T/o/twice.in.h5" >>"$T/done.tsv"
    else
        bad "--in-place --force over earlier tokens: $(head -c 300 "$T/o/twice.stderr")"
    fi
fi

# ------------------------------------------------------------ the checks


tokens_cases verify "$T/c" "$T/done.tsv" "$NCDUMP" >"$T/verify.log" 2>&1
report_verdicts "$T/verify.log" $?

# ------------------------------------------------------------ allocation failures

# FAULT_ATTNRUN's Nth allocation fails (ATTN_FAIL_ALLOC=N), with ASan: every
# N until the run succeeds ends with exit 1 and one line, no file left.
# The run reads both kinds of source: a dataset and an attribute.
if [ -n "$FAULT_ATTNRUN" ] && [ -x "$FAULT_ATTNRUN" ]; then
    export ASAN_OPTIONS=$FAULT_ASAN_OPTIONS
    alloc_sweep "a tokens run (a dataset and an attribute)" 400 "$T/c/cross.h5" -q IN -o OUT.h5 \
        -H 2 --kv Y --tokens qt --kv-tokens Y@tokens --save weights
else
    echo "(no FAULT_ATTNRUN: the allocation sweep is skipped)"
fi

finish
