#!/usr/bin/env bash
# tests/cli/test_flow.sh - attnrun flow: attention flow (Abnar & Zuidema
# 2020) through the layers of a results file:
#   * the numbers, against tests/ref/flow_ref.py's networkx reference (the
#     paper's graph, networkx's maximum_flow_value in float64, fed the
#     weights attnrun saved, read back with h5py) within 1e-9: four layers
#     run by attnrun into an --append file (plain, causal, GQA, causal with
#     a key mask that leaves query 0 of item 0 no key) with --residual 0.5,
#     0 and 0.25; --residual 1 is exactly the identity; four causal layers
#     (every flow to an earlier position exactly 0); --to a layer, --groups
#     reversed, one layer, layers of --save mean; a plain results file;
#     a larger model (16 tokens, 6 layers, 3 items); the same bits on 1 and
#     2 threads; each file's certificate_gap at most 1e-12;
#   * the output: flow (batch, query, key) float64 with each axis a
#     dimension scale, layer_group, the tokens, the attributes (in
#     flow_ref.py check); progress lines on a long run (a fake clock), none
#     with -q;
#   * refusals as rollout's: layers of another size, other tokens,
#     cross-attention, no weights, a --to that is not a layer, negative
#     weights: exit 3; bad --residual, --to, --threads, an existing OUT:
#     exit 2; over --memory: exit 1; each one `attnrun: ` line, nothing
#     left; --force; SIGINT and SIGTERM mid-run leave nothing; --help;
#   * with FAULT_ATTNRUN: each allocation failing in turn ends with exit 1
#     and one line, and leaves nothing.
# Expected numbers come from flow_ref.py, never from attnrun's flow.
# About 70 runs, ~15 s on two cores.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_flow.sh     # from the repository root
#
# Environment:
#   ATTNRUN        the binary under test (default: build/attnrun)
#   FAULT_ATTNRUN  the fault-injection build (optional: its sweep is skipped without)
#   PYTHON         a python with numpy, h5py and networkx (default /usr/bin/python3)
#   TIME_LIMIT     hang guard of one run in seconds (default 30)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "flow: N passed, M failed"; the exit status is 1 when M > 0.
set -u

FAULT_ATTNRUN=${FAULT_ATTNRUN:-}
TIME_LIMIT=${TIME_LIMIT:-30}

SUITE="flow"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, flow_ref.py
. "$TESTS/lib/checks.sh"
. "$TESTS/lib/whole_model.sh"

