#!/usr/bin/env bash
# tests/cli/test_plot.sh - attnrun plot (docs/pictures.md):
#   * the pictures, decoded by tests/ref/plot_check.py's own PNG reader: the
#     size the layout formulas give, the colour of every (pooled) cell
#     from docs/pictures.md's colour map and scale, cells as blocks of equal
#     pixels, the colour bar, the legend of -inf, +inf and NaN, heads and
#     items chosen, rank-3 maps, f16 / bf16 / f64 stored maps, entropy,
#     a group of an index of --append (its part read through the index);
#   * max-pooling: 2000 x 1100 by 4 x 3 (one high cell survives, -inf only
#     where a whole cell is), 16384 x 16384 by 32 x 32 under a 600 MiB
#     address-space limit (the map alone is 1 GiB);
#   * labels: item b's tokens, every k-th when they do not fit, indices
#     without tokens (tick marks counted in the pixels);
#   * SVG parsed as XML and PDF checked for its frame, from the same data;
#   * errors: the exit status of docs/pictures.md's table, one `attnrun: `
#     line, no file left behind (no picture, no temporary); --force
#     replaces a file or a symbolic link but never a directory; a failed
#     write (ulimit -f) leaves nothing; --help;
#   * with FAULT_ATTNRUN (make test): each allocation of attnrun's own
#     failing in turn ends with exit 1 and one line, and no file;
#   * README's picture (docs/images/toy-weights.png) shows the toy's weights;
#   * tests/ref/plot_views_check.py: --color linear, sqrt and log (every
#     cell, the bar's ticks, its title), zooms (--queries, --keys: unpooled
#     64 x 64 of 200 x 200 at the true indices, pooled from the zoom's
#     start, tokens and indices of the range), norms, mean, distance,
#     value_norm, rollout files (a panel per layer titled by layer_group)
#     and census files of attnrun heads (a grid and a bar per score, NaN,
#     absent grids), all written with h5py;
#   * the refusals of options that do not apply (exit 2), of zooms outside
#     the map (exit 3), of --color log over negative values (exit 2).
# About 110 runs, ~30 s on two cores.  Expected colours are computed from
# docs/pictures.md's control points in tests/ref/plot_check.py, never read
# from attnrun's output.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_plot.sh     # from the repository root
#
# Environment:
#   ATTNRUN        the binary under test (default: build/attnrun)
#   FAULT_ATTNRUN  the fault-injection build (optional: its sweep is skipped without)
#   PYTHON         a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT     hang guard of one run in seconds (default 60)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "plot: N passed, M failed"; the exit status is 1 when M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-60}

SUITE="plot"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, plot_check.py
TOP=$(dirname "$TESTS")
. "$TESTS/lib/checks.sh"

suite_setup plot numpy h5py
self_check plot_check.py
if ! "$PY" "$TESTS/ref/plot_check.py" make "$T" >"$T/make.log" 2>&1 ||
    ! PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/plot_views_check.py" make "$T" >>"$T/make.log" 2>&1; then
    bad "setup: cannot write the fixtures: $(tail -n 2 "$T/make.log" | tr '\n' ' ')"
    finish
fi

# ------------------------------------------------------------- pictures

K=$T/known.h5
runs "weights, item 1" 0 plot "$K" --item 1 -o "$T/known_w1.png"
runs "weights, item 0, head 1" 0 plot "$K" --heads 1 -o "$T/known_w0h1.png"
runs "scores, heads 2,0" 0 plot "$K" --what scores --heads 2,0 -o "$T/known_s.png"
runs "entropy, item 1, heads 0,2" 0 plot "$K" --what entropy --item 1 --heads 0,2-2 -o "$T/known_e.png"
runs "a group of an index of --append" 0 plot "$T/index.h5" --group /layer0 --what scores --heads 0,2 \
    -o "$T/index_s.png"
