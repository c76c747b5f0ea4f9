#!/usr/bin/env bash
# tests/cli/test_rollout.sh - attnrun rollout: attention rollout (Abnar &
# Zuidema 2020) through the layers of a results file:
#   * the numbers: four layers run by attnrun itself into an --append file
#     (plain, causal, GQA with --kv-heads, causal with a key mask that hides
#     every key query 0 of item 0 sees), rolled out with --residual 0.5, 0,
#     0.25 and 1, in the appended order and with --groups reversed or a
#     subset, against tests/ref/rollout_ref.py's float64 numpy reference
#     (written from the paper, fed the weights attnrun saved, read back with
#     h5py) within 1e-5 relative; --save mean layers give the weights'
#     rollout; a rank-2 X (B = 1, tokens (n)); a plain results file (group
#     /); hand-made files named by --groups, one whose rows are not weights;
#   * the output: rollout (batch, layer, query, key) float32 with each axis
#     a dimension scale, layer_group, the first layer's tokens (repeats
#     included), the coordinates, the attributes; --residual 1 is exactly
#     the identity; a query that sees no key keeps a row of 0 (--residual
#     0); a group without maps is left out with a warning (none with -q);
#   * refusals: layers of another size, other tokens, cross-attention, no
#     weights, no results, a missing group, a hand-made file of two sizes:
#     exit 3; bad --residual, --groups, options, an existing OUT: exit 2;
#     a working set over --memory: exit 1; each one `attnrun: ` line
#     naming the problem, no output and no temporary left; --force
#     replaces; --help;
#   * with FAULT_ATTNRUN: each allocation failing in turn ends with exit 1
#     and one line, and leaves nothing.
# Expected numbers come from rollout_ref.py, never from attnrun's rollout.
# About 60 runs, ~10 s on two cores.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_rollout.sh     # from the repository root
#
# Environment:
#   ATTNRUN        the binary under test (default: build/attnrun)
#   FAULT_ATTNRUN  the fault-injection build (optional: its sweep is skipped without)
#   PYTHON         a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT     hang guard of one run in seconds (default 30)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "rollout: N passed, M failed"; the exit status is 1 when M > 0.
set -u

FAULT_ATTNRUN=${FAULT_ATTNRUN:-}
TIME_LIMIT=${TIME_LIMIT:-30}

SUITE="rollout"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, rollout_ref.py
. "$TESTS/lib/checks.sh"
. "$TESTS/lib/whole_model.sh"

