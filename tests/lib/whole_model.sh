# tests/lib/whole_model.sh - the layers test_rollout.sh and test_flow.sh
# read: tests/ref/rollout_ref.py's four-layer model run by attnrun into
# --append results files, and the files of layers that do not go together.
# Sourced after checks.sh's suite_setup (it uses $T, run, ref, bad):
#
#   whole_model_inputs            # $M: the model's inputs (or the suite ends)
#   layer RESULTS GROUP I ARGS... # layer I appended to RESULTS as GROUP
#   whole_model_results R MEANS   # its four layers, as weights and as means
#   mismatched_layers             # $T/sizes.h5, tokens.h5, cross.h5, none.h5

whole_model_inputs() {
    if ! ref rollout_ref.py inputs "$T" >"$T/inputs.log" 2>&1; then
        bad "setup: cannot write the inputs: $(tail -n 2 "$T/inputs.log" | tr '\n' ' ')"
        finish
    fi
    M=$T/model.h5
}

# layer RESULTS GROUP I ARGS...: attnrun on layer I of the model (its X and
# weights, 4 heads), appended to RESULTS as GROUP.
layer() {
    local why
    run "$M" -o "$1" --append --group "$2" --x "/l$3/X" --weights-group "/l$3" --heads 4 -q "${@:4}"
    why=$(run_problem "$rc" 0 "$T/stderr")
    [ -z "$why" ] || bad "setup: layer $3 as $2 of $(basename "$1"): $why"
}

# whole_model_results R MEANS: the four layers with their tokens -- plain,
# causal, GQA (--kv-heads 2), causal with a key mask that leaves query 0
# of item 0 no key -- saved as weights into R and as head means into MEANS.
whole_model_results() {
    local f out save
    for f in "$1:weights" "$2:mean"; do
        out=${f%%:*} save=${f#*:}
        layer "$out" /layer0 0 --tokens /tok --save "$save"
        layer "$out" /layer1 1 --tokens /tok --save "$save" --causal
        layer "$out" /layer2 2 --tokens /tok --save "$save" --kv-heads 2
        layer "$out" /layer3 3 --tokens /tok --save "$save" --causal --mask /mask
    done
}

# mismatched_layers: sizes.h5 (layers of 6 and 7 tokens), tokens.h5 (other
# tokens in item 1), cross.h5 (weights and a mean of cross-attention after
# a layer of self-attention), none.h5 (no maps saved).
mismatched_layers() {
    layer "$T/sizes.h5" /layer0 0 --save weights
    run "$M" -o "$T/sizes.h5" --append --group /layer1 --x /small/X --weights-group /l1 --heads 4 -q
    [ "$rc" -eq 0 ] || bad "setup: a layer of 7 tokens: exit $rc: $(head -c 300 "$T/stderr")"
    layer "$T/tokens.h5" /layer0 0 --save weights --tokens /tok
    layer "$T/tokens.h5" /layer1 1 --save weights --tokens /tok_other
    layer "$T/cross.h5" /layer0 0 --save weights
    layer "$T/cross.h5" /layer1 1 --save weights --kv /Y
    layer "$T/cross.h5" /layer2 2 --save mean --kv /Y
    layer "$T/none.h5" /layer0 0 --save output
    layer "$T/none.h5" /layer1 1 --save output --causal
}
