#!/bin/sh
# Runs attnrun on the worked example of docs/contract.md §7 and shows what it wrote.
set -eu
attnrun=${1:-build/attnrun}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "\$ attnrun fixtures/toy.h5 -o toy.out.h5 --heads 1"
"$attnrun" fixtures/toy.h5 -o "$out/toy.out.h5" --heads 1
echo
echo "\$ h5ls -r toy.out.h5"
h5ls -r "$out/toy.out.h5"
echo
echo "\$ h5dump -d /weights toy.out.h5   # (1 head, 4 queries, 4 keys)"
h5dump -d /weights -A 0 "$out/toy.out.h5" | sed -n '/DATA {/,/}/p'
echo
echo "\$ h5dump -d /output toy.out.h5    # columns 0-2 repeat the head output (W_O = [I3 | 0])"
h5dump -d /output -A 0 "$out/toy.out.h5" | sed -n '/DATA {/,/}/p'