suite_setup rollout numpy h5py
case $FAULT_ATTNRUN in
    ""|/*) ;;
    *) FAULT_ATTNRUN=$PWD/$FAULT_ATTNRUN ;;
esac
self_check rollout_ref.py
whole_model_inputs

# rollout_ref COMMAND ARGS...: a check of tests/ref/rollout_ref.py.
rollout_ref() { ref rollout_ref.py "$@"; }

# ------------------------------------------------------------- the layers

R=$T/results.h5           # four layers' weights, with tokens
MEANS=$T/means.h5         # the same layers' head means alone
whole_model_results "$R" "$MEANS"
ALL=(/layer0 /layer1 /layer2 /layer3)
REVERSED=(/layer3 /layer2 /layer1 /layer0)

O=$T/out
mkdir "$O"

# ------------------------------------------------------------- the numbers

if runs "four layers, --residual 0.5 (default)" 0 rollout "$R" -o "$O/default.h5"; then
    expect "the rollout of the appended layers equals the reference" \
        rollout_ref check "$O/default.h5" "$R" 0.5 "${ALL[@]}"
    expect "layout: axes, dimension scales, coordinates" rollout_ref layout "$O/default.h5"
    if "$PY" -c "import xarray, netCDF4" 2>/dev/null; then
        expect "xarray opens it: dimensions and coordinates" rollout_ref xarray "$O/default.h5"
    else
        echo "skip xarray opens it: $PY lacks xarray or netCDF4"
    fi
    [ ! -s "$T/stderr" ] && ok "a rollout says nothing" || bad "a rollout said: $(head -c 300 "$T/stderr")"
fi
if runs "--residual 0" 0 rollout "$R" -o "$O/r0.h5" --residual 0; then
    expect "--residual 0 equals the reference" rollout_ref check "$O/r0.h5" "$R" 0 "${ALL[@]}"
    expect "a query that sees no key keeps a row of 0 (--residual 0)" \
        rollout_ref zero_row "$R" /layer3 0 0 "$O/r0.h5" 3
fi
if runs "--residual 1" 0 rollout "$R" -o "$O/r1.h5" --residual 1; then
    expect "--residual 1 is the identity, exactly" rollout_ref identity "$O/r1.h5"
fi
if runs "--groups in reverse" 0 rollout "$R" -o "$O/reversed.h5" --groups "$(IFS=,; echo "${REVERSED[*]}")"; then
    expect "--groups reversed equals the reference in that order" \
        rollout_ref check "$O/reversed.h5" "$R" 0.5 "${REVERSED[@]}"
    expect "the order matters: reversed differs from appended" \
        rollout_ref differ "$O/default.h5" "$O/reversed.h5"
fi
if runs "--groups /layer1,/layer3 --residual 0.25" 0 rollout "$R" -o "$O/two.h5" \
    --groups /layer1,/layer3 --residual 0.25; then
    expect "two layers with --residual 0.25 equal the reference" \
        rollout_ref check "$O/two.h5" "$R" 0.25 /layer1 /layer3
fi
if runs "layers of --save mean" 0 rollout "$MEANS" -o "$O/means.h5"; then
    expect "the head means' rollout equals the reference" \
        rollout_ref check "$O/means.h5" "$MEANS" 0.5 "${ALL[@]}"
    expect "the head means give the weights' rollout (float32 means)" \
        rollout_ref same "$O/means.h5" "$O/default.h5"
fi

# A rank-2 X: maps (H, n, n), one item, tokens (n).
FLAT=$T/flat.h5
for i in 0 1 3; do
    run "$M" -o "$FLAT" --append --group "/layer$i" --x /flat/X --weights-group "/l$i" --heads 4 \
        --tokens /flat/tok --save weights -q
    [ "$rc" -eq 0 ] || bad "setup: flat layer $i: exit $rc: $(head -c 300 "$T/stderr")"
done
if runs "layers of a rank-2 X" 0 rollout "$FLAT" -o "$O/flat.h5"; then
    expect "a rank-2 X's rollout (B = 1) equals the reference" \
        rollout_ref check "$O/flat.h5" "$FLAT" 0.5 /layer0 /layer1 /layer3
    expect "layout with tokens (n)" rollout_ref layout "$O/flat.h5"
fi

# A plain results file (no --append): its one group, /.
run "$M" -o "$T/plain.h5" --x /l1/X --weights-group /l1 --heads 4 --causal --tokens /tok -q
[ "$rc" -eq 0 ] || bad "setup: plain results: exit $rc: $(head -c 300 "$T/stderr")"
if runs "a plain results file" 0 rollout "$T/plain.h5" -o "$O/plain.h5" --residual 0.3; then
    expect "a plain file's one layer equals the reference" \
        rollout_ref check "$O/plain.h5" "$T/plain.h5" 0.3 /
fi

# Hand-made files: groups named by --groups, rows that are not weights.
if runs "hand-made groups named by --groups" 0 rollout "$T/square.h5" -o "$O/square.h5" --groups /b,/a,/c; then
    expect "hand-made maps, rows summing to 3 included, equal the reference" \
        rollout_ref check "$O/square.h5" "$T/square.h5" 0.5 /b /a /c
fi

# A group without maps is left out, with a warning (none with -q).
SKIP=$T/skip.h5
layer "$SKIP" /layer0 0 --save weights
layer "$SKIP" /layer1 1 --save output
layer "$SKIP" /layer2 2 --save weights
if runs "a group without maps" 0 rollout "$SKIP" -o "$O/skip.h5"; then
    expect "the other layers equal the reference" rollout_ref check "$O/skip.h5" "$SKIP" 0.5 /layer0 /layer2
    if [ "$(wc -l <"$T/stderr")" -eq 1 ] && grep -q '^attnrun: warning: .*/layer1' "$T/stderr"; then
        ok "the group left out is named in one warning"
    else
        bad "no warning naming /layer1: $(head -c 300 "$T/stderr")"
    fi
fi
if runs "a group without maps, -q" 0 rollout "$SKIP" -o "$O/skip_q.h5" -q; then
    [ ! -s "$T/stderr" ] && ok "-q: no warning" || bad "-q still warns: $(head -c 300 "$T/stderr")"
fi

# ------------------------------------------------------------- refusals

# Files of layers that do not go together.
mismatched_layers

E=$T/errors
mkdir "$E"
mkdir "$E/dir.h5"
OUT=$E/out.h5
refuse "layers of other sizes" 3 "group /layer1 holds 2 items of 7 tokens, but group /layer0" \
    rollout "$T/sizes.h5" -o "$OUT"
