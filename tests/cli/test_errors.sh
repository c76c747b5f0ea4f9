#!/usr/bin/env bash
# Command-line error tests for attnrun (docs/contract.md §4 and §5).
#
#   bash tests/cli/test_errors.sh            # from the repository root
#
# Environment:
#   ATTNRUN   the binary under test (default: build/attnrun)
#   PYTHON    a python with numpy and h5py (default: /usr/bin/python3, the
#             Debian one with python3-numpy and python3-h5py)
#
# Every input file is made at test time in a temporary directory that is
# removed on exit. For each failing run the script checks: the exact exit
# status, that stderr is exactly one line starting with "attnrun: ", that no
# signal ended the process, that it finished within 10 s, and that no file
# under the work directory was created, removed or changed (so no OUT, no
# ".OUT.attnrun-tmp-XXXXXX" leftover, and the input byte-identical).
#
# Output: "ok N NAME", "FAIL N NAME: WHY", "skip N NAME: WHY" per case, then
# "errors: P passed, F failed[, S skipped]". Exit status 1 if any case failed.

set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
PYTHON=${PYTHON:-/usr/bin/python3}
TIME_LIMIT=10
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # errors_cases.py

# A relative path to the binary is taken from the directory we started in.
case $ATTNRUN in
    /*) ;;
    */*) ATTNRUN=$PWD/$ATTNRUN ;;
esac

n_case=0 n_pass=0 n_fail=0 n_skip=0
QUICK=                          # the quick tier (tests/README.md): the first 4 cases
[ "${ATTN_TEST_TIER:-full}" = quick ] && QUICK=1

T=$(mktemp -d "${TMPDIR:-/tmp}/attnrun-errors.XXXXXX") || exit 1
W=$T/work       # everything attnrun gets to see; snapshotted around each run
I=$W/in         # input files
O=$W/out        # output directory
RO=$W/ro        # unwritable output directory (case 11)
C=$T/capture    # stdout/stderr of the run under test
RO_MOUNTED=0

# shellcheck disable=SC2317  # called through the trap
cleanup() {
    if [ "$RO_MOUNTED" = 1 ]; then
        umount "$RO" 2>/dev/null || umount -l "$RO" 2>/dev/null
    fi
    chmod -R u+rwx "$T" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$I" "$O" "$RO" "$C"

# ---------------------------------------------------------------- helpers

finish() {
    local line="errors: $n_pass passed, $n_fail failed"
    [ "$n_skip" -gt 0 ] && line="$line, $n_skip skipped"
    echo "$line"
    [ "$n_fail" -eq 0 ]
    exit $?
}

setup_failed() {
    echo "FAIL 0 setup: $*"
    n_fail=$((n_fail + 1))
    finish
}

# One line per entry under $W: path, type and, for a regular file, the start
# of its sha256. Any created, removed or modified file changes the snapshot.
# (One sha256sum for every file: a process per file made this suite slow.)
snapshot() {
    (
        cd "$W" || exit 1
        find . -mindepth 1 ! -type f -printf '%p\t%y\n'
        find . -mindepth 1 -type f -exec sha256sum {} + |
            awk '{ printf "%s\tf\t%s\n", substr($0, 67), substr($1, 1, 16) }'
    ) | LC_ALL=C sort
}

# Describes how snapshot $2 differs from snapshot $1 on one line, e.g.
# "new ./out/.c01.h5.attnrun-tmp-Ab12Cd; changed ./in/good.h5". Empty when
# they are the same.
snapshot_diff() {
    awk -F '\t' '
        NR == FNR { before[$1] = $0; next }
        { after[$1] = $0 }
        END {
            for (p in before)
                if (!(p in after)) out = out "; removed " p
                else if (after[p] != before[p]) out = out "; changed " p
            for (p in after)
                if (!(p in before)) out = out "; new " p
            print substr(out, 3)
        }' <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}

# Runs the binary with a time limit, no stdin and $W as working directory (so
# a stray file written to the current directory is noticed too); sets RC.
# The outer redirection keeps bash's own "Segmentation fault" notice out of
# the report.
run_attnrun() {
    {
        (cd "$W" && exec timeout -k 2 "$TIME_LIMIT" "$ATTNRUN" "$@") \
            </dev/null >"$C/stdout" 2>"$C/stderr"
        RC=$?
    } 2>/dev/null
}

# The captured stderr, newlines shown as \n, cut to a readable length.
stderr_text() {
    head -c 600 "$C/stderr" | sed ':a;N;$!ba;s/\n/\\n/g'
}

# Appends to WHY when the status says the process did not exit by itself.
check_termination() {
    case $RC in
        124) WHY+=("did not finish within ${TIME_LIMIT} s") ;;
        126 | 127) WHY+=("could not run $ATTNRUN (status $RC)") ;;
        *) [ "$RC" -ge 128 ] && WHY+=("killed by signal $((RC - 128)) (status $RC)") ;;
    esac
}

