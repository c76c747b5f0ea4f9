#!/usr/bin/env bash
# tests/cli/test_heads.sh - attnrun heads: the census of every head of every
# layer of a results file.
#   * every CSV field and every dataset of the census file against
#     tests/ref/heads_ref.py's float64 reference, computed from the weights
#     and tokens read back with h5py: an --append index of three layers
#     (causal with a key mask that leaves a query no key, GQA, tokens per
#     item and shared, a layer without tokens, f16 weights), an index whose
#     layers all have tokens (cross-attention with n > m, tokens that never
#     repeat), a plain run of a rank-2 X (group /), a plain file with two
#     groups of results (one without weights), weights holding a NaN,
#     --groups in another order;
#   * three heads built by hand from their definitions (induction,
#     previous-token, uniform) against the scores the construction
#     predicts, worked out by hand in heads_ref.py;
#   * memory: 1 GiB of weights (B = 256) within 600 MiB of address space;
#   * the census file: shapes, axes and their dimension scales, layer_group,
#     attributes; duplicate and induction only when every layer has tokens;
#   * refusals: exit status, one `attnrun: ` line, no file and no temporary
#     left; --force replaces; a failed write leaves nothing; --help;
#   * with FAULT_ATTNRUN: each allocation failing in turn ends with exit 1.
# Expected numbers come from heads_ref.py, never from attnrun's output.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_heads.sh     # from the repository root
#
# Environment: ATTNRUN (default build/attnrun), FAULT_ATTNRUN (optional),
# PYTHON (a python with numpy and h5py; default /usr/bin/python3),
# TIME_LIMIT (hang guard of one run in seconds, default 60).
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "heads: N passed, M failed"; the exit status is 1 when M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-60}

SUITE="heads"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, heads_ref.py
TOP=$(dirname "$TESTS")
. "$TESTS/lib/checks.sh"

suite_setup heads numpy h5py
self_check heads_ref.py
if ! ref heads_ref.py make "$T" >"$T/make.log" 2>&1; then
    bad "setup: cannot write the inputs: $(tail -n 2 "$T/make.log" | tr '\n' ' ')"
    finish
fi
VERSION=$("$ATTNRUN" --version | sed -n 's/^attnrun //p')

# made NAME ARGS...: a run of attnrun that makes a results file succeeds.
made() {
    local name=$1
    shift
    run "$@" -q
    [ "$rc" -eq 0 ] || bad "setup: $name: exit $rc: $(head -c 300 "$T/stderr")"
}

# census NAME CSV ARGS...: attnrun heads ARGS exits 0, silent on stderr;
# its standard output kept as CSV.
census() {
    local name=$1 out=$2 why
    shift 2
    run heads "$@"
    why=$(run_problem "$rc" 0 "$T/stderr")
    [ -z "$why" ] && [ -s "$T/stderr" ] && why="stderr: $(head -c 300 "$T/stderr")"
    cp "$T/stdout" "$out"
    if [ -z "$why" ]; then ok "$name: exit 0"; else bad "$name: $why"; fi
}

# ----------------------------------------------------------- results files

R=$T/results
mkdir "$R"
S=$T/in_self.h5
# mixed.h5: three layers; the third without tokens, stored as f16
made "layer0" "$S" -o "$R/mixed.h5" --append --group /layer0 --heads 4 --causal --mask mask \
    --tokens tok --save weights
made "layer1" "$S" -o "$R/mixed.h5" --append --group /layer1 --heads 4 --mask mask --tokens tok1 \
    --save weights,output
made "layer2" "$S" -o "$R/mixed.h5" --append --group /layer2 --heads 4 --causal --store f16 \
    --save weights
# tokens.h5: every layer with tokens; cross-attention n = 7 > m = 4, and
# tokens that never repeat
made "cross" "$T/in_cross.h5" -o "$R/tokens.h5" --append --group /model/cross --heads 4 --kv Y \
    --tokens qt --kv-tokens kt --causal --save weights
made "distinct" "$S" -o "$R/tokens.h5" --append --group /model/distinct --heads 4 --causal \
    --tokens distinct --save weights,entropy