runs "entropy, 600 heads" 0 plot "$T/wide.h5" --what entropy --item 1 -o "$T/wide_e.png"
runs "SVG" 0 plot "$K" -o "$T/known.svg"
runs "PDF (extension in capitals)" 0 plot "$K" -o "$T/known.PDF"
mv "$T/known.PDF" "$T/known.pdf" 2>/dev/null
runs "scores all 1e20" 0 plot "$T/constant.h5" --what scores -o "$T/constant_s.png"
runs "rank-3 weights" 0 plot "$T/rank3.h5" --item 0 -o "$T/rank3_w.png"
runs "rank-3 f64 scores" 0 plot "$T/rank3.h5" --what scores -o "$T/rank3_s.png"
runs "rank-3 f16 entropy" 0 plot "$T/rank3.h5" --what entropy -o "$T/rank3_e.png"
for store in f16 bf16; do
    runs "toy with --store $store" 0 "$TOP/fixtures/toy.h5" -o "$T/toy_$store.h5" --heads 1 \
        --causal --store "$store" -q
    runs "plot --store $store scores" 0 plot "$T/toy_$store.h5" --what scores -o "$T/toy_$store.png"
done
runs "2000 x 1100 weights" 0 plot "$T/big.h5" -o "$T/big_w.png"
runs "2000 x 1100 scores" 0 plot "$T/big.h5" --what scores -o "$T/big_s.png"
if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then         # ASan reserves terabytes of address space
    runs "16384 x 16384 weights" 0 plot "$T/huge.h5" -o "$T/huge.png"
else
    (
        ulimit -v $((600 * 1024))
        export OPENBLAS_NUM_THREADS=1
        timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" plot "$T/huge.h5" -o "$T/huge.png" </dev/null \
            >"$T/stdout" 2>"$T/stderr"
    )
    rc=$?
    why=$(run_problem "$rc" 0 "$T/stderr")
    if [ -z "$why" ]; then ok "16384 x 16384 weights (1 GiB) within 600 MiB of address space"
    else bad "16384 x 16384 weights within 600 MiB: $why"; fi
fi
runs "tokens, item 0" 0 plot "$T/tokens.h5" -o "$T/tok0.png"
runs "tokens, item 1" 0 plot "$T/tokens.h5" --item 1 -o "$T/tok1.png"
runs "the same tokens, item 0" 0 plot "$T/tokens.h5" --group /same -o "$T/tok_same0.png"
runs "the same tokens, item 1" 0 plot "$T/tokens.h5" --group /same --item 1 -o "$T/tok_same1.png"
runs "100 tokens" 0 plot "$T/many.h5" -o "$T/many.png"
runs "100 indices" 0 plot "$T/many.h5" --group /plain/ -o "$T/many_plain.png"

# colour scales, zooms, other maps, rollout and census files
for colour in linear sqrt log; do
    runs "--color $colour" 0 plot "$T/scales.h5" --color "$colour" -o "$T/scales_$colour.png"
done
runs "--color log over nine decades" 0 plot "$T/scales.h5" --group /deep --color log -o "$T/scales_deep.png"
runs "--queries 100-163 --keys 37-100" 0 plot "$T/zoom.h5" --queries 100-163 --keys 37-100 -o "$T/zoom.png"
runs "--queries 600-1799 of 2000" 0 plot "$T/big.h5" --queries 600-1799 -o "$T/zoom_pooled.png"
runs "a zoom with tokens" 0 plot "$T/many.h5" --queries 40-43 --keys 50-53 -o "$T/zoom_tok.png"
runs "a zoom with indices" 0 plot "$T/many.h5" --group /plain --queries 40-43 --keys 50-53 \
    -o "$T/zoom_idx.png"
runs "the zoomed block as a file, tokens" 0 plot "$T/shifted.h5" -o "$T/shifted.png"
runs "the zoomed block as a file, tokens of indices" 0 plot "$T/shifted.h5" --group /indexed \
    -o "$T/shifted_idx.png"