# Appends to WHY unless stderr is exactly one line starting with "attnrun: ".
check_error_line() {
    local lines
    if [ ! -s "$C/stderr" ]; then
        WHY+=("stderr is empty")
        return
    fi
    lines=$(wc -l <"$C/stderr")
    if [ "$(tail -c 1 "$C/stderr" | od -An -c | tr -d ' ')" != '\n' ]; then
        WHY+=("stderr does not end with a newline")
    elif [ "$lines" -ne 1 ]; then
        WHY+=("stderr has $lines lines, expected 1")
    fi
    if [ "$(head -c 9 "$C/stderr")" != "attnrun: " ]; then
        WHY+=("stderr does not start with 'attnrun: '")
    fi
}

# Prints the verdict for the current case from WHY.
report() {
    local name=$1 why
    if [ "${#WHY[@]}" -eq 0 ]; then
        echo "ok $n_case $name"
        n_pass=$((n_pass + 1))
        [ -n "${QUICK:-}" ] && [ "$n_pass" -ge 4 ] && finish     # the quick tier (checks.sh)
    else
        why=$(printf '%s; ' "${WHY[@]}")
        echo "FAIL $n_case $name: ${why%; }; stderr: '$(stderr_text)'"
        n_fail=$((n_fail + 1))
    fi
}

# errors_cases COMMAND ARG: tests/ref/errors_cases.py (the inputs, and the
# look of a valid run's output).
errors_cases() { "$PYTHON" "$TESTS/ref/errors_cases.py" "$@"; }

skip_case() {
    n_case=$((n_case + 1))
    n_skip=$((n_skip + 1))
    echo "skip $n_case $1: $2"
}

# run_case ARGS...: the next case: attnrun ARGS run between two snapshots
# of $W (BEFORE, AFTER), WHY emptied, then how it ended checked.
run_case() {
    n_case=$((n_case + 1))
    WHY=()
    BEFORE=$(snapshot)
    run_attnrun "$@"
    AFTER=$(snapshot)
    check_termination
}

# expect_failure CODE NAME [--stderr-has TEXT] [--stderr-lacks TEXT] -- ARGS...
#   Runs attnrun ARGS and expects exit status CODE, one "attnrun: " line on
#   stderr (containing TEXT if given; not containing --stderr-lacks' TEXT),
#   and no change to any file.
expect_failure() {
    local code=$1 name=$2 must_have="" must_lack=""
    shift 2
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
        case $1 in
            --stderr-has) must_have=$2; shift 2 ;;
            --stderr-lacks) must_lack=$2; shift 2 ;;
            *) echo "expect_failure: unknown option $1" >&2; exit 2 ;;
        esac
    done
    [ "${1:-}" = "--" ] && shift
    run_case "$@"
    [ "$RC" -eq "$code" ] || WHY+=("exit status $RC, expected $code")
    check_error_line
    if [ -n "$must_have" ] && ! grep -qF -- "$must_have" "$C/stderr"; then
        WHY+=("stderr does not mention '$must_have'")
    fi
    if [ -n "$must_lack" ] && grep -qF -- "$must_lack" "$C/stderr"; then
        WHY+=("stderr mentions '$must_lack'")
    fi
    [ "$BEFORE" = "$AFTER" ] || WHY+=("files: $(snapshot_diff "$BEFORE" "$AFTER")")
    report "$name"
}

