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
# sanitizer findings get their own exit status, apart from attnrun's 1
export ASAN_OPTIONS=exitcode=86:detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=exitcode=87

SUITE="allocation failures"
. "$(dirname "$0")/../lib/checks.sh"

if [ ! -x "$FAULT_ATTNRUN" ]; then
    bad "setup: no fault-injection build at $FAULT_ATTNRUN (make build/fault/attnrun)"
    finish
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# sweep NAME SOURCE ARGS...: ATTN_FAIL_ALLOC=1, 2, ... over one run.  In
# ARGS, IN stands for a copy of SOURCE (a successful --in-place run changes
# it; it is restored after) and OUT for a path in an empty directory.
sweep() {
    local name=$1 source=$2 input=$tmp/in_$1.h5
    shift 2
    cp "$source" "$input"
    cp "$source" "$tmp/pristine"
    local n before rc problems=0 out args
    before=$(sha256sum <"$input")
    set -- "${@//IN/$input}"
    for ((n = 1; n <= LIMIT; n++)); do
        rm -rf "$tmp/out"
        mkdir "$tmp/out"
        out=$tmp/out/out.h5
        args=("${@//OUT/$out}")
        ATTN_FAIL_ALLOC=$n "$FAULT_ATTNRUN" -q "${args[@]}" </dev/null >/dev/null 2>"$tmp/stderr"
        rc=$?
        if [ "$rc" -eq 0 ]; then
            break                      # fewer than n allocations: all of them failed once
        fi
        local why=""
        if [ "$rc" -ne 1 ]; then
            why="exit $rc"
        elif [ "$(wc -l <"$tmp/stderr")" -ne 1 ] || ! grep -q '^attnrun: ' "$tmp/stderr"; then
            why="stderr is not one 'attnrun: ' line"
        elif grep -q 'internal error' "$tmp/stderr"; then
            why="a crash, caught by the fatal-signal handler"
        elif [ -n "$(ls -A "$tmp/out")" ]; then
            why="left $(ls -A "$tmp/out" | tr '\n' ' ')"
        elif [ -n "$(find "$(dirname "$input")" -maxdepth 1 -name '*attnrun-tmp*')" ]; then
            why="left a temporary next to the input"
        elif [ "$(sha256sum <"$input")" != "$before" ]; then
            why="the input changed"
        fi
        if [ -n "$why" ]; then
            bad "$name: allocation $n failing: $why: $(head -c 400 "$tmp/stderr")"
            problems=$((problems + 1))
            [ "$problems" -ge 3 ] && break
        fi
    done
    # A success means the run needs fewer than n allocations -- unless the
    # nth failed unnoticed; then a later one would still fail.
    local later
    for later in $((n + 1)) $((n + 2)) $((n + 5)); do
        cp "$tmp/pristine" "$input"
        rm -rf "$tmp/out"
        mkdir "$tmp/out"
        args=("${@//OUT/$tmp/out/out.h5}")
        if ! ATTN_FAIL_ALLOC=$later "$FAULT_ATTNRUN" -q "${args[@]}" </dev/null >/dev/null 2>&1; then
            bad "$name: allocation $n failing went unnoticed (the run succeeded, with $later failing it does not)"
            problems=$((problems + 1))
            break
        fi
    done
    cp "$tmp/pristine" "$input"
    if [ "$n" -gt "$LIMIT" ]; then
        bad "$name: still failing after $LIMIT allocations"
    elif [ "$problems" -eq 0 ]; then
        ok "$name: each of its $((n - 1)) allocations failing ends with exit 1 and one line"
    fi
}

sweep batch_bias fixtures/batch_bias.h5 IN -o OUT --heads 4 --batch-slice 2 \
    --save scores,weights,heads,output,q,k,v
sweep cross_mask fixtures/cross_mask.h5 IN -o OUT --heads 2 --kv KV \
    --mask key_mask --causal --save heads,output
sweep in_place fixtures/toy.h5 IN --in-place --group /r --heads 1
finish
