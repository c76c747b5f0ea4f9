#!/usr/bin/env bash
# tests/cli/test_norms.sh - norm-based analysis: `--save norms` (weights
# times the length of each key's transformed value, Kobayashi et al. 2020)
# and `--save value_norm`, against a float64 reference written from the
# paper's formula (tests/ref/norms_check.py); norms as a map like weights
# (tiles, --store, fill, axes, tokens, --append); the same bits whatever
# the maps kept beside them, the blocks of rows and the threads.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_norms.sh    # from the repository root
#
# Environment:
#   ATTNRUN   the binary under test (default: build/attnrun)
#   PYTHON    a python with numpy and h5py (default /usr/bin/python3)
set -u

SUITE="norms"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"

suite_setup norms numpy h5py
check() { PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/norms_check.py" "$@"; }
# one head wider than MEAN_KEYS (read from the source): value_norm's Gram
# form takes its columns in blocks of MEAN_KEYS
MEAN_KEYS=$(sed -nE 's/^#define MEAN_KEYS \(\(size_t\)([0-9]+)\).*/\1/p' "$ROOT/lib/math/math.c")
[ -n "$MEAN_KEYS" ] || { bad "setup: no '#define MEAN_KEYS ((size_t)N)' in lib/math/math.c"; finish; }
check inputs "$T" $((MEAN_KEYS + 1)) || { bad "setup: cannot write the inputs"; finish; }
cd "$T" || exit 1

attn() { "$ATTNRUN" -q "$@" 2>err.txt || bad "attnrun $*: $(head -c 300 err.txt)"; }

SMALL=(small.h5 --heads 4 --kv-heads 2 --mask M)
for p in f32 f64; do
    attn "${SMALL[@]}" --causal --precision "$p" --save weights,norms,value_norm -o "a-$p.h5"
    expect "$p, causal, GQA, biases, a mask: norms, value_norm, weights against the reference" \
        check reference small-causal small.h5 "a-$p.h5"
    attn "${SMALL[@]}" --precision "$p" --save norms,value_norm,output -o "b-$p.h5"
    expect "$p, not causal: norms in the weights' place against the reference" \
        check reference small small.h5 "b-$p.h5"
done

# the same bits whatever is kept beside: norms alone (in the weights'
# place), beside weights, beside scores; blocks of rows; 1 and 3 threads
attn "${SMALL[@]}" --causal --save norms -o alone.h5
attn "${SMALL[@]}" --causal --save scores,norms,value_norm,mean -o scores.h5
expect "norms alone are the bits of norms beside the weights" check same norms alone.h5 a-f32.h5
expect "beside scores and mean: the same bits" check same norms,value_norm scores.h5 a-f32.h5
attn "${SMALL[@]}" --causal --save weights,norms,value_norm --memory 1M --threads 1 -o rows1.h5
attn "${SMALL[@]}" --causal --save weights,norms,value_norm --memory 1M --threads 3 -o rows3.h5
expect "in blocks of rows (--memory 1M), 1 thread: the same bits" \
    check same norms,value_norm,weights rows1.h5 a-f32.h5
expect "in blocks of rows, 3 threads: the same bits" check same norms,value_norm rows3.h5 a-f32.h5
"$ATTNRUN" "${SMALL[@]}" --causal --save norms --memory 1M -o x.h5 --dry-run >plan.txt 2>&1
expect "the dry run of --memory 1M takes blocks of rows" grep -q "blocks of" plan.txt

# a map like weights: chunks (tiles), fill 0, type, axes, scales, tokens
expect "norms are laid out as weights" check like norms weights a-f32.h5
attn "${SMALL[@]}" --causal --save weights,norms --store f16 -o f16.h5
expect "--store f16: norms stored as weights are" check like norms weights f16.h5
"$PY" - <<'PY' >tok.txt 2>&1 || bad "tokens: cannot write them: $(cat tok.txt)"
import h5py, numpy as np
with h5py.File("small.h5", "a") as f:
    f["T"] = np.array(["t%d" % (i % 7) for i in range(300)], dtype=h5py.string_dtype())
PY
attn "${SMALL[@]}" --causal --tokens T --save weights,norms -o tok.h5
expect "with tokens: norms carry them as weights do" check like norms weights tok.h5

# cross-attention (m keys of KV) and fused weights with interleaved heads
attn cross.h5 --heads 4 --kv KV --save norms,value_norm -o c.h5
expect "cross-attention: value_norm along the 70 keys, norms against the reference" \
    check reference cross cross.h5 c.h5
attn fused.h5 --heads 4 --wqkv W_QKV --bqkv B_QKV --qkv-split heads --layout linear --causal \
    --save norms,value_norm -o f.h5
expect "fused weights, heads interleaved, torch layout: against the reference" \
    check reference fused fused.h5 f.h5

for p in f32 f64; do
    attn wide.h5 --heads 1 --precision "$p" --save norms,value_norm -o "w-$p.h5"
    expect "$p, one head of d_v = MEAN_KEYS + 1 = $((MEAN_KEYS + 1)): against the reference" \
        check reference wide wide.h5 "w-$p.h5"
done

# --append: each layer's norms in its group, read back through the index
attn "${SMALL[@]}" --causal --save norms -o model.h5 --append --group /layer0
attn "${SMALL[@]}" --save norms -o model.h5 --append --group /layer1
"$PY" - >app.txt 2>&1 <<'PY'
import h5py, numpy as np
with h5py.File("model.h5", "r") as m, h5py.File("alone.h5", "r") as a, \
        h5py.File("b-f32.h5", "r") as b:
    assert np.array_equal(m["layer0/norms"][...], a["norms"][...]), "layer0"
    assert not np.array_equal(m["layer1/norms"][...], a["norms"][...]), "layer1 is layer0"
print("both layers")
PY
expect "--append: each layer's norms in its group" grep -q "both layers" app.txt

# the online softmax keeps no maps: norms need them, so they take full
# rows; value_norm alone needs no map and keeps the online softmax
"$ATTNRUN" "${SMALL[@]}" --causal --save norms,entropy -o x.h5 --dry-run >plan.txt 2>&1
expect "norms take the full rows of the softmax" grep -q "full rows" plan.txt
"$ATTNRUN" "${SMALL[@]}" --causal --save value_norm,output -o x.h5 --dry-run >plan.txt 2>&1
expect "value_norm alone keeps the online softmax" grep -q "online, no maps kept" plan.txt
attn "${SMALL[@]}" --causal --save value_norm,output --memory 1M -o online.h5
expect "value_norm on the online softmax, in blocks of rows: the same bits" \
    check same value_norm online.h5 a-f32.h5

finish
