#!/bin/sh
# Regenerates the pictures of README and docs/ (docs/images/) with attnrun
# itself: the toy example run as in README's worked example, with its four
# tokens (written beside a copy of the input with h5py), its weights and
# its norms (docs/whole-model.md); then the walkthrough's 12 stand-in
# GPT-2 layers (examples/hf-export.py --stand-in) appended into one
# results file, their rollout, their attention flow, their census of heads and their page of
# attnrun view (two screenshots in headless Chromium).  The runs happen
# in a temporary directory, so the pictures' titles name the files as the
# pages do.
#
#   sh scripts/make-pictures.sh [build/attnrun]      (make pictures)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
attnrun=${1:-build/attnrun}
case $attnrun in
    /*) ;;
    *) attnrun=$PWD/$attnrun ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$top/docs/images"
cd "$work"
cp "$top/fixtures/toy.h5" toy.h5
"${PYTHON:-/usr/bin/python3}" -c 'import sys, h5py
with h5py.File(sys.argv[1], "a") as f:
    f.create_dataset("tokens", data=["The", "cat", "sat", "down"], dtype=h5py.string_dtype())' toy.h5
"$attnrun" toy.h5 -o toy.out.h5 --heads 1 --tokens tokens -q
"$attnrun" plot toy.out.h5 -o toy-weights.png
mv toy-weights.png "$top/docs/images/toy-weights.png"
echo "wrote docs/images/toy-weights.png"
"$attnrun" toy.h5 -o toy-norms.h5 --heads 1 --tokens tokens --save weights,norms,value_norm -q
"$attnrun" plot toy-norms.h5 --what norms -o toy-norms.png
mv toy-norms.png "$top/docs/images/toy-norms.png"
echo "wrote docs/images/toy-norms.png"
for L in 0 1 2 3 4 5 6 7 8 9 10 11; do
    "${PYTHON:-/usr/bin/python3}" "$top/examples/hf-export.py" --stand-in --layer "$L" "layer$L.h5" >/dev/null
    "$attnrun" "layer$L.h5" -o results.h5 --group "/layer$L" --append --preset gpt2 --heads 12 \
        --mask attention_mask --tokens tokens --save weights,entropy,output -q
done
"$attnrun" rollout results.h5 -o rollout.h5
"$attnrun" plot rollout.h5 -o rollout.png
mv rollout.png "$top/docs/images/rollout.png"
echo "wrote docs/images/rollout.png"
"$attnrun" flow results.h5 -o flow.h5
"$attnrun" plot flow.h5 -o flow.png
mv flow.png "$top/docs/images/flow.png"
echo "wrote docs/images/flow.png"
"$attnrun" heads results.h5 -o census.h5 >/dev/null
"$attnrun" plot census.h5 -o census.png
mv census.png "$top/docs/images/census.png"
echo "wrote docs/images/census.png"
# attnrun view's page of the same layers and rollout, in headless Chromium
# (tests/ref/view_browser.py: the screenshot test_view.sh takes too)
"$attnrun" view results.h5 --rollout rollout.h5 -o view.html -q
"${PYTHON:-/usr/bin/python3}" "$top/tests/ref/view_browser.py" shot view.html "$top/docs/images/view.png" >/dev/null
echo "wrote docs/images/view.png"
"${PYTHON:-/usr/bin/python3}" "$top/tests/ref/view_browser.py" shot view.html \
    "$top/docs/images/view-head.png" "#view=head&item=0&layer=/layer5&head=3" >/dev/null
echo "wrote docs/images/view-head.png"