runs "the zoomed block as a file, no tokens" 0 plot "$T/shifted.h5" --group /plain -o "$T/shifted_plain.png"
runs "entropy --queries 1-3" 0 plot "$K" --what entropy --queries 1-3 -o "$T/zoom_e.png"
runs "--what norms" 0 plot "$T/maps.h5" --what norms --item 1 -o "$T/norms.png"
runs "--what norms --color sqrt" 0 plot "$T/maps.h5" --what norms --color sqrt -o "$T/norms_sqrt.png"
runs "--what mean" 0 plot "$T/maps.h5" --what mean -o "$T/mean.png"
runs "--what distance" 0 plot "$T/maps.h5" --what distance -o "$T/distance.png"
runs "--what value_norm" 0 plot "$T/maps.h5" --what value_norm --heads 1 -o "$T/value_norm.png"
runs "--what mean of (n, m)" 0 plot "$T/mean2.h5" --what mean -o "$T/mean2.png"
runs "a rollout file" 0 plot "$T/rollout.h5" --item 1 -o "$T/rollout.png"
runs "a rollout file --color log" 0 plot "$T/rollout.h5" --what rollout --color log -o "$T/rollout_log.png"
runs "a rollout with layers named as heads" 0 plot "$T/named.h5" -o "$T/named.png"
runs "the same maps as weights" 0 plot "$T/as_weights.h5" -o "$T/as_weights.png"
runs "a census" 0 plot "$T/census.h5" -o "$T/census.png"
runs "a census without duplicate and induction" 0 plot "$T/census5.h5" -o "$T/census5.png"
runs "a census, --what induction" 0 plot "$T/census.h5" --what induction -o "$T/census_induction.png"
runs "a census --color sqrt" 0 plot "$T/census.h5" --color sqrt -o "$T/census_sqrt.png"
runs "a census --color log" 0 plot "$T/census.h5" --color log -o "$T/census_log.png"
runs "an SVG census" 0 plot "$T/census.h5" -o "$T/census.svg"

"$PY" "$TESTS/ref/plot_check.py" verify "$T" >"$T/verify.log" 2>&1
report_verdicts "$T/verify.log" $?
PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/plot_views_check.py" verify "$T" >"$T/views.log" 2>&1
report_verdicts "$T/views.log" $?

# ---------------------------------------------------------------- errors

E=$T/errors
mkdir "$E"
mkdir "$E/dir.png"
printf 'not HDF5\n' >"$E/text.h5"
O=$E/out.png
refuse "missing file" 3 "missing.h5" plot "$E/missing.h5" -o "$O"
refuse "not an HDF5 file" 3 "not an HDF5 file" plot "$E/text.h5" -o "$O"
refuse "a directory as the results" 3 "is a directory" plot "$E" -o "$O"
refuse "missing group" 3 "/nope" plot "$K" --group /nope -o "$O"
refuse "no weights (an input file)" 3 "--save weights" plot "$TOP/fixtures/toy.h5" -o "$O"
refuse "a group behind an external link to another file" 3 "external link" \
    plot "$T/elink.h5" --group /layer0 -o "$O"
refuse "weights kept in another file (external storage)" 3 "external file" \
    plot "$T/external.h5" -o "$O"
refuse "a damaged chunk (unreadable results)" 3 "cannot read /weights" plot "$T/damaged.h5" -o "$O"
refuse "no entropy" 3 "--save entropy" plot "$T/big.h5" --what entropy -o "$O"
refuse "item beyond B" 3 "item 2" plot "$K" --item 2 -o "$O"
refuse "an item of a rank-3 map" 3 "no batch axis" plot "$T/rank3.h5" --item 1 -o "$O"
refuse "head beyond H" 3 "head 3" plot "$K" --heads 0,3 -o "$O"
refuse "integer map" 3 "floating-point" plot "$K" --group /intmap -o "$O"
refuse "rank-2 map" 3 "shape (5, 7)" plot "$K" --group /flatmap -o "$O"
refuse "tokens of another length" 3 "query_token" plot "$K" --group /badtok -o "$O"
refuse "tokens that are not strings" 3 "strings expected" plot "$K" --group /numtok -o "$O"
refuse "unknown extension" 2 ".png, .svg or .pdf" plot "$K" -o "$E/out.gif"
refuse "no extension" 2 ".png, .svg or .pdf" plot "$K" -o "$E/png"
refuse "-o ''" 2 ".png, .svg or .pdf" plot "$K" -o ''
refuse "no -o" 2 "-o FILE" plot "$K"
refuse "no results file" 2 "no results file" plot -o "$O"
refuse "two results files" 2 "one results file" plot "$K" "$K" -o "$O"
for heads in '' a 1- -1 3-1 1,,2 1, ,1 1.5 0x1 ' 1' 99999999999999999999; do
    refuse "--heads '$heads'" 2 "--heads" plot "$K" --heads "$heads" -o "$O"
