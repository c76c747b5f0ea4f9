#!/usr/bin/env bash
# tests/cli/test_fast.sh - the paths taken for speed give the same answers:
#   * --threads 1 and --threads 2 write bit-identical datasets;
#   * the online softmax (no maps saved) matches a float64 numpy reference
#     and the full path within the float32 tolerances;
#   * query rows in blocks (one item's maps larger than --memory) write
#     the same bits as the whole rows, and match the reference.
# The reference is written here from docs/contract.md §2, independently of
# attnrun.  Run from the repository root: ATTNRUN=build/attnrun bash tests/cli/test_fast.sh
set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
PYTHON=${PYTHON:-/usr/bin/python3}

SUITE="fast"
. "$(dirname "$0")/../lib/checks.sh"

if [ ! -x "$ATTNRUN" ]; then
    bad "setup: attnrun not found at $ATTNRUN"
    finish
fi
if ! "$PYTHON" -c 'import numpy, h5py' 2>/dev/null; then
    bad "setup: $PYTHON lacks numpy or h5py (Debian: python3-numpy python3-h5py)"
    finish
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# Inputs: several query blocks (64 rows) and projection blocks (128 rows)
# per item, so that the threads really share the work.
"$PYTHON" - "$tmp" <<'EOF' || { bad "setup: cannot write the inputs"; finish; }
import sys
import numpy as np
import h5py

d = sys.argv[1]
rng = np.random.default_rng(20261129)

def layer(f, D, H, bias):
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype("f4")
    if bias:
        for b in ("b_Q", "b_K", "b_V", "b_O"):
            f[b] = (0.1 * rng.standard_normal(D)).astype("f4")

with h5py.File(f"{d}/self.h5", "w") as f:          # B=3, n=200, D=48, H=4
    f["X"] = rng.standard_normal((3, 200, 48)).astype("f4")
    keep = rng.random((3, 200)) > 0.2
    keep[1, :] = False                              # an item with no key at all
    f["pad"] = keep
    layer(f, 48, 4, True)

with h5py.File(f"{d}/cross.h5", "w") as f:         # n=70 queries, m=700 keys
    f["X"] = rng.standard_normal((2, 70, 32)).astype("f4")
    f["mem"] = rng.standard_normal((2, 700, 32)).astype("f4")
    layer(f, 32, 4, False)

with h5py.File(f"{d}/many.h5", "w") as f:          # many small concurrent GEMMs
    f["X"] = rng.standard_normal((1024, 32, 64)).astype("f4")
    layer(f, 64, 4, False)

with h5py.File(f"{d}/nan.h5", "w") as f:           # --allow-nonfinite semantics
    x = rng.standard_normal((2, 300, 16)).astype("f4")
    x[1, 200, 3] = np.nan                           # reaches K and V of item 1
    f["X"] = x
    keep = np.ones((2, 300), bool)
    keep[0, :] = False                              # item 0: no key at all
    f["pad"] = keep
    layer(f, 16, 2, True)

with h5py.File(f"{d}/odd.h5", "w") as f:           # odd sizes: buffers end unaligned
    f["X"] = rng.standard_normal((3, 5, 6)).astype("f4")
    f["pad"] = rng.random((3, 5)) > 0.3
    layer(f, 6, 2, True)

with h5py.File(f"{d}/long.h5", "w") as f:          # one (1024, 1024) map per head
    f["X"] = rng.standard_normal((1, 1024, 16)).astype("f4")
    layer(f, 16, 2, True)
EOF