# expect_info NAME PATTERN -- ARGS...
#   For --help and --version: exit 0, stdout matching PATTERN (grep -Ei),
#   nothing on stderr, no change to any file.
expect_info() {
    local name=$1 pattern=$2
    shift 2
    [ "${1:-}" = "--" ] && shift
    run_case "$@"
    [ "$RC" -eq 0 ] || WHY+=("exit status $RC, expected 0")
    if [ ! -s "$C/stdout" ]; then
        WHY+=("nothing on stdout")
    elif ! grep -qEi -- "$pattern" "$C/stdout"; then
        WHY+=("stdout does not match /$pattern/")
    fi
    [ -s "$C/stderr" ] && WHY+=("stderr is not empty")
    [ "$BEFORE" = "$AFTER" ] || WHY+=("files: $(snapshot_diff "$BEFORE" "$AFTER")")
    report "$name"
}

# expect_success NAME OUT -- ARGS...
#   Exit 0, nothing on stderr, OUT is the only change under the work
#   directory (so no temporary file is left and the input is unchanged), and
#   OUT is an HDF5 file whose "output" and "weights" look like attention.
expect_success() {
    local name=$1 out=$2 changes
    shift 2
    [ "${1:-}" = "--" ] && shift
    run_case "$@"
    [ "$RC" -eq 0 ] || WHY+=("exit status $RC, expected 0")
    [ -s "$C/stderr" ] && WHY+=("stderr is not empty")
    changes=$(snapshot_diff "$BEFORE" "$AFTER")
    [ "$changes" = "new ./${out#"$W"/}" ] ||
        WHY+=("files: expected only 'new ./${out#"$W"/}', got '$changes'")
    if [ -f "$out" ] && ! errors_cases valid-output "$out" >"$C/check" 2>&1; then
        WHY+=("reading OUT: $(tail -n 1 "$C/check")")
    fi
    report "$name"
}

# ---------------------------------------------------------------- setup

if ! command -v "$ATTNRUN" >/dev/null 2>&1; then
    setup_failed "binary '$ATTNRUN' not found (build it, or set ATTNRUN)"
fi
if ! "$PYTHON" -c 'import numpy, h5py' 2>/dev/null; then
    setup_failed "'$PYTHON' cannot import numpy and h5py (apt-get install python3-numpy python3-h5py, or set PYTHON)"
fi

# good.h5 is a valid input for --heads 2; every bad file differs from it in
# one respect only.
if ! errors_cases inputs "$I" >"$C/make" 2>&1; then
    setup_failed "making input files: $(tail -n 1 "$C/make")"
fi

GOOD=$I/good.h5
printf 'an existing output that must survive\n' >"$O/existing.h5"

# Results for attnrun plot: an --append index of 12 groups, and a file
# holding its results in /layer3/results.
for layer in 0 1 2 3 4 5 6 7 8 9 10 11; do
    "$ATTNRUN" "$GOOD" -o "$I/results.h5" --append --group "/layer$layer" --heads 2 \
        >"$C/make" 2>&1 || setup_failed "appending /layer$layer: $(tail -n 1 "$C/make")"
done
cp "$GOOD" "$I/inplace.h5"
"$ATTNRUN" "$I/inplace.h5" --in-place --group /layer3/results --heads 2 >"$C/make" 2>&1 ||
    setup_failed "--in-place: $(tail -n 1 "$C/make")"

# ---------------------------------------------------------------- cases

# Input rejected: exit 3.
expect_failure 3 "missing input file" -- "$I/no_such_file.h5" -o "$O/c01.h5" --heads 2
expect_failure 3 "input is not HDF5" -- "$I/text.h5" -o "$O/c02.h5" --heads 2
expect_failure 3 "missing dataset W_V" -- "$I/no_wv.h5" -o "$O/c03.h5" --heads 2
expect_failure 3 "X of rank 4" -- "$I/x_rank4.h5" -o "$O/c04.h5" --heads 2
expect_failure 3 "d_model of X and W_Q disagree" -- "$I/wq_7x8.h5" -o "$O/c05.h5" --heads 2
expect_failure 3 "columns not divisible by --heads" -- "$GOOD" -o "$O/c06.h5" --heads 3
expect_failure 3 "--heads disagrees with 3-D weights" -- "$I/per_head.h5" -o "$O/c07.h5" --heads 4
expect_failure 3 "integer X" -- "$I/x_int32.h5" -o "$O/c08.h5" --heads 2
expect_failure 3 "NaN in W_K" --stderr-has W_K -- "$I/nan_wk.h5" -o "$O/c09.h5" --heads 2

