#!/usr/bin/env bash
# tests/cli/test_docs.sh - the documentation says what attnrun does, and the
# repository stands alone:
#   * no file of the repository points at files outside it (a contract or
#     a source text kept elsewhere, machine paths); LICENSE is the MIT
#     license of the attnrun authors and README names it;
#   * every "§N" cites a section docs/contract.md has, and every relative
#     link of README.md, HACKING.md, bench/README.md, tests/README.md and
#     docs/*.md leads to a file (and heading) that exists;
#   * the worked example (docs/contract.md §7, README "The toy example"):
#     every number printed agrees, to its printed digits, with float64 numpy
#     computed from the example's definition, and so does attnrun's output
#     on fixtures/toy.h5;
#   * make demo's script (scripts/demo.sh) prints the commands it runs and
#     leaves the toy example's results where it says, the file that the
#     README names;
#   * README "From a Hugging Face layer to a picture": the stand-in export of
#     examples/hf-export.py has the names, shapes and types of GPT-2 small's
#     layer that the gpt2 preset reads, and attnrun on it agrees with
#     tests/ref/models_ref.py's gpt2() and with the export's /reference;
#   * the manual page, the one reference of the options, names every choice
#     of every option that takes one, as --help does and as the program
#     accepts (--save, --preset, --store, ...), for attnrun and each
#     subcommand (plot, rollout, heads) in its own section; the options
#     known to check their values refuse a nonsense one
#     (tests/ref/man_help_check.py).
# That every command the pages show runs as written is
# tests/cli/test_doc_commands.sh's.  The checks of numbers are in
# tests/ref/docs_check.py, those of the walkthrough's files against each
# other in tests/ref/walkthrough_files_check.py.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_docs.sh     # from the repository root
#
# Environment: ATTNRUN (default build/attnrun), PYTHON (a python with numpy
# and h5py; default /usr/bin/python3), TIME_LIMIT (hang guard of one run in
# seconds, default 60).  Each check prints "ok NAME" or "FAIL NAME: WHY";
# the last line is "docs: N passed, M failed"; the exit status is 1 when
# M > 0.
set -u

TIME_LIMIT=${TIME_LIMIT:-60}

SUITE="docs"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, docs_check.py, models_ref.py
. "$TESTS/lib/checks.sh"

suite_setup docs numpy h5py

# run_ok NAME LOG COMMAND...: runs COMMAND (stdout and stderr to LOG) under
# the hang guard; a check that it ended with status 0.
run_ok() {
    local name=$1 log=$2 rc
    shift 2
    timeout -s KILL "$TIME_LIMIT" "$@" >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        ok "$name"
    else
        bad "$name: exit $rc: $(tail -n 3 "$log" | tr '\n' ' ' | head -c 300)"
    fi
    return "$rc"
}

# check_py NAME ARGS...: tests/ref/docs_check.py ARGS, its verdicts counted.
check_py() {
    local name=$1 rc
    shift
    PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/docs_check.py" "$@" >"$T/$name.log" 2>&1
    rc=$?
    report_verdicts "$T/$name.log" "$rc"
}

# walkthrough_files CHECK ARGS...: tests/ref/walkthrough_files_check.py, the
# walkthrough's files against each other; status 0 when the check holds.
walkthrough_files() {
    PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/walkthrough_files_check.py" "$@"
}

# ------------------------------------------------------- standing alone

# Written so that this file does not match itself.
outside='DESIG[N]|shared/(seed|DESIG[N]|STYL[E])|seed/0{3}_|(^|[^A-Za-z0-9_.-])/wor[k]/|/tmp/w[t]/'
hits=$(cd "$ROOT" && find . \( -name .git -o -name build \) -prune -o -type f -print0 |
       xargs -0 grep -IlE "$outside" 2>/dev/null)
if [ -z "$hits" ]; then
    ok "no file points outside the repository"
else
    bad "files that point outside the repository: $(echo $hits) ($(cd "$ROOT" && grep -nE "$outside" $hits | head -n 3 | tr '\n' ' '))"
fi

if [ -f "$ROOT/LICENSE" ] && head -n 1 "$ROOT/LICENSE" | grep -qx 'MIT License' &&
   grep -qx 'Copyright (c) 2026 the attnrun authors' "$ROOT/LICENSE" &&
   grep -q 'THE SOFTWARE IS PROVIDED "AS IS"' "$ROOT/LICENSE"; then
    ok "LICENSE is the MIT license of the attnrun authors"
else
    bad "LICENSE is missing or not the MIT license of the attnrun authors"
fi
if grep -q '(LICENSE)' "$ROOT/README.md"; then
    ok "README links LICENSE"
else
    bad "README does not link LICENSE"
fi

check_py links links "$ROOT"

# ------------------------------------------------------- the worked example

if run_ok "attnrun fixtures/toy.h5 --heads 1 (the worked example)" "$T/toy.log" \
        "$ATTNRUN" "$ROOT/fixtures/toy.h5" -o "$T/toy.out.h5" --heads 1 -q; then
    check_py toy toy "$ROOT" "$T/toy.out.h5"
fi

# ------------------------------------------------------- make demo

