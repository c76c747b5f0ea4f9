#!/bin/sh
# Regenerates the README's pictures (docs/images/) with attnrun itself:
# the toy example run as in README's worked example, with its four tokens
# (written beside a copy of the input with h5py), then drawn with attnrun
# plot.  The runs happen in a temporary directory, so the
# picture's title names toy.out.h5 as the README does.
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