# Existing OUT without --force: usage error, OUT untouched (the snapshot
# compares its checksum).
expect_failure 2 "existing OUT without --force" -- "$GOOD" -o "$O/existing.h5" --heads 2

# Unwritable output directory: runtime failure. Root ignores permission bits,
# so as root the directory is a read-only tmpfs instead.
if [ "$(id -u)" -eq 0 ]; then
    if mount -t tmpfs -o ro tmpfs "$RO" 2>"$C/mount"; then
        RO_MOUNTED=1
    fi
else
    chmod 555 "$RO"
fi
if touch "$RO/.probe" 2>/dev/null; then
    rm -f "$RO/.probe"
    skip_case "unwritable output directory" "cannot make an unwritable directory here ($(head -n 1 "$C/mount" 2>/dev/null))"
else
    expect_failure 1 "unwritable output directory" -- "$GOOD" -o "$RO/c11.h5" --heads 2
fi
if [ "$RO_MOUNTED" = 1 ]; then
    umount "$RO" && RO_MOUNTED=0
else
    chmod 755 "$RO"
fi

# Usage errors: exit 2.
expect_failure 2 "--heads abc" -- "$GOOD" -o "$O/c12.h5" --heads abc
# --force must not override the OUT == IN rule.
expect_failure 2 "OUT equal to IN" -- "$GOOD" -o "$GOOD" --heads 2 --force
expect_failure 2 "no -o and no --in-place" -- "$GOOD" --heads 2
expect_failure 2 "unknown option" -- "$GOOD" -o "$O/c15.h5" --heads 2 --no-such-option

# Unknown names: the nearest one of the list is named (cli_nearest).
expect_failure 2 "unknown option: did you mean" \
    --stderr-has "unknown option '--casual'; did you mean --causal? (see attnrun --help)" -- \
    "$GOOD" -o "$O/c30.h5" --heads 2 --casual
expect_failure 2 "unknown option with a value: did you mean" \
    --stderr-has "unknown option '--precison=f64'; did you mean --precision?" -- \
    "$GOOD" -o "$O/c31.h5" --heads 2 --precison=f64
expect_failure 2 "ambiguous option: its options" \
    --stderr-has "option '--ro' is ambiguous; did you mean --rope, --rope-dim or --rope-style?" -- \
    "$GOOD" -o "$O/c32.h5" --heads 2 --ro 10000
# A mistyped subcommand names no file: the subcommand meant, with the
# exit status of a missing input; a word near none keeps the plain message.
expect_failure 3 "mistyped subcommand: did you mean" \
    --stderr-has "attnrun: plto: no such file, nor a subcommand; did you mean attnrun plot?" -- \
    plto "$O/c29.h5" -o "$O/c29.png"
expect_failure 3 "missing input near no subcommand: the plain message" \
    --stderr-has "attnrun: data: cannot read input: No such file or directory" -- \
    data -o "$O/c29.h5" --heads 2
expect_failure 2 "unknown option far from every option: no guess" \
    --stderr-has "unknown option '--zzzzzz' (see attnrun --help)" -- \
    "$GOOD" -o "$O/c33.h5" --heads 2 --zzzzzz
expect_failure 2 "unknown preset: did you mean" \
    --stderr-has "; did you mean llama? (see attnrun --help)" -- \
    "$GOOD" -o "$O/c34.h5" --heads 2 --preset lama
expect_failure 2 "unknown --save name: did you mean" \
    --stderr-has "unknown output 'wieghts' in 'output,wieghts' (choose from scores,weights," -- \
    "$GOOD" -o "$O/c35.h5" --heads 2 --save output,wieghts