# plain.h5: one run of a rank-2 X, its results at /
made "plain" "$T/in_rank2.h5" -o "$R/plain.h5" --heads 4 --causal --tokens tok --save weights
# multi.h5: a plain file with two groups of results, one of them without weights
cp "$S" "$R/multi.h5"
made "multi /zeta" "$R/multi.h5" --in-place --group /zeta --heads 4 --save weights
made "multi /alpha" "$R/multi.h5" --in-place --group /alpha --heads 4 --save output
expect "the masked layer has a query that sees no key" ref heads_ref.py masked "$R/mixed.h5" /layer0

# ----------------------------------------------------------- the census against the reference

C=$T/csv
mkdir "$C"
census "three layers of an index" "$C/mixed.csv" "$R/mixed.h5"
expect "three layers: every CSV field" ref heads_ref.py csv "$R/mixed.h5" "$C/mixed.csv" \
    /layer0 /layer1 /layer2
census "three layers, -o" "$C/mixed_o.csv" "$R/mixed.h5" -o "$T/mixed_census.h5"
expect "three layers, -o: the same CSV" cmp "$C/mixed.csv" "$C/mixed_o.csv"
expect "three layers: the census file (no token scores: a layer has no tokens)" \
    ref heads_ref.py census "$R/mixed.h5" "$T/mixed_census.h5" "$VERSION" /layer0 /layer1 /layer2
census "--groups /layer2,/layer0" "$C/order.csv" "$R/mixed.h5" --groups /layer2,/layer0
expect "--groups: the layers in the order given" ref heads_ref.py csv "$R/mixed.h5" \
    "$C/order.csv" /layer2 /layer0
census "--groups /layer1, -o" "$C/one.csv" "$R/mixed.h5" --groups /layer1 -o "$T/one_census.h5"
expect "--groups /layer1: the census file with the token scores" \
    ref heads_ref.py census "$R/mixed.h5" "$T/one_census.h5" "$VERSION" /layer1
census "every layer with tokens" "$C/tokens.csv" "$R/tokens.h5" -o "$T/tokens_census.h5"
expect "every layer with tokens: every CSV field" ref heads_ref.py csv "$R/tokens.h5" \
    "$C/tokens.csv" /model/cross /model/distinct
expect "every layer with tokens: the census file" \
    ref heads_ref.py census "$R/tokens.h5" "$T/tokens_census.h5" "$VERSION" /model/cross \
    /model/distinct
if grep -q '^/model/distinct,[0-9]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,,$' "$C/tokens.csv" &&
    [ "$(grep -c '^/layer2,.*,,$' "$C/mixed.csv")" -eq 4 ]; then
    ok "empty fields: tokens that never repeat, a layer without tokens"
else
    bad "empty fields: $(grep -E '^/(model/distinct|layer2),' "$C/tokens.csv" "$C/mixed.csv" | head -n 2)"
fi
census "a plain run (group /, weights (H, n, m))" "$C/plain.csv" "$R/plain.h5" -o "$T/plain_census.h5"
expect "a plain run: every CSV field" ref heads_ref.py csv "$R/plain.h5" "$C/plain.csv" /
expect "a plain run: the census file" ref heads_ref.py census "$R/plain.h5" "$T/plain_census.h5" \
    "$VERSION" /
census "a plain file of two groups, one without weights" "$C/multi.csv" "$R/multi.h5"
expect "a plain file of two groups: the one with weights" ref heads_ref.py csv "$R/multi.h5" \
    "$C/multi.csv" /zeta
census "a group named a,\"b\"" "$C/quoted.csv" "$T/quoted.h5"
expect "a group named a,\"b\": quoted in the CSV" ref heads_ref.py csv "$T/quoted.h5" \
    "$C/quoted.csv" '/a,"b"'
census "weights holding a NaN" "$C/nan.csv" "$T/odd.h5" --groups /nan
expect "weights holding a NaN: nan fields, the masked row left out" ref heads_ref.py csv \
    "$T/odd.h5" "$C/nan.csv" /nan
if grep -q '^layer,head,entropy,distance,first,previous,self,duplicate,induction$' "$C/mixed.csv" &&
    [ "$(head -n 1 "$C/mixed.csv")" = "layer,head,entropy,distance,first,previous,self,duplicate,induction" ]; then
    ok "the CSV header, exactly"
else
    bad "the CSV header: $(head -n 1 "$C/mixed.csv")"
fi

# ----------------------------------------------------------- heads built by hand