# compare A B exact|close|online: the datasets of A against B's -- exact:
# the same bytes; close: within float32 tolerance; online: the output only,
# within float32 tolerance.
compare() {
    "$PYTHON" - "$@" <<'EOF'
import sys
import numpy as np
import h5py

a_path, b_path, mode = sys.argv[1:4]
problems = []
with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
    names = [n for n in ("scores", "weights", "heads", "output", "q", "k", "v") if n in a]
    if mode == "online":
        names = ["output"]
    # close: every dataset within float32 tolerance (the masked -inf
    # scores must match exactly)
    if not names:
        problems.append("no datasets")
    for n in names:
        x, y = a[n][()], b[n][()]
        if x.shape != y.shape or x.dtype != y.dtype:
            problems.append(f"{n}: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
        elif mode == "exact":
            if x.tobytes() != y.tobytes():
                diff = np.abs(x.astype("f8") - y.astype("f8"))
                problems.append(f"{n}: {np.count_nonzero(diff)} values differ, max {np.nanmax(diff):g}")
        else:
            finite = np.isfinite(y)
            if (np.isfinite(x) != finite).any() or (x[~finite] != y[~finite]).any():
                problems.append(f"{n}: the non-finite values differ")
                continue
            scale = max(float(np.abs(y[finite]).max()), 1e-30)
            err = float(np.abs(x[finite].astype("f8") - y[finite].astype("f8")).max()) / scale
            if not err <= 1e-5:
                problems.append(f"{n}: relative difference {err:g} > 1e-5")
if problems:
    print("; ".join(problems))
    sys.exit(1)
EOF
}

# reference IN OUT H causal mask kv: checks OUT against float64 numpy.
reference() {
    "$PYTHON" - "$@" <<'EOF'
import sys
import numpy as np
import h5py

in_path, out_path, heads, causal, mask, kv = sys.argv[1:7]
H = int(heads)
with h5py.File(in_path, "r") as f:
    X = f["X"][()].astype("f8")
    Y = f[kv][()].astype("f8") if kv != "-" else X
    keep = f[mask][()].astype(bool) if mask != "-" else None
    W = {w: f[w][()].astype("f8") for w in ("W_Q", "W_K", "W_V", "W_O")}
    b = {k: (f[k][()].astype("f8") if k in f else 0.0) for k in ("b_Q", "b_K", "b_V", "b_O")}
B, n, D = X.shape
m = Y.shape[1]
dk = W["W_Q"].shape[1] // H
dv = W["W_V"].shape[1] // H
def split(T, d):                      # (B, rows, H*d) -> (B, H, rows, d)
    return T.reshape(B, T.shape[1], H, d).transpose(0, 2, 1, 3)
Q = split(X @ W["W_Q"] + b["b_Q"], dk)
K = split(Y @ W["W_K"] + b["b_K"], dk)
V = split(Y @ W["W_V"] + b["b_V"], dv)
S = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(dk)
hidden = np.zeros((B, 1, n, m), bool)
if causal == "1":
    hidden |= np.triu(np.ones((n, m), bool), 1)[None, None]
if keep is not None:
    hidden |= ~keep[:, None, None, :]
S = np.where(hidden, -np.inf, S)
top = S.max(axis=-1, keepdims=True)
with np.errstate(invalid="ignore"):
    E = np.where(hidden, 0.0, np.exp(S - np.where(np.isfinite(top), top, 0.0)))
total = E.sum(axis=-1, keepdims=True)
# a row with a NaN is NaN throughout; a row with no key is 0
A = np.divide(E, total, out=np.zeros_like(E), where=(total > 0) | np.isnan(total))
heads_out = A @ V
O = heads_out.transpose(0, 2, 1, 3).reshape(B, n, H * dv) @ W["W_O"] + b["b_O"]

problems = []
with h5py.File(out_path, "r") as f:
    want = {"weights": (A, 1e-5, False), "heads": (heads_out, 1e-4, True),
            "output": (O, 1e-4, True)}
    for name, (ref, tol, relative) in want.items():
        if name not in f:
            continue
        got = f[name][()].astype("f8")
        if got.shape != ref.shape:
            problems.append(f"{name}: shape {got.shape}, expected {ref.shape}")
            continue
        nan = np.isnan(ref)
        if (np.isnan(got) != nan).any():
            problems.append(f"{name}: NaN at {np.count_nonzero(np.isnan(got))} places, "
                            f"expected {np.count_nonzero(nan)}")
            continue
        if nan.all():
            continue
        err = np.abs(got[~nan] - ref[~nan]).max()
        if relative:
            err /= max(np.abs(ref[~nan]).max(), 1e-30)
        if not err <= tol:
            problems.append(f"{name}: error {err:g} > {tol:g}")
if problems:
    print("; ".join(problems))
    sys.exit(1)
EOF
}

# run NAME ARGS...: attnrun into $tmp/NAME.h5, quietly.
run() {
    local name=$1
    shift
    if ! "$ATTNRUN" -q "$@" -o "$tmp/$name.h5" >"$tmp/$name.log" 2>&1; then
        bad "$name: attnrun $* failed: $(head -n 1 "$tmp/$name.log")"
        return 1
    fi
}

# check LABEL COMMAND...: ok when the command succeeds, else its message.
check() {
    local label=$1 why
    shift
    if why=$("$@" 2>&1); then
        ok "$label"
    else
        bad "$label: $why"
    fi
}

# ---- the same bits for every thread count ---------------------------------
SELF=("$tmp/self.h5" --heads 4 --causal --mask pad)
CROSS=("$tmp/cross.h5" --heads 4 --kv mem)
for save in "scores,weights,heads,output,q,k,v" "output"; do
    tag=${save%%,*}
    if run "self_t1_$tag" "${SELF[@]}" --save "$save" --threads 1 &&
       run "self_t2_$tag" "${SELF[@]}" --save "$save" --threads 2; then
        check "self-attention --save $save: --threads 1 and 2 bit-identical" \
            compare "$tmp/self_t1_$tag.h5" "$tmp/self_t2_$tag.h5" exact
    fi
    if run "cross_t1_$tag" "${CROSS[@]}" --save "$save" --threads 1 &&
       run "cross_t2_$tag" "${CROSS[@]}" --save "$save" --threads 2; then
        check "cross-attention --save $save: --threads 1 and 2 bit-identical" \
            compare "$tmp/cross_t1_$tag.h5" "$tmp/cross_t2_$tag.h5" exact
    fi
done
# many small products at once: a BLAS that is not safe to call from several
# threads at a time shows here
if run many_t1 "$tmp/many.h5" --heads 4 --save weights,output --threads 1 &&
   run many_t2 "$tmp/many.h5" --heads 4 --save weights,output --threads 2; then
    check "1024 items of (32, 64): --threads 1 and 2 bit-identical" \
        compare "$tmp/many_t1.h5" "$tmp/many_t2.h5" exact
fi
# one slice of one item per step: the pipeline takes many steps
if run self_slices_t1 "${SELF[@]}" --batch-slice 1 --threads 1 &&
   run self_slices_t3 "${SELF[@]}" --batch-slice 1 --threads 3; then
    check "--batch-slice 1: --threads 1 and 3 bit-identical" \
        compare "$tmp/self_slices_t1.h5" "$tmp/self_slices_t3.h5" exact
    # the step size follows the threads, so it must not change a bit:
    # every projection row goes through a full block of rows
    check "--batch-slice 1 and the whole batch in one slice: bit-identical" \
        compare "$tmp/self_slices_t1.h5" "$tmp/self_t1_scores.h5" exact
fi
if run self_slices_2 "${SELF[@]}" --batch-slice 2 --threads 2; then
    check "--batch-slice 2 and 1: bit-identical" \
        compare "$tmp/self_slices_2.h5" "$tmp/self_slices_t1.h5" exact
fi

# odd sizes, one item per slice: the second slot's buffers must still be
# aligned (the sanitizer build stops at a misaligned access)
for prec in f32 f64; do
    if run "odd_$prec" "$tmp/odd.h5" --heads 2 --causal --mask pad --batch-slice 1 --precision "$prec"; then
        check "odd sizes, --batch-slice 1, $prec: matches float64 numpy" \
            reference "$tmp/odd.h5" "$tmp/odd_$prec.h5" 2 1 pad -
    fi
done

# ---- online softmax against the reference and the full path ---------------
[ -f "$tmp/self_t1_output.h5" ] &&
    check "online softmax (causal, masked, an item with no key) matches float64 numpy" \
        reference "$tmp/self.h5" "$tmp/self_t1_output.h5" 4 1 pad -
[ -f "$tmp/self_t1_scores.h5" ] &&
    check "full path (causal, masked) matches float64 numpy" \
        reference "$tmp/self.h5" "$tmp/self_t1_scores.h5" 4 1 pad -
[ -f "$tmp/self_t1_output.h5" ] && [ -f "$tmp/self_t1_scores.h5" ] &&
    check "online and full paths agree within float32 tolerance" \
        compare "$tmp/self_t1_output.h5" "$tmp/self_t1_scores.h5" online
[ -f "$tmp/cross_t1_output.h5" ] &&
    check "online softmax with --kv (m = 700 keys: two key blocks) matches float64 numpy" \
        reference "$tmp/cross.h5" "$tmp/cross_t1_output.h5" 4 0 - mem

# ---- NaN with --allow-nonfinite: as weights . V written out ---------------
# A NaN in X reaches K and V, and through weight 0 (0 . NaN) every query of
# its item, in either path and whatever the blocks; the item whose keys are
# all masked keeps weights and heads 0.
NAN_RUN=("$tmp/nan.h5" --heads 2 --causal --mask pad --allow-nonfinite)
for save in "scores,weights,heads,output" "heads,output"; do
    tag=${save%%,*}
    if run "nan_t1_$tag" "${NAN_RUN[@]}" --save "$save" --threads 1 &&
       run "nan_t2_$tag" "${NAN_RUN[@]}" --save "$save" --threads 2; then
        check "NaN input, --save $save: NaN exactly where float64 numpy has it" \
            reference "$tmp/nan.h5" "$tmp/nan_t1_$tag.h5" 2 1 pad -
        check "NaN input, --save $save: --threads 1 and 2 bit-identical" \
            compare "$tmp/nan_t1_$tag.h5" "$tmp/nan_t2_$tag.h5" exact
    fi
done

# ---- query rows in blocks -------------------------------------------------
LONG=("$tmp/long.h5" --heads 2 --causal)
plan=$("$ATTNRUN" "${LONG[@]}" --memory 1K --dry-run 2>&1)
if grep -q 'query rows in blocks of 256' <<<"$plan"; then
    ok "--memory 1K on (1024, 1024) maps plans blocks of 256 query rows (one chunk each)"
else
    bad "--memory 1K: no row blocks of 256 in the plan:"$'\n'"$plan"
fi
if run long_blocks "${LONG[@]}" --memory 1K --threads 2 && run long_whole "${LONG[@]}" --threads 1; then
    check "row blocks and whole rows write bit-identical datasets" \
        compare "$tmp/long_blocks.h5" "$tmp/long_whole.h5" exact
    check "row blocks match float64 numpy" reference "$tmp/long.h5" "$tmp/long_blocks.h5" 2 1 - -
fi
if run long_online "${LONG[@]}" --save heads,output; then
    check "online softmax over n = 1024 causal keys (blocks of keys rescaled) matches float64 numpy" \
        reference "$tmp/long.h5" "$tmp/long_online.h5" 2 1 - -
fi

finish