done
for item in '' -1 1.5 x 1e3 ' 1'; do
    refuse "--item '$item'" 2 "--item" plot "$K" --item "$item" -o "$O"
done
refuse "--what bogus" 2 "weights, scores, norms, mean, entropy, distance, value_norm, rollout, flow, first" \
    plot "$K" --what bogus -o "$O"
refuse "--color bogus" 2 "linear, sqrt or log" plot "$K" --color bogus -o "$O"
refuse "--color log on scores" 2 "--color sqrt" plot "$K" --what scores --color log -o "$O"
for zoom in '' a 5-3 1- -1 1,2 ' 1' 0x1 99999999999999999999-1; do
    refuse "--queries '$zoom'" 2 "--queries" plot "$T/zoom.h5" --queries "$zoom" -o "$O"
done
refuse "--keys '3-'" 2 "--keys" plot "$T/zoom.h5" --keys 3- -o "$O"
refuse "--queries beyond the map" 3 "200 queries (0 to 199)" plot "$T/zoom.h5" --queries 0-200 -o "$O"
refuse "--keys beyond the map" 3 "200 keys (0 to 199)" plot "$T/zoom.h5" --keys 150-250 -o "$O"
refuse "--queries beyond entropy's queries" 3 "5 queries" plot "$K" --what entropy --queries 5 -o "$O"
refuse "--keys on entropy" 2 "--keys does not apply to entropy" plot "$K" --what entropy --keys 0-1 -o "$O"
refuse "--queries on value_norm" 2 "--queries does not apply" plot "$T/maps.h5" --what value_norm \
    --queries 0-1 -o "$O"
refuse "--heads on a rollout" 2 "layers" plot "$T/rollout.h5" --heads 0 -o "$O"
refuse "--heads on the mean" 2 "--heads does not apply to mean" plot "$T/maps.h5" --what mean --heads 0 -o "$O"
refuse "--heads on a census" 2 "--heads does not apply to a census" plot "$T/census.h5" --heads 0 -o "$O"
refuse "--queries on a census" 2 "--queries does not apply" plot "$T/census.h5" --queries 0-1 -o "$O"
refuse "--item 1 of a census" 3 "no batch axis" plot "$T/census.h5" --item 1 -o "$O"
refuse "weights of a census" 3 "census of attnrun heads" plot "$T/census.h5" --what weights -o "$O"
refuse "a grid the census lacks" 3 "no grid induction" plot "$T/census5.h5" --what induction -o "$O"
refuse "a census grid of results" 3 "census of attnrun heads" plot "$K" --what first -o "$O"
refuse "attnrun_analysis that is not a string" 3 "attribute attnrun_analysis of group / is not one string" \
    plot "$T/marker.h5" -o "$O"
refuse "no norms" 3 "--save norms" plot "$K" --what norms -o "$O"
refuse "no rollout" 3 "attnrun rollout" plot "$K" --what rollout -o "$O"
refuse "--group relative" 2 "absolute" plot "$K" --group results -o "$O"
refuse "unknown option" 2 "--bogus" plot "$K" --bogus -o "$O"
refuse "a directory's name without --force" 2 "exists" plot "$K" -o "$E/dir.png"
refuse "a directory's name with --force" 2 "not a regular file" plot "$K" -o "$E/dir.png" --force
refuse "a missing directory" 1 "$E/none" plot "$K" -o "$E/none/out.png"
if command -v flock >/dev/null 2>&1; then
    flock -x "$K" -c "$(printf '%q ' "$ATTNRUN" plot "$K" -o "$O") >'$T/stdout' 2>'$T/stderr'" </dev/null
    rc=$?
    why=$(run_problem "$rc" 1 "$T/stderr")
    [ -z "$why" ] && ! grep -q 'locked by another program' "$T/stderr" && why="$(cat "$T/stderr")"
    [ -z "$why" ] && [ -e "$O" ] && why="left $O"
    if [ -z "$why" ]; then ok "results locked by a writer: exit 1"; else bad "results locked by a writer: $why"; fi
fi

