#!/bin/sh
# Runs attnrun on the worked example of docs/contract.md §7 (the README's
# toy example) and shows what it wrote, printing each command first so
# that they can be run again; the results stay in DIR/toy.out.h5.
#
#   sh scripts/demo.sh [ATTNRUN [DIR]]     (make demo: build/attnrun build/demo)
#
# From the top of the source tree.  An earlier demo's file is replaced.
set -eu
attnrun=${1:-build/attnrun}
dir=${2:-build/demo}
out=$dir/toy.out.h5

# show COMMAND...: prints the command as typed at a prompt, then runs it.
show() {
    echo "\$ $*"
    "$@"
}

mkdir -p "$dir"
show "$attnrun" fixtures/toy.h5 -o "$out" --heads 1 --force
echo
show h5ls -r "$out"
echo
echo "# the weights: 1 head, 4 queries (rows) by 4 keys"
show h5dump -d /weights -A 0 "$out"
echo
echo "# the output: columns 0-2 repeat the head's output (W_O = [I3 | 0])"
show h5dump -d /output -A 0 "$out"
echo
echo "The results are in $out; the README's \"The toy example\" reads them with h5py and xarray."