# The Makefile runs `sh scripts/demo.sh $(BIN) build/demo`; here into $T.
if (cd "$ROOT" && timeout -s KILL "$TIME_LIMIT" sh scripts/demo.sh "$ATTNRUN" "$T/demo") \
        >"$T/demo.log" 2>&1; then
    if [ -f "$T/demo/toy.out.h5" ] && grep -q "^\\$ .* fixtures/toy.h5 -o $T/demo/toy.out.h5 --heads 1" "$T/demo.log" &&
       grep -q "^The results are in $T/demo/toy.out.h5" "$T/demo.log" &&
       grep -q '(0,1,0): 0.273728, 0.164478, 0.22902, 0.332773' "$T/demo.log"; then
        ok "make demo's script shows its commands and the weights, and leaves the results where it says"
    else
        bad "make demo's script: no results file, or not the commands or the place shown: $(tail -n 2 "$T/demo.log" | tr '\n' ' ')"
    fi
else
    bad "make demo's script failed: $(tail -n 3 "$T/demo.log" | tr '\n' ' ')"
fi
if grep -q '^demo:' "$ROOT/Makefile" && grep -q 'scripts/demo.sh $(BIN) $(BUILD)/demo' "$ROOT/Makefile" &&
   grep -q 'build/demo/toy.out.h5' "$ROOT/README.md"; then
    ok "make demo leaves build/demo/toy.out.h5, where the README says"
else
    bad "make demo's directory and the README's build/demo/toy.out.h5 disagree"
fi

# ------------------------------------------------------- the manual page's choices

PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/man_help_check.py" "$ATTNRUN" "$ROOT/man/attnrun.1" \
    "$ROOT" "$T/choices" >"$T/choices.log" 2>&1
report_verdicts "$T/choices.log" $?

# ------------------------------------------------------- the walkthrough

export_script=$ROOT/examples/hf-export.py
if run_ok "examples/hf-export.py --stand-in --layer 3" "$T/export.log" \
        "$PY" "$export_script" --stand-in --layer 3 "$T/layer3.h5"; then
    check_py export export "$T/layer3.h5"
    # The README's commands (test_doc_commands.sh runs them as written);
    # here their results against the reference.
    if run_ok "attnrun layer3.h5 --preset gpt2 --heads 12 --mask attention_mask --tokens tokens" \
            "$T/run3.log" "$ATTNRUN" "$T/layer3.h5" -o "$T/out.h5" --preset gpt2 --heads 12 \
            --mask attention_mask --tokens tokens --save weights,entropy,output -q; then
        check_py walkthrough walkthrough "$T/layer3.h5" "$T/out.h5"
        if walkthrough_files tokens-entropy "$T/layer3.h5" "$T/out.h5"; then
            ok "walkthrough: the tokens on both axes, entropy = -sum p log p of the weights"
        else
            bad "walkthrough: tokens or entropy differ from the export and the weights"
        fi
        if run_ok "attnrun plot out.h5 --heads 0-3 -o layer3.png" "$T/plot3.log" \
                "$ATTNRUN" plot "$T/out.h5" --heads 0-3 -o "$T/layer3.png" &&
           [ "$(head -c 8 "$T/layer3.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
            ok "walkthrough: attnrun plot writes a PNG"
        else
            bad "walkthrough: attnrun plot wrote no PNG"
        fi
    fi
    # Two layers gathered with --append, then one of them drawn from the index.
    appended=0
    for L in 3 5; do
        "$PY" "$export_script" --stand-in --layer "$L" "$T/layer$L.h5" >/dev/null 2>&1 &&
        "$ATTNRUN" "$T/layer$L.h5" -o "$T/results.h5" --group "/layer$L" --append --preset gpt2 \
            --heads 12 --mask attention_mask --tokens tokens --save weights,entropy,output -q &&
        appended=$((appended + 1))
    done
    if [ "$appended" = 2 ] &&
       "$ATTNRUN" plot "$T/results.h5" --group /layer5 --heads 0-3 -o "$T/layer5.png" &&
       walkthrough_files same-weights "$T/results.h5" "$T/out.h5"; then
        ok "walkthrough: layers 3 and 5 appended to results.h5, layer 3 equal to out.h5, layer 5 drawn"
    else
        bad "walkthrough: the --append loop or its picture failed"
    fi
fi

# Without torch and transformers the script says so and writes the stand-in.
if PYTHONPATH= "$PY" -c 'import torch, transformers' 2>/dev/null; then
    echo "skip export fallback: torch and transformers are importable here"
elif run_ok "examples/hf-export.py without transformers" "$T/fallback.log" \
        "$PY" "$export_script" "$T/fallback.h5"; then
    if grep -q 'writing a stand-in' "$T/fallback.log" &&
       walkthrough_files same-datasets "$T/layer3.h5" "$T/fallback.h5"; then
        ok "without transformers: a message, and the stand-in of layer 3"
    else
        bad "without transformers: no message, or not the same file as --stand-in"
    fi
fi

timeout -s KILL "$TIME_LIMIT" "$PY" "$export_script" --stand-in --layer 12 "$T/bad.h5" >"$T/bad.log" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && [ ! -e "$T/bad.h5" ]; then
    ok "examples/hf-export.py --layer 12 is a usage error"
else
    bad "examples/hf-export.py --layer 12: exit $rc"
fi

finish