expect_failure 2 "unknown --save name: the suggestion" \
    --stderr-has "value_norm); did you mean weights? (see attnrun --help)" -- \
    "$GOOD" -o "$O/c36.h5" --heads 2 --save output,wieghts
expect_failure 2 "unknown --layout: did you mean" \
    --stderr-has "--layout 'linar': expected xw (x W) or linear (x W^T, torch.nn.Linear); did you mean linear?" -- \
    "$GOOD" -o "$O/c37.h5" --heads 2 --layout linar
expect_failure 2 "unknown --store: did you mean" \
    --stderr-has "--store 'bf61': expected f16, bf16, f32 or f64; did you mean bf16?" -- \
    "$GOOD" -o "$O/c38.h5" --heads 2 --store bf61
expect_failure 2 "unknown --rope-style: did you mean" \
    --stderr-has "--rope-style 'gpt-j': expected neox (halves) or gptj (adjacent pairs); did you mean gptj?" -- \
    "$GOOD" -o "$O/c39.h5" --heads 2 --rope 10000 --rope-style gpt-j
expect_failure 2 "unknown --qkv-split: did you mean" \
    --stderr-has "--qkv-split 'head': expected blocks ([Q;K;V]) or heads (per head [q|k|v]); did you mean heads?" -- \
    "$GOOD" -o "$O/c40.h5" --heads 2 --qkv-split head
expect_failure 2 "plot: unknown option: did you mean" \
    --stderr-has "unknown option '--haeds'; did you mean --heads? (see attnrun plot --help)" -- \
    plot "$GOOD" -o "$O/c41.png" --haeds 0
expect_failure 2 "plot: unknown --what: did you mean" \
    --stderr-has "--what 'entropie': expected weights, scores, norms, mean, entropy, distance, value_norm, rollout, flow, first, previous, self, duplicate or induction; did you mean entropy?" -- \
    plot "$GOOD" -o "$O/c42.png" --what entropie

# Weights stored for the other layout: the hint names it, and it works.
expect_failure 3 "torch.nn.Linear weights without --layout linear" \
    --stderr-has "linear.h5: W_Q has shape (16, 8); axis 0 must be d_model = 8 (axis 1 is: the weights look stored (out, in) for x W^T, as torch.nn.Linear keeps them); use --layout linear" -- \
    "$I/linear.h5" -o "$O/c50.h5" --heads 2
expect_success "... with --layout linear" "$O/c51.h5" -- "$I/linear.h5" -o "$O/c51.h5" --heads 2 --layout linear
expect_failure 3 "x W weights with --layout linear" \
    --stderr-has "xw_wide.h5: W_Q has shape (8, 16); axis 1 must be d_model = 8 (axis 0 is: the weights look stored (in, out) for x W); use --layout xw" -- \
    "$I/xw_wide.h5" -o "$O/c52.h5" --heads 2 --layout linear
expect_failure 3 "a shape neither layout fits: no layout named" \
    --stderr-has "wq_7x8.h5: W_Q has shape (7, 8); axis 0 must be d_model = 8" -- \
    "$I/wq_7x8.h5" -o "$O/c53.h5" --heads 2
if grep -q -- "--layout" "$C/stderr"; then
    n_case=$((n_case + 1)); WHY=("a (7, 8) W_Q was told to change --layout"); report "... and no --layout"
fi

# A float (Hugging Face, additive) mask given as --mask: it is an
# attention bias, which takes its head axis of 1.
expect_failure 3 "float (B, 1, n, m) mask as --mask" \
    --stderr-has "hf_mask.h5: dataset attention_mask has floating-point elements; the key padding mask is integer or boolean (nonzero: the key may be attended); floats (2, 1, 4, 4) added to the logits are an attention bias; pass it as --attn-bias attention_mask instead of --mask" -- \
    "$I/hf_mask.h5" -o "$O/c54.h5" --heads 2 --mask attention_mask