census "constructed heads (a file written by hand, weights at /)" "$C/constructed.csv" \
    "$T/induction.h5" -o "$T/constructed_census.h5"
expect "constructed heads: induction 1, previous 1, the uniform head's closed forms" \
    ref heads_ref.py constructed "$C/constructed.csv" "$T/constructed_census.h5"
expect "constructed heads: every CSV field against the reference too" \
    ref heads_ref.py csv "$T/induction.h5" "$C/constructed.csv" /

# ----------------------------------------------------------- memory

if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then         # ASan reserves terabytes of address space
    census "1 GiB of weights (B = 256)" "$C/huge.csv" "$T/huge.h5"
else
    (
        ulimit -v $((600 * 1024))
        export OPENBLAS_NUM_THREADS=1
        timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" heads "$T/huge.h5" </dev/null >"$C/huge.csv" \
            2>"$T/stderr"
    )
    rc=$?
    why=$(run_problem "$rc" 0 "$T/stderr")
    if [ -z "$why" ]; then ok "1 GiB of weights (B = 256) within 600 MiB of address space"
    else bad "1 GiB of weights within 600 MiB: $why"; fi
fi
expect "1 GiB of uniform rows: their closed form" ref heads_ref.py uniform "$C/huge.csv"

# ----------------------------------------------------------- refusals

E=$T/errors
mkdir "$E"
mkdir "$E/dir.h5"
printf 'not HDF5\n' >"$E/text.h5"
made "a layer without weights" "$S" -o "$R/noweights.h5" --append --group /a --heads 4 --save weights
made "a layer without weights" "$S" -o "$R/noweights.h5" --append --group /b --heads 4 --save output
made "a layer of 2 heads" "$T/in_two.h5" -o "$R/twoheads.h5" --append --group /four --heads 4 \
    --save weights
made "a layer of 2 heads" "$T/in_two.h5" -o "$R/twoheads.h5" --append --group /two --heads 2 \
    --save weights
O=$E/census.h5
M=$R/mixed.h5
refuse "missing file" 3 "missing.h5" heads "$E/missing.h5" -o "$O"
refuse "not an HDF5 file" 3 "not an HDF5 file" heads "$E/text.h5" -o "$O"
refuse "an input file (no results)" 3 "--save weights" heads "$TOP/fixtures/toy.h5" -o "$O"
refuse "an index's layer without weights" 3 "group /b holds no weights; run attnrun with --save weights" \
    heads "$R/noweights.h5" -o "$O"
refuse "a plain file's results without weights" 3 "--save weights" heads "$R/multi.h5" \
    --groups /alpha -o "$O"
refuse "a missing group names those there are" 3 "the index's groups are /layer0, /layer1, /layer2" \
    heads "$M" --groups /layer0,/nope -o "$O"
refuse "layers with different numbers of heads" 3 "group /two has 2 heads, group /four has 4" \
    heads "$R/twoheads.h5" -o "$O"
refuse "weights of rank 2" 3 "shape (5, 7)" heads "$T/odd.h5" --groups /flat -o "$O"
refuse "integer weights" 3 "floating-point" heads "$T/odd.h5" --groups /ints -o "$O"
refuse "tokens of another length" 3 "query_token" heads "$T/odd.h5" --groups /badtok -o "$O"
refuse "no results file" 2 "no results file" heads -o "$O"
refuse "two results files" 2 "one results file" heads "$M" "$M"
for groups in '' layer0 /a,,/b /a, ,/a /a,/a; do
    refuse "--groups '$groups'" 2 "--groups" heads "$M" --groups "$groups" -o "$O"
done
refuse "unknown option" 2 "--bogus" heads "$M" --bogus
refuse "--force without -o" 2 "--force" heads "$M" --force
refuse "-o the results file itself" 2 "names the results file itself" heads "$M" -o "$M"
refuse "-o ''" 2 "-o ''" heads "$M" -o ''
refuse "a directory's name without --force" 2 "exists" heads "$M" -o "$E/dir.h5"
refuse "a directory's name with --force" 2 "not a regular file" heads "$M" -o "$E/dir.h5" --force
refuse "a missing directory" 1 "$E/none" heads "$M" -o "$E/none/census.h5"
before=$(ls -A "$E" | tr '\n' ' ')
# one KiB is room for a census of one head: a census of 4 heads, 3 layers
# and its scales does not fit
(
    ulimit -f 1
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" heads "$M" -o "$O" -q </dev/null >"$T/stdout" \
        2>"$T/stderr"
)
rc=$?
why=$(run_problem "$rc" 1 "$T/stderr")
[ -z "$why" ] && [ "$(ls -A "$E" | tr '\n' ' ')" != "$before" ] && why="left $(ls -A "$E" | tr '\n' ' ')"
if [ -z "$why" ]; then ok "a failed write (ulimit -f 1): exit 1, nothing left"; else bad "a failed write: $why"; fi