# A write that fails part way (the file size limit) leaves nothing.
before=$(ls -A "$E" | tr '\n' ' ')
(
    ulimit -f 1
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" plot "$T/big.h5" -o "$O" </dev/null >"$T/stdout" 2>"$T/stderr"
)
rc=$?
why=$(run_problem "$rc" 1 "$T/stderr")
[ -z "$why" ] && [ "$(ls -A "$E" | tr '\n' ' ')" != "$before" ] && why="left $(ls -A "$E" | tr '\n' ' ')"
if [ -z "$why" ]; then ok "a failed write (ulimit -f 1): exit 1, nothing left"; else bad "a failed write: $why"; fi

# --force: a file is replaced; without it the file stays as it was.
printf 'old\n' >"$E/old.png"
refuse "an existing file without --force" 2 "use --force" plot "$K" -o "$E/old.png"
if [ "$(cat "$E/old.png")" = "old" ]; then ok "the existing file is unchanged"; else bad "the existing file changed"; fi
# --force replaces a picture, and nothing else attnrun did not write as one
refuse "--force over a file that is no picture" 2 "not a picture" plot "$K" -o "$E/old.png" --force
if [ "$(cat "$E/old.png")" = "old" ]; then ok "... which is unchanged"; else bad "the foreign file changed"; fi
cp "$K" "$E/results.svg"
refuse "--force over a results file" 2 "not a picture" plot "$K" -o "$E/results.svg" --force
if cmp -s "$K" "$E/results.svg"; then ok "... which is unchanged"; else bad "the results file changed"; fi
cp "$T/known.svg" "$E/old.png"
runs "--force replaces a picture" 0 plot "$K" -o "$E/old.png" --force
if head -c 8 "$E/old.png" | grep -q PNG; then ok "the replaced file is the picture"; else bad "the replaced file is not a PNG"; fi
cp "$T/known.pdf" "$E/target"
ln -s target "$E/link.png"
runs "--force on a symbolic link to a picture" 0 plot "$K" -o "$E/link.png" --force
if [ ! -L "$E/link.png" ] && cmp -s "$T/known.pdf" "$E/target"; then
    ok "the link itself is replaced, not the file it names"
else
    bad "--force followed the symbolic link"
fi
if [ -d "$E/dir.png" ] && [ -z "$(ls -A "$E/dir.png")" ]; then ok "the directory is untouched"; else bad "the directory changed"; fi
if [ -z "$(find "$T" -name '*attnrun-tmp*')" ]; then ok "no temporary anywhere"; else bad "temporaries left: $(find "$T" -name '*attnrun-tmp*')"; fi

# --help
run plot --help
if [ "$rc" -eq 0 ] && grep -q '^Usage: attnrun plot' "$T/stdout" && [ ! -s "$T/stderr" ]; then
    ok "plot --help: usage on stdout, exit 0"
else
    bad "plot --help: exit $rc, $(head -c 200 "$T/stdout")"
fi
run --help
if [ "$rc" -eq 0 ] && grep -q 'attnrun plot' "$T/stdout"; then ok "attnrun --help names plot"; else bad "attnrun --help does not name plot"; fi
if "$ATTNRUN" plot --help >/dev/full 2>"$T/stderr"; then
    bad "plot --help into a full device succeeded"
else
    ok "plot --help into a full device: exit $?"
fi

# ------------------------------------------------------ allocation failures

if [ -n "${FAULT_ATTNRUN:-}" ] && [ -x "$FAULT_ATTNRUN" ]; then
    # fontconfig keeps a few bytes to the end (tests/lib/lsan.supp)
    export ASAN_OPTIONS=$FAULT_ASAN_OPTIONS
    export LSAN_OPTIONS=suppressions=$TESTS/lib/lsan.supp:print_suppressions=0
    alloc_sweep "plot" 200 "$K" plot IN --item 1 --heads 0-2 -o OUT.png
    alloc_sweep "plot a census" 200 "$T/census.h5" plot IN --color log -o OUT.png
    alloc_sweep "plot a rollout, zoomed" 200 "$T/rollout.h5" plot IN --queries 1-4 --color sqrt -o OUT.png
else
    echo "    (no FAULT_ATTNRUN: the allocation-failure sweep is skipped)"
fi

finish