expect_success "... as --attn-bias" "$O/c55.h5" -- "$I/hf_mask.h5" -o "$O/c55.h5" --heads 2 --attn-bias attention_mask
# an attention bias not found: the float dataset whose last two axes are
# (n, m) = (4, 4), though its head axis (1) is not n
expect_failure 3 "an attention bias missing: the floats of its (n, m)" \
    --stderr-has "hf_mask.h5: no dataset bias; attention_mask (2, 1, 4, 4) could be the attention bias; pass --attn-bias attention_mask" -- \
    "$I/hf_mask.h5" -o "$O/c56.h5" --heads 2 --attn-bias bias

# A dataset not found: what the file holds that fits (type, rank, an axis
# the other inputs give), else the nearest name; a weight not under the
# weights group: the group that holds it.
expect_failure 3 "X missing: the dataset of X's shape" \
    --stderr-has "hidden.h5: no dataset X; hidden_states (2, 4, 8) could be the queries; pass --x hidden_states" -- \
    "$I/hidden.h5" -o "$O/c60.h5" --heads 2
expect_success "... with --x hidden_states" "$O/c61.h5" -- "$I/hidden.h5" -o "$O/c61.h5" --heads 2 --x hidden_states
# A mask of strings is neither a mask nor an attention bias: refused, never
# dropped (the run would go on without it)
expect_failure 3 "tokens as --mask" \
    --stderr-has "hidden.h5: dataset input_tokens has string elements; integer or boolean expected" -- \
    "$I/hidden.h5" -o "$O/c90.h5" --heads 2 --x hidden_states --mask input_tokens
expect_failure 3 "a mask missing: the integer dataset of its shape (not labels of n + 1 keys)" \
    --stderr-has "hidden.h5: no dataset pad; attention_mask (2, 4) could be the key padding mask; pass --mask attention_mask" -- \
    "$I/hidden.h5" -o "$O/c62.h5" --heads 2 --x hidden_states --mask pad
expect_failure 3 "a mask missing, three datasets of its shape: each named, in the file's order" \
    --stderr-has "three_masks.h5: no dataset pad; mask_a (2, 4), mask_b (2, 4) or mask_c (2, 4) could be the key padding mask; pass --mask mask_a" -- \
    "$I/three_masks.h5" -o "$O/c62b.h5" --heads 2 --mask pad
expect_failure 3 "a mask missing under grp1: masks of other groups in the file's order (grp2 is not grp1)" \
    --stderr-has "sibling_masks.h5: no dataset grp1/pad; /aaa/m (2, 4) or /grp2/m (2, 4) could be the key padding mask; pass --mask /aaa/m" -- \
    "$I/sibling_masks.h5" -o "$O/c62c.h5" --heads 2 --mask grp1/pad
expect_failure 3 "a mask missing, a dataset HDF5 cannot open listed first: left out, the next named" \
    --stderr-has "unopenable.h5: no dataset pad; mask_b (2, 4) could be the key padding mask; pass --mask mask_b" -- \
    "$I/unopenable.h5" -o "$O/c62f.h5" --heads 2 --mask pad
expect_failure 3 "a preset's name that is a group: the message names the preset's input" \
    --stderr-has "preset_group.h5: c_attn.bias is not a dataset (the fused Q|K|V bias of preset gpt2)" -- \
    "$I/preset_group.h5" -o "$O/c62d.h5" --heads 2 --preset gpt2
expect_failure 3 "a name given that is a group, with a preset: no preset named, the name was given" \
    --stderr-has "preset_group.h5: other is not a dataset" --stderr-lacks "preset gpt2" -- \
    "$I/preset_group.h5" -o "$O/c62e.h5" --heads 2 --preset gpt2 --bo other
expect_failure 3 "tokens missing: the strings of their shape" \
    --stderr-has "hidden.h5: the tokens dataset toks does not exist; input_tokens (2, 4) could be the tokens; pass --tokens input_tokens" -- \
    "$I/hidden.h5" -o "$O/c63.h5" --heads 2 --x hidden_states --tokens toks
expect_failure 3 "X missing, nothing of its shape: the nearest name" \
    --stderr-has "near_name.h5: no dataset X; the nearest name is x; pass --x x" -- \
    "$I/near_name.h5" -o "$O/c64.h5" --heads 2
expect_failure 3 "X missing, nothing of its shape: the nearest name at the most edits allowed" \
    --stderr-has "near_edit.h5: no dataset X; the nearest name is Xa; pass --x Xa" -- \
    "$I/near_edit.h5" -o "$O/c64b.h5" --heads 2
