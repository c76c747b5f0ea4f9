#!/bin/sh
# Regenerates the README's pictures (docs/images/) with attnrun itself:
# the seed's toy example run as in README's worked example, then drawn
# with attnrun plot.  The runs happen in a temporary directory, so the
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
"$attnrun" "$top/fixtures/toy.h5" -o toy.out.h5 --heads 1 -q
"$attnrun" plot toy.out.h5 -o toy-weights.png
mv toy-weights.png "$top/docs/images/toy-weights.png"
echo "wrote docs/images/toy-weights.png"