# --force: a census is replaced; without it the file stays as it was.
printf 'old\n' >"$E/old.h5"
refuse "an existing file without --force" 2 "use --force" heads "$M" -o "$E/old.h5"
if [ "$(cat "$E/old.h5")" = "old" ]; then ok "the existing file is unchanged"; else bad "the existing file changed"; fi
census "the census of the layers" "$C/plain.csv" "$M"
# --force replaces a census attnrun wrote, and nothing else: not a file
# of another kind, nor a results file (the input's own, or another)
refuse "--force over a file attnrun did not write" 2 "not a census file" \
    heads "$M" -o "$E/old.h5" --force
if [ "$(cat "$E/old.h5")" = "old" ]; then ok "... which is unchanged"; else bad "the foreign file changed"; fi
cp "$M" "$E/results-copy.h5"
refuse "--force over a results file" 2 "not a census file" heads "$M" -o "$E/results-copy.h5" --force
if cmp -s "$M" "$E/results-copy.h5"; then ok "... which is unchanged"; else bad "the results file changed"; fi
census "a census to replace" "$C/first.csv" "$M" -o "$E/old.h5.new"
mv "$E/old.h5.new" "$E/old.h5"
census "--force replaces a census" "$C/force.csv" "$M" -o "$E/old.h5" --force --quiet
if [ -s "$C/force.csv" ] && cmp -s "$C/force.csv" "$C/plain.csv"; then ok "--quiet: the CSV all the same"; else bad "--quiet changed the CSV: $(head -c 100 "$C/force.csv")"; fi
expect "the replaced file is the census" ref heads_ref.py census "$M" "$E/old.h5" "$VERSION" \
    /layer0 /layer1 /layer2
if [ -z "$(find "$T" -name '*attnrun-tmp*')" ]; then ok "no temporary anywhere"; else bad "temporaries left: $(find "$T" -name '*attnrun-tmp*')"; fi

# --help
run heads --help
if [ "$rc" -eq 0 ] && grep -q '^Usage: attnrun heads' "$T/stdout" && [ ! -s "$T/stderr" ] &&
    grep -q '^  layer,head,entropy,distance,first,previous,self,duplicate,induction$' "$T/stdout" &&
    [ "$(grep -cE '^  (entropy|distance|first|previous|self|duplicate|induction) +[^ ]' "$T/stdout")" -eq 7 ]; then
    ok "heads --help: usage with every score on stdout, exit 0"
else
    bad "heads --help: exit $rc, $(head -c 200 "$T/stdout")"
fi
if "$ATTNRUN" heads --help >/dev/full 2>"$T/stderr"; then
    bad "heads --help into a full device succeeded"
else
    ok "heads --help into a full device: exit $?"
fi
if "$ATTNRUN" heads "$M" >/dev/full 2>"$T/stderr"; then
    bad "the CSV into a full device succeeded"
elif grep -q 'cannot write to standard output' "$T/stderr"; then
    ok "the CSV into a full device: exit 1, said"
else
    bad "the CSV into a full device: $(head -c 200 "$T/stderr")"
fi

# ------------------------------------------------------ allocation failures

if [ -n "${FAULT_ATTNRUN:-}" ] && [ -x "$FAULT_ATTNRUN" ]; then
    export ASAN_OPTIONS=$FAULT_ASAN_OPTIONS
    alloc_sweep "heads" 400 "$R/plain.h5" heads IN -o OUT.h5
    alloc_sweep "heads, constructed" 400 "$T/induction.h5" heads IN -o OUT.h5
else
    echo "    (no FAULT_ATTNRUN: the allocation-failure sweep is skipped)"
fi

finish