refuse "a hand-made file of two sizes" 3 "group /b holds 1 item of 5 tokens, but group /a holds 1 item of 4" \
    rollout "$T/shapes.h5" -o "$OUT"
refuse "other tokens" 3 "group /layer1: query_token of item 1 differs from group /layer0's at query 3" \
    rollout "$T/tokens.h5" -o "$OUT"
refuse "cross-attention" 3 "group /layer1: weights has shape (2, 4, 6, 5), 6 queries by 5 keys" \
    rollout "$T/cross.h5" -o "$OUT"
refuse "cross-attention's mean" 3 "group /layer2: mean has shape (2, 6, 5), 6 queries by 5 keys" \
    rollout "$T/cross.h5" -o "$OUT" --groups /layer2
refuse "no group holds weights" 3 "none of the index's groups (/layer0, /layer1) holds weights or mean" \
    rollout "$T/none.h5" -o "$OUT"
refuse "a group named without weights" 3 "group /layer0 holds neither weights nor mean; attnrun saves the weights by default, or with --save weights" \
    rollout "$T/none.h5" -o "$OUT" --groups /layer0
refuse "a group named without weights, the others with" 3 "group /layer1 holds neither" \
    rollout "$SKIP" -o "$OUT" --groups /layer0,/layer1
refuse "an input, not results" 3 "no results of attnrun" rollout "$M" -o "$OUT"
refuse "marks missing: --groups needed" 3 "--groups" rollout "$T/square.h5" -o "$OUT"
refuse "a missing group" 3 "the index's groups are /layer0, /layer1, /layer2, ..." \
    rollout "$R" -o "$OUT" --groups /layer0,/layer9
refuse "a missing file" 3 "missing.h5" rollout "$E/missing.h5" -o "$OUT"
# n = 6: 3 * 36 * 8 + 36 * 4 = 1008 bytes
refuse "over --memory" 1 "1008 B, over the --memory cap of 1000 B; raise it to at least --memory 1K" \
    rollout "$R" -o "$OUT" --memory 1000
for v in -0.1 1.5 abc '' nan inf 0x1 ' 1' 1e; do
    refuse "--residual '$v'" 2 "--residual '$v': expected a number from 0 to 1" \
        rollout "$R" -o "$OUT" --residual "$v"
done
for v in layer0 /layer0, ,/layer0 '' /a,,/b; do
    refuse "--groups '$v'" 2 "--groups '$v': expected absolute group paths" \
        rollout "$R" -o "$OUT" --groups "$v"
done
refuse "--memory 0" 2 "--memory" rollout "$R" -o "$OUT" --memory 0
refuse "unknown option" 2 "--bogus" rollout "$R" -o "$OUT" --bogus
refuse "a mistyped option" 2 "did you mean --residual" rollout "$R" -o "$OUT" --residul 0.5
refuse "no -o" 2 "-o OUT.h5" rollout "$R"
refuse "no results file" 2 "no results file" rollout -o "$OUT"
refuse "two results files" 2 "one results file" rollout "$R" "$R" -o "$OUT"
refuse "-o the results file" 2 "names the results file itself" rollout "$R" -o "$R"
refuse "a directory's name" 2 "not a regular file" rollout "$R" -o "$E/dir.h5" --force
refuse "a missing directory" 1 "$E/none" rollout "$R" -o "$E/none/out.h5"
refuse "a mistyped subcommand" 3 "did you mean attnrun rollout" rolout "$R" -o "$OUT"
runs "--memory just enough" 0 rollout "$R" -o "$O/memory.h5" --memory 1008

# --force: an existing file stays without it, is replaced with it.
printf 'old\n' >"$E/old.h5"
refuse "an existing file without --force" 2 "use --force to replace it" rollout "$R" -o "$E/old.h5"
[ "$(cat "$E/old.h5")" = "old" ] && ok "the existing file is unchanged" || bad "the existing file changed"
# --force replaces a rollout attnrun wrote, nothing else: not another
# file, not a results file, not a part of the index read (even a new name
# in its parts directory, or a link to a part from outside it)
refuse "--force over a file attnrun did not write" 2 "not a rollout file" \
    rollout "$R" -o "$E/old.h5" --force