expect_failure 3 "W_V missing, nothing near: no guess" \
    --stderr-has "no_wv.h5: no dataset W_V" -- \
    "$I/no_wv.h5" -o "$O/c65.h5" --heads 2
if [ "$(cat "$C/stderr")" != "attnrun: $I/no_wv.h5: no dataset W_V" ]; then
    n_case=$((n_case + 1)); WHY=("a guess where none fits"); report "... nothing after it"
fi
expect_failure 3 "a preset's weights under other groups: the first of them" \
    --stderr-has "layers.h5: no dataset q_proj.weight (the query weights of preset llama); group /model/layers.0/self_attn holds q_proj.weight (as do 11 other groups); pass --weights-group /model/layers.0/self_attn" -- \
    "$I/layers.h5" -o "$O/c66.h5" --heads 2 --preset llama --rope 10000
expect_failure 3 "... under a group too short: the one inside it" \
    --stderr-has "layers.h5: no dataset /model/layers.3/q_proj.weight (the query weights of preset llama); group /model/layers.3/self_attn holds q_proj.weight (as do 11 other groups); pass --weights-group /model/layers.3/self_attn" -- \
    "$I/layers.h5" -o "$O/c67.h5" --heads 2 --preset llama --rope 10000 --weights-group /model/layers.3
expect_success "... with --weights-group /model/layers.0/self_attn" "$O/c68.h5" -- \
    "$I/layers.h5" -o "$O/c68.h5" --heads 2 --preset llama --rope 10000 --weights-group /model/layers.0/self_attn
expect_failure 3 "weights behind an external link: not looked for there" \
    --stderr-has "layers_external.h5: no dataset q_proj.weight (the query weights of preset llama)" -- \
    "$I/layers_external.h5" -o "$O/c69.h5" --heads 2 --preset llama --rope 10000
if grep -q "weights-group\|model/" "$C/stderr"; then
    n_case=$((n_case + 1)); WHY=("named what lies behind an external link"); report "... nothing after it"
fi

# attnrun plot on a group that holds no results: the groups that do.
# (The index lists its groups in its own order: /layer0, /layer1 first.)
expect_failure 3 "plot: an --append index without --group: its groups" \
    --stderr-has "results.h5 is an --append index of 12 groups (/layer0, /layer1, /layer" -- \
    plot "$I/results.h5" -o "$O/c70.png"
if ! grep -qF ", ...); choose one with --group" "$C/stderr"; then
    n_case=$((n_case + 1)); WHY=("no '..., choose one with --group'"); report "... and --group"
fi
expect_failure 3 "plot: an index's group that is not there: the groups that are" \
    --stderr-has "; the index's groups are /layer0, /layer1, /layer" -- \
    plot "$I/results.h5" -o "$O/c71.png" --group /layer99
expect_failure 3 "plot: no results at /: the group holding them" \
    --stderr-has "inplace.h5: no dataset weights in group /; results are in /layer3/results; choose one with --group" -- \
    plot "$I/inplace.h5" -o "$O/c72.png"
expect_failure 3 "plot: a group holding results but not the map: no other group named" \
    --stderr-has "inplace.h5: no dataset entropy in group /layer3/results (run attnrun with --save entropy to have one)" -- \
    plot "$I/inplace.h5" -o "$O/c73.png" --group /layer3/results --what entropy

# Informational options.
expect_info "--help" 'usage' -- --help
expect_info "--version" 'attnrun' -- --version

# Sanity: a valid run succeeds, so the harness can tell success from failure.
expect_success "valid run" "$O/c18.h5" -- "$GOOD" -o "$O/c18.h5" --heads 2

# Extras.
# OUT naming IN through another spelling of the same path.
expect_failure 2 "OUT is IN by another path" -- "$GOOD" -o "$I/../in/./good.h5" --heads 2 --force
# Control for case 7: the same 3-D weights with the matching --heads work.
expect_success "3-D weights with matching --heads" "$O/c20.h5" -- "$I/per_head.h5" -o "$O/c20.h5" --heads 2

finish
