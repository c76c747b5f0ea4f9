#!/usr/bin/env bash
# tests/cli/test_alloc.sh - every allocation failure ends cleanly.
#
# FAULT_ATTNRUN is attnrun built with -DATTN_FAULT_INJECTION and ASan (make
# builds it as build/fault/attnrun): ATTN_FAIL_ALLOC=N makes its Nth
# allocation fail.  For N = 1, 2, ... until a run needs fewer than N
# allocations (and succeeds), each run must exit 1 with one `attnrun: `
# line, no crash, no sanitizer report (leaks included), no file left
# behind, and an --in-place input unchanged.  HDF5's own allocations are
# not failed; attnrun's are: buffers, names, paths, the command line.
# Run from the repository root: FAULT_ATTNRUN=build/fault/attnrun bash tests/cli/test_alloc.sh
set -u

FAULT_ATTNRUN=${FAULT_ATTNRUN:-build/fault/attnrun}
LIMIT=${LIMIT:-400}

SUITE="allocation failures"
. "$(dirname "$0")/../lib/checks.sh"
# sanitizer findings get their own exit status, apart from attnrun's 1
export ASAN_OPTIONS=$FAULT_ASAN_OPTIONS

if [ ! -x "$FAULT_ATTNRUN" ]; then
    bad "setup: no fault-injection build at $FAULT_ATTNRUN (make build/fault/attnrun)"
    finish
fi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT

alloc_sweep batch_bias "$LIMIT" fixtures/batch_bias.h5 -q IN -o OUT.h5 --heads 4 --batch-slice 2 \
    --save scores,weights,heads,output,q,k,v
alloc_sweep cross_mask "$LIMIT" fixtures/cross_mask.h5 -q IN -o OUT.h5 --heads 2 --kv KV \
    --mask key_mask --causal --save heads,output
alloc_sweep in_place "$LIMIT" fixtures/toy.h5 -q IN --in-place --group /r --heads 1
finish