[ "$(cat "$E/old.h5")" = "old" ] && ok "... which is unchanged" || bad "the foreign file changed"
part=$(ls "$R.parts" | head -n 1)
cp "$R.parts/$part" "$E/part-copy.h5"
ln -s "$R.parts/$part" "$E/part-symlink.h5"
ln "$R.parts/$part" "$E/part-hardlink.h5"
for target in "$R.parts/$part" "$R.parts/new.h5" "$E/part-copy.h5" "$E/part-symlink.h5" \
        "$E/part-hardlink.h5"; do
    case $target in
        "$E"/part-copy.h5) why="not a rollout file" ;;
        *) why="names a file of the results" ;;
    esac
    refuse "--force -o ${target#"$T"/}" 2 "$why" rollout "$R" -o "$target" --force
done
if cmp -s "$R.parts/$part" "$E/part-copy.h5" && [ ! -e "$R.parts/new.h5" ] &&
    [ -L "$E/part-symlink.h5" ] && [ "$E/part-hardlink.h5" -ef "$R.parts/$part" ]; then
    ok "the parts are unchanged, nothing added, both links kept"
else
    bad "the parts directory or a link to a part changed"
fi
rm -f "$E/part-symlink.h5" "$E/part-hardlink.h5"
runs "a rollout to replace" 0 rollout "$R" -o "$E/old.h5.new"
mv "$E/old.h5.new" "$E/old.h5"
if runs "--force replaces it" 0 rollout "$R" -o "$E/old.h5" --force; then
    expect "the replaced file is the rollout" rollout_ref check "$E/old.h5" "$R" 0.5 "${ALL[@]}"
fi
rm -f "$E/old.h5"
if [ -z "$(find "$T" -name '*attnrun-tmp*')" ]; then ok "no temporary anywhere"; else bad "temporaries left: $(find "$T" -name '*attnrun-tmp*')"; fi

# A write that fails part way (the file size limit) leaves nothing.
before=$(ls -A "$E" | tr '\n' ' ')
(
    ulimit -f 4
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" rollout "$R" -o "$OUT" </dev/null >"$T/stdout" 2>"$T/stderr"
)
rc=$?
why=$(run_problem "$rc" 1 "$T/stderr")
[ -z "$why" ] && [ "$(ls -A "$E" | tr '\n' ' ')" != "$before" ] && why="left $(ls -A "$E" | tr '\n' ' ')"
if [ -z "$why" ]; then ok "a failed write (ulimit -f 4): exit 1, nothing left"; else bad "a failed write: $why"; fi

# A signal mid-run ends it with exit 1 and one line, leaving nothing: a
# rollout long enough to be caught (1024 items through 4 layers).
ref attention_inputs.py random "$T/long_in.h5" 1024 8 16 1
for i in 0 1 2 3; do
    run "$T/long_in.h5" -o "$T/long.h5" --append --group "/layer$i" --heads 2 --save weights -q
    [ "$rc" -eq 0 ] || bad "setup: long layer $i: exit $rc: $(head -c 300 "$T/stderr")"
done
for sig in INT TERM; do
    d=$T/sig_$sig
    mkdir "$d"
    said=$(ATTNRUN=$ATTNRUN TIME_LIMIT=$TIME_LIMIT ref rollout_ref.py signalled "$T/long.h5" "$d" "$sig")
    case $said in
        early:*) echo "skip SIG$sig mid-run: $said" ;;
        *) why=$(run_problem "$said" 1 "$d/err")
           [ -z "$why" ] && [ "$(ls -A "$d")" != "err" ] && why="left $(ls -A "$d" | tr '\n' ' ')"
           if [ -z "$why" ]; then ok "SIG$sig mid-run: exit 1, one line, nothing left"; else bad "SIG$sig mid-run: $why"; fi ;;
    esac
done

# --help
run rollout --help
if [ "$rc" -eq 0 ] && grep -q '^Usage: attnrun rollout' "$T/stdout" && [ ! -s "$T/stderr" ]; then
    ok "rollout --help: usage on stdout, exit 0"
else
    bad "rollout --help: exit $rc, $(head -c 200 "$T/stdout")"
fi
if "$ATTNRUN" rollout --help >/dev/full 2>"$T/stderr"; then
    bad "rollout --help into a full device succeeded"
else
    ok "rollout --help into a full device: exit $?"
fi

# ------------------------------------------------------ allocation failures

if [ -n "$FAULT_ATTNRUN" ] && [ -x "$FAULT_ATTNRUN" ]; then
    export ASAN_OPTIONS=$FAULT_ASAN_OPTIONS
    export LSAN_OPTIONS=suppressions=$TESTS/lib/lsan.supp:print_suppressions=0
    alloc_sweep "rollout" 300 "$T/plain.h5" rollout IN -o OUT.h5
else
    echo "    (no FAULT_ATTNRUN: the allocation-failure sweep is skipped)"
fi

finish