suite_setup flow numpy h5py networkx
case $FAULT_ATTNRUN in
    ""|/*) ;;
    *) FAULT_ATTNRUN=$PWD/$FAULT_ATTNRUN ;;
esac
self_check flow_ref.py
whole_model_inputs

flow_ref() { ref flow_ref.py "$@"; }

# ------------------------------------------------------------- the layers

R=$T/results.h5           # four layers' weights, with tokens
MEANS=$T/means.h5         # the same layers' head means alone
CAUSAL=$T/causal.h5       # four causal layers
whole_model_results "$R" "$MEANS"
for i in 0 1 2 3; do
    layer "$CAUSAL" "/layer$i" "$i" --save weights --causal
done
ALL=(/layer0 /layer1 /layer2 /layer3)

O=$T/out
mkdir "$O"

# ------------------------------------------------------------- the numbers

if runs "four layers, --residual 0.5 (default)" 0 flow "$R" -o "$O/default.h5"; then
    expect "the flow of the appended layers is networkx's" \
        flow_ref check "$O/default.h5" "$R" 0.5 "${ALL[@]}"
    [ ! -s "$T/stderr" ] && ok "a flow says nothing" || bad "a flow said: $(head -c 300 "$T/stderr")"
fi
quick_done
if runs "--residual 0 (a query that sees no key)" 0 flow "$R" -o "$O/r0.h5" --residual 0; then
    expect "--residual 0 is networkx's" flow_ref check "$O/r0.h5" "$R" 0 "${ALL[@]}"
fi
if runs "--residual 0.25" 0 flow "$R" -o "$O/r25.h5" --residual 0.25; then
    expect "--residual 0.25 is networkx's" flow_ref check "$O/r25.h5" "$R" 0.25 "${ALL[@]}"
fi
if runs "--residual 1" 0 flow "$R" -o "$O/r1.h5" --residual 1; then
    expect "--residual 1 is the identity, exactly" flow_ref identity "$O/r1.h5"
fi
if runs "four causal layers" 0 flow "$CAUSAL" -o "$O/causal.h5" --residual 0.3; then
    expect "causal layers are networkx's" flow_ref check "$O/causal.h5" "$CAUSAL" 0.3 "${ALL[@]}"
    expect "every flow to an earlier position is exactly 0" flow_ref causal "$O/causal.h5"
fi
if runs "--to /layer1" 0 flow "$R" -o "$O/to.h5" --to /layer1; then
    expect "--to /layer1 is the flow through /layer0 and /layer1" \
        flow_ref check "$O/to.h5" "$R" 0.5 /layer0 /layer1
fi
if runs "--groups in reverse, --to the third" 0 flow "$R" -o "$O/reversed.h5" \
    --groups /layer3,/layer2,/layer1,/layer0 --to /layer1; then
    expect "--groups reversed up to --to is networkx's" \
        flow_ref check "$O/reversed.h5" "$R" 0.5 /layer3 /layer2 /layer1
fi
if runs "one layer" 0 flow "$R" -o "$O/one.h5" --groups /layer2 --residual 0.2; then
    expect "one layer's flows are its edges" flow_ref check "$O/one.h5" "$R" 0.2 /layer2
fi
if runs "layers of --save mean" 0 flow "$MEANS" -o "$O/means.h5"; then
    expect "the head means' flow is networkx's" flow_ref check "$O/means.h5" "$MEANS" 0.5 "${ALL[@]}"
fi
run "$M" -o "$T/plain.h5" --x /l1/X --weights-group /l1 --heads 4 --causal --tokens /tok -q
[ "$rc" -eq 0 ] || bad "setup: plain results: exit $rc: $(head -c 300 "$T/stderr")"
if runs "a plain results file" 0 flow "$T/plain.h5" -o "$O/plain.h5" --residual 0.3; then
    expect "a plain file's one layer is networkx's" flow_ref check "$O/plain.h5" "$T/plain.h5" 0.3 /
fi

# A larger model: 3 items of 16 tokens through 6 layers, on 1 and 2 threads.
BIG=$T/big.h5
ref attention_inputs.py random "$T/big_in.h5" 3 16 16 5
for i in 0 1 2 3 4 5; do
    run "$T/big_in.h5" -o "$BIG" --append --group "/layer$i" --heads 2 --save weights -q \
        $([ "$i" = 2 ] && echo --causal)
    [ "$rc" -eq 0 ] || bad "setup: big layer $i: exit $rc: $(head -c 300 "$T/stderr")"
done
if runs "16 tokens, 6 layers, 2 threads" 0 flow "$BIG" -o "$O/big2.h5" --threads 2 --residual 0.2 &&
        runs "... 1 thread" 0 flow "$BIG" -o "$O/big1.h5" --threads 1 --residual 0.2; then
    expect "16 tokens through 6 layers are networkx's" \
        flow_ref check "$O/big2.h5" "$BIG" 0.2 /layer0 /layer1 /layer2 /layer3 /layer4 /layer5
    expect "the same bits on 1 and 2 threads" flow_ref same "$O/big1.h5" "$O/big2.h5"
fi

# Progress: a run of a second made long by a fake clock (x 20): 16 items
# of 64 tokens (long.h5, also interrupted below).
ref attention_inputs.py random "$T/long_in.h5" 16 64 16 2
for i in 0 1 2 3 4 5; do
    run "$T/long_in.h5" -o "$T/long.h5" --append --group "/layer$i" --heads 2 --save weights -q
    [ "$rc" -eq 0 ] || bad "setup: long layer $i: exit $rc: $(head -c 300 "$T/stderr")"
done
SHIM=
if command -v cc >/dev/null && "$PY" "$TESTS/ref/fake_clock.py" build "$T" >/dev/null 2>&1; then
    SHIM=$T/fake_time.so
fi
if [ -n "$SHIM" ]; then
    FAKE_CLOCK_RATE=20 preloaded "$SHIM" timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" flow "$T/long.h5" \
        -o "$O/progress.h5" --threads 1 --to /layer2 </dev/null >"$T/stdout" 2>"$T/stderr"
    rc=$?
    lines=$(grep -c '^attnrun: flow: [0-9]*% (item [0-9]* of 16), about [0-9]* s left$' "$T/stderr")
    if [ "$rc" -eq 0 ] && [ "$lines" -ge 2 ] && [ "$(grep -vc '^attnrun: flow: ' "$T/stderr")" -eq 0 ]; then
        ok "a long run reports its progress ($lines lines)"
    else
        bad "progress: exit $rc, $lines lines: $(head -c 300 "$T/stderr")"
    fi
    FAKE_CLOCK_RATE=20 preloaded "$SHIM" timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" flow "$T/long.h5" \
        -o "$O/progress.h5" --threads 1 --to /layer2 --force -q </dev/null >"$T/stdout" 2>"$T/stderr"
    rc=$?
    [ "$rc" -eq 0 ] && [ ! -s "$T/stderr" ] && ok "-q: no progress" || bad "-q: exit $rc, $(head -c 300 "$T/stderr")"
else
    echo "skip progress: no C compiler to build the fake clock"
fi

# ------------------------------------------------------------- refusals

mismatched_layers
"$PY" - "$T/negative.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    for name, w in (("a", np.full((1, 1, 3, 3), 1 / 3)), ("b", np.eye(3)[None, None] * -1.0)):
        g = f.create_group(name)
        g.attrs["attnrun_version"] = "hand-made"
        g["weights"] = w.astype(np.float32)
PY

E=$T/errors
mkdir "$E"
OUT=$E/out.h5
refuse "layers of other sizes" 3 "group /layer1 holds 2 items of 7 tokens, but group /layer0" \
    flow "$T/sizes.h5" -o "$OUT"
refuse "other tokens" 3 "group /layer1: query_token of item 1 differs from group /layer0's at query 3" \
    flow "$T/tokens.h5" -o "$OUT"
refuse "cross-attention" 3 "group /layer1: weights has shape (2, 4, 6, 5), 6 queries by 5 keys" \
    flow "$T/cross.h5" -o "$OUT"
refuse "no group holds weights" 3 "none of the index's groups (/layer0, /layer1) holds weights or mean" \
    flow "$T/none.h5" -o "$OUT"
refuse "--to a group that is not a layer" 3 "--to /layer7 is not one of the layers (/layer0, /layer1, /layer2, /layer3)" \
    flow "$R" -o "$OUT" --to /layer7
refuse "--to a layer left out by --groups" 3 "--to /layer0 is not one of the layers (/layer2, /layer3)" \
    flow "$R" -o "$OUT" --groups /layer2,/layer3 --to /layer0
refuse "negative weights" 3 "group /b: the mean of item 0's weights is -1 at query 0, key 0" \
    flow "$T/negative.h5" -o "$OUT" --groups /a,/b
refuse "over --memory" 1 "over the --memory cap of 1000 B; raise it to at least --memory" \
    flow "$R" -o "$OUT" --memory 1000 --threads 1
refuse "over --memory, several threads" 1 "or use fewer --threads" \
    flow "$R" -o "$OUT" --memory 1000 --threads 2
for v in -0.1 1.5 abc; do
    refuse "--residual '$v'" 2 "--residual '$v': expected a number from 0 to 1" \
        flow "$R" -o "$OUT" --residual "$v"
done
refuse "--to without its slash" 2 "--to 'layer1': expected a group's absolute path" \
    flow "$R" -o "$OUT" --to layer1
for v in 0 -1 x; do
    refuse "--threads '$v'" 2 "--threads" flow "$R" -o "$OUT" --threads "$v"
done
refuse "rollout takes no --threads" 2 "--threads" rollout "$R" -o "$OUT" --threads 2
refuse "no -o" 2 "-o OUT.h5" flow "$R"
refuse "-o the results file" 2 "names the results file itself" flow "$R" -o "$R"
refuse "a mistyped subcommand" 3 "did you mean attnrun flow" flwo "$R" -o "$OUT"

# --force: replaces a flow attnrun wrote, nothing else.
printf 'old\n' >"$E/old.h5"
refuse "an existing file without --force" 2 "use --force to replace it" flow "$R" -o "$E/old.h5"
refuse "--force over a file attnrun did not write" 2 "not a flow file" flow "$R" -o "$E/old.h5" --force
[ "$(cat "$E/old.h5")" = "old" ] && ok "the existing file is unchanged" || bad "the existing file changed"
runs "a rollout" 0 rollout "$R" -o "$E/rollout.h5"
refuse "--force over a rollout" 2 "not a flow file" flow "$R" -o "$E/rollout.h5" --force
refuse "rollout --force over a flow" 2 "not a rollout file" rollout "$R" -o "$O/r1.h5" --force
rm -f "$E/rollout.h5"
rm -f "$E/old.h5"
if runs "--force over a flow" 0 flow "$R" -o "$O/default.h5" --force --residual 0.25; then
    expect "the replaced file is the new flow" flow_ref check "$O/default.h5" "$R" 0.25 "${ALL[@]}"
fi
if [ -z "$(find "$T" -name '*attnrun-tmp*')" ]; then ok "no temporary anywhere"; else bad "temporaries left: $(find "$T" -name '*attnrun-tmp*')"; fi

# A signal mid-run ends it with exit 1 and one line, leaving nothing.
for sig in INT TERM; do
    d=$T/sig_$sig
    mkdir "$d"
    said=$(ATTNRUN=$ATTNRUN TIME_LIMIT=$TIME_LIMIT ref rollout_ref.py signalled "$T/long.h5" "$d" "$sig" flow)
    case $said in
        early:*) echo "skip SIG$sig mid-run: $said" ;;
        *) why=$(run_problem "$said" 1 "$d/err")
           [ -z "$why" ] && [ "$(ls -A "$d")" != "err" ] && why="left $(ls -A "$d" | tr '\n' ' ')"
           if [ -z "$why" ]; then ok "SIG$sig mid-run: exit 1, one line, nothing left"; else bad "SIG$sig mid-run: $why"; fi ;;
    esac
done

# --help
run flow --help
if [ "$rc" -eq 0 ] && grep -q '^Usage: attnrun flow' "$T/stdout" && grep -q -- '--threads N' "$T/stdout" &&
        [ ! -s "$T/stderr" ]; then
    ok "flow --help: usage on stdout, exit 0"
else
    bad "flow --help: exit $rc, $(head -c 200 "$T/stdout")"
fi

# ------------------------------------------------------ allocation failures

if [ -n "$FAULT_ATTNRUN" ] && [ -x "$FAULT_ATTNRUN" ]; then
    export ASAN_OPTIONS=$FAULT_ASAN_OPTIONS
    export LSAN_OPTIONS=suppressions=$TESTS/lib/lsan.supp:print_suppressions=0
    alloc_sweep "flow" 300 "$T/plain.h5" flow IN -o OUT.h5
else
    echo "    (no FAULT_ATTNRUN: the allocation-failure sweep is skipped)"
fi

finish
