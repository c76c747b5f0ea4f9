#!/usr/bin/env bash
# tests/cli/test_append.sh - one results file for a whole model: `-o results.h5
# --group G --append` (docs/append.md).
#
#   ATTNRUN=build/attnrun bash tests/cli/test_append.sh     # from the repository root
#
# Environment: ATTNRUN (default build/attnrun), PYTHON (a python with numpy,
# h5py, xarray and netCDF4; default /usr/bin/python3), TIME_LIMIT (hang
# guard of one run in seconds, default 20).
#
# What it checks:
#   - layers of a generated three-layer GPT-2 model (--preset gpt2) and two
#     fixtures appended to one index: every group equals a direct -o run of
#     the same layer bit for bit, the fixtures also their expected files
#     (fixtures/tolerances.tsv, computed by numpy, never by attnrun);
#   - xarray (default engine, netCDF4) and `ncdump -h` open every group with
#     its dimensions; h5py finds every dataset's dimension scales; earlier
#     parts are byte-identical after later appends; the index stays small;
#   - what a refusal, a rejected input, a dry run, a full file, SIGINT and
#     SIGTERM mid-run or while waiting for the lock, and a failure injected
#     after the part is in place (strace) leave: the index, every part and
#     the directory exactly as they were;
#   - --force replaces a group's part and removes the old one only;
#     concurrent appends; an index reached through a symbolic link; the
#     index's permission bits; a part left by a crash is replaced;
#   - the links are relative: the index opens from another directory and
#     after the whole directory is moved;
#   - the groups are listed in the order appended (h5py, netCDF4, h5dump
#     --sort_by=creation_order), a replaced group keeps its place, and an
#     index of attnrun 1.5 (listed by name) is appended to and then keeps
#     the order;
#   - groups whose names differ only in case (/Layer0, /layer0, /LAYER0, with
#     another group and a user's empty group between them, then one of
#     them replaced with --force): each holds its own fixture's values and
#     links to a part of its own, no two part names the same once case is
#     folded (on macOS or a Windows share they would be one file).
# The checks of files are tests/ref/append_index.py, fixture_tolerances.py,
# same_file.py and tree_snapshot.py; the lock's driver is
# lock_contention.py.  Each check prints "ok NAME", "FAIL NAME: WHY" or
# "skip NAME: WHY"; the last line is "append: N passed, M failed"; the exit
# status is 1 when M > 0.
set -u

TL=${TIME_LIMIT:-20}
FIX=$PWD/fixtures

SUITE="append"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, the checks in ref/
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

suite_setup append numpy h5py xarray netCDF4

# ---------------------------------------------------------------- helpers

# from_root COMMAND...: COMMAND run from /, for links that must not depend
# on the working directory.
from_root() { (cd / && "$@"); }

run() {
    timeout -s KILL "$TL" "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
}
err1() { head -n 1 "$T/stderr"; }

# snapshot DIR: the state of everything under DIR (names and bytes).
snapshot() { ref tree_snapshot.py "$1"; }

# unchanged NAME DIR BEFORE: ok when DIR's snapshot is still BEFORE.
unchanged() {
    local now
    now=$(snapshot "$2")
    if [ "$now" = "$3" ]; then
        ok "$1"
    else
        bad "$1: the directory changed: $(diff <(echo "$3") <(echo "$now") | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
    fi
}

# refused NAME STATUS TEXT DIR BEFORE: the last run ended with STATUS and
# one "attnrun: " line holding TEXT, and DIR is as it was.
refused() {
    local why
    why=$(run_problem "$rc" "$2" "$T/stderr")
    if [ -n "$why" ]; then
        bad "$1: $why"
    elif ! grep -q -- "$3" "$T/stderr"; then
        bad "$1: message lacks '$3': $(err1)"
    else
        unchanged "$1" "$4" "$5"
    fi
}

# refuses NAME STATUS TEXT ARGS...: runs attnrun with ARGS, then refused
# with the caller's $dir and $before (its snapshot).
refuses() {
    run "${@:4}"
    refused "$1" "$2" "$3" "$dir" "$before"
}

workdir() {
    local d=$T/$1
    rm -rf "$d"
    mkdir -p "$d"
    echo "$d"
}

# layer_run I ARGS...: attnrun on layer I of the generated model, ARGS first.
layer_run() {
    run "$D1/model.h5" "${@:2}" --preset gpt2 --heads 4 --weights-group "/transformer/h.$1/attn" \
        --x "/inputs/h.$1"
}

# within NAME FILE GROUP=CASE...: FILE's groups against the fixtures' expected files.
within() { expect "$1" ref fixture_tolerances.py within "$FIX" "${@:2}"; }

# ------------------------------------------------- 1. layers gathered in one file

D1=$(workdir gather)
RES=$D1/res
mkdir -p "$RES" "$D1/direct"
ref attention_inputs.py gpt2-layers "$D1/model.h5" 3
# The groups of the three layers, each with its direct run's file.
DIRECT=("model/layer0=$D1/direct/layer0.h5" "model/layer1=$D1/direct/layer1.h5"
        "model/layer2=$D1/direct/layer2.h5")

check_gather() {
    local i c part0_before
    for i in 0 1 2; do
        layer_run $i -o "$RES/results.h5" --append --group "/model/layer$i"
        [ $rc -eq 0 ] && ok "layer $i appended" || bad "layer $i appended: exit $rc: $(err1)"
        layer_run $i -o "$D1/direct/layer$i.h5" --group "/model/layer$i"
        [ $rc -eq 0 ] || bad "direct run of layer $i: exit $rc: $(err1)"
        [ $i -eq 0 ] && part0_before=$(sha256sum <"$RES/results.h5.parts/model+layer0.1.h5")
    done
    run "$FIX/gpt2.h5" -o "$RES/results.h5" --append --group /fixtures/gpt2 --heads 12
    [ $rc -eq 0 ] && ok "gpt2 fixture appended" || bad "gpt2 fixture appended: exit $rc: $(err1)"
    run "$FIX/toy.h5" -o "$RES/results.h5" --append --group /toy --heads 1
    [ $rc -eq 0 ] && ok "toy fixture appended" || bad "toy fixture appended: exit $rc: $(err1)"

    for i in 0 1 2; do
        expect "layer $i equals a direct run bit for bit" \
            ref same_file.py outputs "/model/layer$i" "$RES/results.h5" "$D1/direct/layer$i.h5"
    done
    for c in /fixtures/gpt2=gpt2 /toy=toy; do
        within "${c#*=} fixture within fixtures/tolerances.tsv of its numpy reference" "$RES/results.h5" "$c"
    done
    local listing
    listing=$(cd "$RES" && find . | LC_ALL=C sort | tr '\n' ' ')
    if [ "$listing" = ". ./results.h5 ./results.h5.parts ./results.h5.parts/fixtures+gpt2.1.h5 ./results.h5.parts/model+layer0.1.h5 ./results.h5.parts/model+layer1.1.h5 ./results.h5.parts/model+layer2.1.h5 ./results.h5.parts/toy.1.h5 " ]; then
        ok "layout: the index and one part per group, nothing else"
    else
        bad "layout: $listing"
    fi
    if [ "$(sha256sum <"$RES/results.h5.parts/model+layer0.1.h5")" = "$part0_before" ]; then
        ok "layer 0's part is byte-identical after four later appends"
    else
        bad "layer 0's part changed after later appends"
    fi
    local size
    size=$(stat -c %s "$RES/results.h5")
    if [ "$size" -le 65536 ]; then
        ok "the index of 5 groups is small ($size bytes)"
    else
        bad "the index of 5 groups takes $size bytes"
    fi
    expect "h5py: every dataset's dimension scales attached and valid, first group too" \
        ref append_index.py scales "$RES/results.h5" /model/layer0 /model/layer1 /model/layer2 /fixtures/gpt2 /toy
    expect "xarray (default engine) opens every group with the direct runs' values" \
        ref append_index.py xarray "$RES/results.h5" "${DIRECT[@]}" fixtures/gpt2 toy
    check_ncdump "ncdump -h lists every group with its dimensions" "$RES/results.h5"
    expect "h5netcdf: the part file itself opens (the workaround docs/append.md gives)" \
        ref append_index.py part_h5netcdf "$RES/results.h5.parts/model+layer1.1.h5" "$D1/direct/layer1.h5" \
        model/layer1
}

# check_ncdump NAME INDEX [DIR]: ncdump -h, run from DIR (default here),
# succeeds and shows, for each group, the dimensions of its part file (read
# with h5py).
check_ncdump() {
    if ! command -v ncdump >/dev/null; then
        skip "$1: ncdump is not installed (Debian package netcdf-bin)"
        return
    fi
    if ! (cd "${3:-.}" && ncdump -h "$2") >"$T/ncdump" 2>"$T/ncdump.err"; then
        bad "$1: ncdump failed: $(head -c 300 "$T/ncdump.err")"
        return
    fi
    expect "$1" ref append_index.py ncdump "$2" "$T/ncdump"
}

# ------------------------------------------------- 2. refusals: exit status, nothing changed

check_refusals() {
    local dir=$RES before
    before=$(snapshot "$dir")
    refuses "--append without -o: exit 2" 2 "give it" "$FIX/toy.h5" --heads 1 --group /x --append
    refuses "--append with --in-place: exit 2" 2 "not with --in-place" \
        "$FIX/toy.h5" --heads 1 --group /x --append --in-place
    refuses "--append without --group: exit 2" 2 "needs --group" "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append
    refuses "--append --group /: exit 2" 2 "needs --group" \
        "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /
    refuses "existing group without --force: exit 2" 2 "already holds results at /toy" \
        "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /toy
    refuses "a group holding other results, even with --force: exit 2" 2 "/model holds the results at /model/layer0" \
        "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /model --force
    refuses "a group inside other results: exit 2" 2 "inside the results at /toy" \
        "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /toy/inner --force
    refuses "--dry-run on an existing group: exit 2" 2 "already holds" \
        "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /toy --dry-run
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /new --dry-run
    if [ $rc -ne 0 ] || ! grep -q "outputs in group /new" "$T/stdout"; then
        bad "--append --dry-run: exit $rc: $(err1)"
    else
        unchanged "--append --dry-run: exit 0, the plan, nothing written" "$RES" "$before"
    fi
    refuses "input rejected (3 columns, 7 heads): exit 3" 3 "do not split into 7 heads" \
        "$FIX/toy.h5" -o "$RES/results.h5" --heads 7 --append --group /new
    refuses "missing dataset: exit 3" 3 "missing" \
        "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /new --x missing

    dir=$(workdir notindex)
    cp "$FIX/toy.expected.h5" "$dir/other.h5"
    printf 'not hdf5\n' >"$dir/text.h5"
    mkdir "$dir/dir.h5"
    before=$(snapshot "$dir")
    refuses "OUT an HDF5 file that is not an index: exit 2, why, not copied" 2 \
        "not a results index attnrun made (no attnrun_index attribute)" \
        "$FIX/toy.h5" -o "$dir/other.h5" --heads 1 --append --group /new
    refuses "OUT not an HDF5 file: exit 2" 2 "not a results index attnrun made (not an HDF5 file)" \
        "$FIX/toy.h5" -o "$dir/text.h5" --heads 1 --append --group /new
    refuses "OUT a directory: exit 2" 2 "names a directory" "$FIX/toy.h5" -o "$dir/dir.h5" --heads 1 --append --group /new
    refuses "OUT is IN: exit 2" 2 "the output is the input" "$FIX/toy.h5" -o "$FIX/toy.h5" --heads 1 --append --group /new

    # an index someone wrote into: a rewrite would lose what they added
    dir=$(workdir foreign)
    run "$FIX/toy.h5" -o "$dir/r.h5" --heads 1 --append --group /a
    "$PY" -c 'import sys, h5py; h5py.File(sys.argv[1], "a")["notes"] = [1, 2]' "$dir/r.h5"
    before=$(snapshot "$dir")
    refuses "an index holding a user's dataset: exit 2, left as it is" 2 "/notes is a dataset" \
        "$FIX/toy.h5" -o "$dir/r.h5" --heads 1 --append --group /b
    rm -f "$dir/r.h5" && run "$FIX/toy.h5" -o "$dir/r.h5" --heads 1 --append --group /a
    "$PY" -c 'import sys, h5py; h5py.File(sys.argv[1], "a").attrs["mine"] = 1' "$dir/r.h5"
    before=$(snapshot "$dir")
    refuses "an index with a user's attribute: exit 2 even with --force" 2 "root attributes" \
        "$FIX/toy.h5" -o "$dir/r.h5" --heads 1 --append --group /b --force

    # a copy of an index links into the original's parts: --force on the
    # copy must not remove them
    dir=$(workdir copied)
    run "$FIX/toy.h5" -o "$dir/r.h5" --heads 1 --append --group /l0
    cp "$dir/r.h5" "$dir/s.h5"
    before=$(snapshot "$dir")
    refuses "a copied index (links into another index's parts), --force: exit 2, the original's part kept" \
        2 "not into this index's own parts directory" \
        "$FIX/toy.h5" -o "$dir/s.h5" --heads 1 --append --group /l0 --force

    # what would only fail after the computation is refused before it
    dir=$(workdir early)
    printf 'mine\n' >"$dir/r.h5.parts"
    before=$(snapshot "$dir")
    refuses "OUT.parts a file, not a directory: exit 2 at the dry run" 2 "is not a directory" \
        "$FIX/toy.h5" -o "$dir/r.h5" --heads 1 --append --group /l0 --dry-run
    refuses "a parts directory name over the file system's limit: exit 2 at the dry run" 2 \
        "longer than the file system allows" \
        "$FIX/toy.h5" -o "$dir/$(printf 'b%.0s' $(seq 1 250)).h5" --heads 1 --append --group /l0 --dry-run

    # an index whose name starts with "." takes appends like any other
    dir=$(workdir hidden)
    run "$FIX/toy.h5" -o "$dir/.r.h5" --heads 1 --append --group /l0 &&
        run "$FIX/toy.h5" -o "$dir/.r.h5" --heads 1 --append --group /l1
    if [ $rc -eq 0 ] && [ -f "$dir/.r.h5.parts/l0.1.h5" ] && [ -f "$dir/.r.h5.parts/l1.1.h5" ]; then
        ok "an index named .r.h5 takes a second append"
    else
        bad "an index named .r.h5: exit $rc: $(err1)"
    fi
}

# ------------------------------------------------- 3. --force

check_force() {
    local part1 others_before others_after
    part1=$RES/results.h5.parts/model+layer1.1.h5
    others_before=$(sha256sum "$RES"/results.h5.parts/model+layer0.1.h5 "$RES"/results.h5.parts/toy.1.h5)
    # /model/layer1 replaced by layer 2's results
    layer_run 2 -o "$RES/results.h5" --append --group /model/layer1 --force
    if [ $rc -ne 0 ]; then
        bad "--force replaces a group: exit $rc: $(err1)"
        return
    fi
    layer_run 2 -o "$D1/direct/layer1_as_2.h5" --group /model/layer1
    expect "--force: the group now holds the new results" \
        ref same_file.py outputs /model/layer1 "$RES/results.h5" "$D1/direct/layer1_as_2.h5"
    others_after=$(sha256sum "$RES"/results.h5.parts/model+layer0.1.h5 "$RES"/results.h5.parts/toy.1.h5)
    if [ -e "$part1" ]; then
        bad "--force: the replaced part is still there"
    elif [ ! -f "$RES/results.h5.parts/model+layer1.2.h5" ]; then
        bad "--force: no part model+layer1.2.h5: $(ls "$RES/results.h5.parts" | tr '\n' ' ')"
    elif [ "$others_before" != "$others_after" ]; then
        bad "--force: other parts changed"
    else
        ok "--force: the old part removed, the new one is generation 2, other parts untouched"
    fi
    # back to layer 1, for the checks after this one
    layer_run 1 -o "$RES/results.h5" --append --group /model/layer1 --force
    expect "--force again: generation 3 holds layer 1" \
        ref same_file.py outputs /model/layer1 "$RES/results.h5" "$D1/direct/layer1.h5" + \
        ref append_index.py parts "$RES/results.h5.parts" model+layer1. model+layer1.3.h5
    # a user's file in the parts directory that no link names is not attnrun's to delete,
    # unless it carries the very name a crash would leave
    local d
    d=$(workdir orphan)
    run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /a
    printf 'left by a crash\n' >"$d/r.h5.parts/b.1.h5"
    printf 'a note of the user\n' >"$d/note"
    cp "$d/note" "$d/r.h5.parts/notes.txt"
    run "$FIX/causal.h5" -o "$d/r.h5" --heads 2 --causal --append --group /b
    within "a part left by a crash is replaced by the next append of its group; other files stay" \
        "$d/r.h5" /b=causal + cmp "$d/note" "$d/r.h5.parts/notes.txt"
}

# ------------------------------------------------- 4. failures mid-run leave everything as it was

check_failures() {
    local d before
    d=$(workdir failures)
    ref attention_inputs.py random "$d/big.h5" 3000 256 64
    mkdir "$d/res"
    run "$FIX/toy.h5" -o "$d/res/results.h5" --heads 1 --append --group /layer0
    [ $rc -eq 0 ] || bad "setup of the failure checks: exit $rc: $(err1)"
    before=$(snapshot "$d/res")

    # a file size limit: the part cannot be written
    (ulimit -f 512; "$ATTNRUN" "$d/big.h5" -o "$d/res/results.h5" --heads 4 --save output \
        --append --group /layer1 >"$T/stdout" 2>"$T/stderr")
    rc=$?
    refused "ulimit -f: exit 1 'File too large', index and parts as they were" 1 "File too large" \
        "$d/res" "$before"

    local sig
    for sig in INT TERM; do
        "$ATTNRUN" "$d/big.h5" -o "$d/res/results.h5" --heads 4 --save output --threads 1 \
            --batch-slice 16 --append --group /layer1 >/dev/null 2>"$T/stderr" &
        local pid=$! seen=0
        for _ in $(seq 200); do    # until its temporary beside the index exists
            if [ -n "$(find "$d/res" -maxdepth 1 -name '.*attnrun-tmp-*')" ]; then seen=1; break; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.02
        done
        sleep 0.2
        if [ $seen -eq 0 ] || ! kill -s "$sig" "$pid" 2>/dev/null; then
            wait "$pid"
            bad "SIG$sig mid-run: attnrun ended (exit $?) before the signal"
            continue
        fi
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -s KILL "$pid" 2>/dev/null
        wait "$pid"
        rc=$?
        refused "SIG$sig mid-run: exit 1 'interrupted', no part, no temporary, index as it was" 1 \
            "interrupted by SIG$sig" "$d/res" "$before"
    done
}

# ------------------------------------------------- 5. the lock: waited for, and a signal while waiting

check_lock() {
    local d before
    d=$(workdir lock)
    mkdir "$d/res"
    run "$FIX/toy.h5" -o "$d/res/results.h5" --heads 1 --append --group /layer0
    before=$(snapshot "$d/res")
    local out
    out=$(ref lock_contention.py append_index "$ATTNRUN" "$FIX/toy.h5" "$d/res" signal "$T/stderr" 2>&1)
    case $out in
        early:*) skip "SIGTERM while waiting for the index's lock: ${out#early: }" ;;
        *) rc=$out
           refused "SIGTERM while waiting for the index's lock: exit 1, nothing written" 1 \
               "interrupted by SIGTERM" "$d/res" "$before" ;;
    esac
    out=$(ref lock_contention.py append_index "$ATTNRUN" "$FIX/toy.h5" "$d/res" release "$T/stderr" 2>&1)
    case $out in
        early:*) skip "an append waits for the lock: ${out#early: }" ;;
        0) if [ -f "$d/res/results.h5.parts/layer1.1.h5" ]; then
               ok "an append waits for another's commit, then completes"
           else
               bad "an append waits for the lock: exit 0 but no part"
           fi ;;
        *) bad "an append waits for the lock: exit $out: $(err1)" ;;
    esac
}

# ------------------------------------------------- 6. a failure after the part is in place (strace)

# inject NAME SYSCALLS WHEN ARGS...: runs attnrun under strace, the
# WHEN-th call of SYSCALLS failing with EIO (LeakSanitizer, which cannot
# run under a tracer, off).
inject() {
    local name=$1 calls=$2 when=$3
    shift 3
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout -s KILL "$TL" strace -f -qq -o /dev/null -e trace="$calls" \
        -e inject="$calls":error=EIO:when="$when" "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

check_injected() {
    if ! command -v strace >/dev/null ||
        ! strace -f -qq -o /dev/null -e trace=rename -e inject=rename:error=EIO:when=2 true 2>/dev/null; then
        skip "failures after the part is in place: strace cannot inject faults here (Debian package strace)"
        return
    fi
    local d before renames=rename,renameat,renameat2
    d=$(workdir injected)
    # the first append: the new index's rename (renameat2, as it must not
    # replace a file) fails, after the part's
    inject "first" renameat2 1 "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /layer0
    refused "first append, the index cannot be renamed into place: exit 1, nothing left" 1 \
        "cannot rename the output into place" "$d" "dir ."
    inject "first" mkdir,mkdirat 1 "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /layer0
    refused "first append, the parts directory cannot be made: exit 1, nothing left" 1 \
        "cannot make the directory" "$d" "dir ."
    run "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /layer0
    run "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append --group /layer1
    before=$(snapshot "$d")
    inject "new" "$renames" 2 "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append --group /layer2
    refused "a new group, the index cannot be renamed: exit 1, the new part removed, all as it was" 1 \
        "cannot rename the output into place" "$d" "$before"
    inject "force" "$renames" 2 "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append \
        --group /layer0 --force
    refused "--force, the index cannot be renamed: exit 1, the old part kept, all as it was" 1 \
        "cannot rename the output into place" "$d" "$before"
    within "after the failed --force the index still reads the old results" "$d/results.h5" /layer0=toy
}

# ------------------------------------------------- 7. concurrency, links, modes

check_concurrent() {
    local d i pids=() failed=0
    d=$(workdir concurrent)
    for i in 0 1 2 3 4 5; do
        "$ATTNRUN" "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append \
            --group "/layer$i" >/dev/null 2>"$T/stderr.$i" &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || failed=$((failed + 1))
    done
    if [ $failed -ne 0 ]; then
        bad "6 appends at once: $failed failed: $(cat "$T"/stderr.* | head -n 2 | tr '\n' ' ')"
        return
    fi
    expect "6 appends at once: all 6 groups in the index, each right" \
        ref append_index.py groups "$d/results.h5" layer0 layer1 layer2 layer3 layer4 layer5 + \
        ref fixture_tolerances.py within "$FIX" "$d/results.h5" /layer{0,1,2,3,4,5}=causal
}

check_moves() {
    local d
    d=$(workdir moves)
    cp -r "$RES" "$d/res"
    expect "the index opens from another working directory" \
        from_root ref append_index.py xarray "$d/res/results.h5" "${DIRECT[@]}"
    mv "$d/res" "$d/moved"
    mkdir "$d/elsewhere"
    mv "$d/moved" "$d/elsewhere/"
    expect "the index opens after its directory is moved (xarray)" \
        from_root ref append_index.py xarray "$d/elsewhere/moved/results.h5" "${DIRECT[@]}"
    check_ncdump "ncdump -h after the move, from /" "$d/elsewhere/moved/results.h5" /
    # appending to the moved index works and leaves the other links right
    run "$FIX/toy.h5" -o "$d/elsewhere/moved/results.h5" --heads 1 --append --group /toy2
    within "appending to the moved index" "$d/elsewhere/moved/results.h5" /toy2=toy + \
        ref same_file.py outputs /model/layer0 "$d/elsewhere/moved/results.h5" "$D1/direct/layer0.h5"
}

check_symlink_and_mode() {
    local d mode
    d=$(workdir symlink)
    mkdir "$d/real"
    run "$FIX/toy.h5" -o "$d/real/r.h5" --heads 1 --append --group /a
    ln -s real/r.h5 "$d/link.h5"
    chmod 640 "$d/real/r.h5"
    run "$FIX/causal.h5" -o "$d/link.h5" --heads 2 --causal --append --group /b
    mode=$(stat -c %a "$d/real/r.h5")
    if [ $rc -ne 0 ]; then
        bad "append through a symbolic link: exit $rc: $(err1)"
    elif [ ! -L "$d/link.h5" ] || [ -e "$d/link.h5.parts" ] || [ ! -f "$d/real/r.h5.parts/b.1.h5" ]; then
        bad "append through a symbolic link: the link replaced or parts beside it: $(ls -A "$d" | tr '\n' ' ')"
    elif [ "$mode" != 640 ]; then
        bad "append through a symbolic link: the index's mode became $mode, was 640"
    else
        within "append through a symbolic link: the real index grows, keeps its mode 640" "$d/link.h5" \
            /a=toy /b=causal
    fi
}

# ------------------------------------------------- 7b. the order layers were appended in

# Twelve layers appended in model order are listed in that order (not
# layer0, layer1, layer10, ...); a group replaced with --force keeps its
# place; an index of attnrun 1.5 (no creation order: listed by name)
# keeps working, and after the next append lists its old groups by name,
# then the new one, and tracks the order from then on.
check_order() {
    local d i layers=() failed=0
    d=$(workdir order)
    for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
        layers+=("/layer$i")
        "$ATTNRUN" -q "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group "/layer$i" \
            2>>"$T/stderr" || failed=$((failed + 1))
    done
    "$ATTNRUN" -q "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /model/b \
        2>>"$T/stderr" || failed=$((failed + 1))
    "$ATTNRUN" -q "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /model/a \
        2>>"$T/stderr" || failed=$((failed + 1))
    if [ $failed -ne 0 ]; then
        bad "14 appends in order: $failed failed: $(err1)"
        return
    fi
    expect "12 layers and /model/b, /model/a listed in the order appended (h5py, netCDF4, h5dump)" \
        ref append_index.py order "$d/results.h5" "${layers[@]}" /model/b /model/a
    run "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append --group /layer5 --force
    expect "a group replaced with --force keeps its place in the order" \
        ref append_index.py order "$d/results.h5" "${layers[@]}" /model/b /model/a + \
        ref fixture_tolerances.py within "$FIX" "$d/results.h5" /layer5=causal /layer6=toy
    mkdir "$d/old"
    for i in 2 10 1; do
        run "$FIX/toy.h5" -o "$d/old/results.h5" --heads 1 --append --group "/layer$i"
    done
    ref append_index.py untrack "$d/old/results.h5"
    run "$FIX/causal.h5" -o "$d/old/results.h5" --heads 2 --causal --append --group /layer0
    expect "an index without creation order: appended to, its groups by name, then the new one" \
        ref append_index.py order "$d/old/results.h5" /layer1 /layer10 /layer2 /layer0 + \
        ref fixture_tolerances.py within "$FIX" "$d/old/results.h5" /layer0=causal /layer1=toy /layer10=toy
}

# ------------------------------------------------- 7c. groups whose names differ only in case

# link_targets INDEX: "NAME FILE" for each external link of INDEX's root (h5ls).
link_targets() { h5ls "$1" | sed -n 's|^\([^ ]*\)  *External Link {\(.*\)//.*}$|\1 \2|p'; }

# parts_fold_apart NAME INDEX GROUP...: each GROUP (a name in INDEX's root)
# is an external link to a regular file of INDEX's parts directory, no two
# of these files' names are the same once case is folded, and the parts
# directory holds these files and nothing else.
parts_fold_apart() {
    local name=$1 index=$2 g target targets=() why="" links folded files named
    shift 2
    links=$(link_targets "$index")
    for g in "$@"; do
        target=$(awk -v g="$g" '$1 == g { print $2 }' <<<"$links")
        if [ -z "$target" ]; then
            why="$g is not an external link: $(tr '\n' ' ' <<<"$links")"
            break
        elif [ ! -f "$(dirname "$index")/$target" ] || [ -L "$(dirname "$index")/$target" ]; then
            why="$g's part $target is not a regular file"
            break
        fi
        targets+=("${target##*/}")
    done
    if [ -z "$why" ]; then
        folded=$(printf '%s\n' "${targets[@]}" | tr 'A-Z' 'a-z' | LC_ALL=C sort | uniq -d | paste -sd ' ' -)
        files=$(ls -A "$index.parts" | LC_ALL=C sort | tr '\n' ' ')
        named=$(printf '%s\n' "${targets[@]}" | LC_ALL=C sort | tr '\n' ' ')
        if [ -n "$folded" ]; then
            why="part names equal once case is folded ($folded): $* link to ${targets[*]}"
        elif [ "$files" != "$named" ]; then
            why="the parts directory holds $files; the links name $named"
        fi
    fi
    [ -z "$why" ] && ok "$name" || bad "$name: $why"
}

# twin GROUP CASE ARGS...: fixture CASE appended to $d/r.h5 as GROUP with
# ARGS (its fixtures/cases.tsv arguments); a failure added to $failed.
twin() {
    run "$FIX/$2.h5" -o "$d/r.h5" "${@:3}" --append --group "$1"
    [ $rc -eq 0 ] || failed="$failed $1: exit $rc: $(err1);"
}

# On a file system that folds case (macOS, Windows shares) "Layer0.1.h5"
# and "layer0.1.h5" are one file, so groups whose names differ only in case
# must get parts whose names differ otherwise, or the later append would
# overwrite the earlier one's part.  The twins are appended with another
# group and a user's empty group (kept as it is) between them, then one is
# replaced with --force (its new generation must avoid the others' too);
# each group's values against its fixture's numpy reference.
check_case_twins() {
    local d failed=""
    d=$(workdir casefold)
    twin /Layer0 toy --heads 1
    "$PY" -c 'import sys, h5py; h5py.File(sys.argv[1], "a").create_group("notes")' "$d/r.h5"
    twin /mid toy --heads 1
    twin /layer0 causal --heads 2 --causal
    twin /LAYER0 perhead3d
    if [ -n "$failed" ]; then
        bad "groups differing only in case appended:$failed"
        return
    fi
    within "/Layer0, /layer0, /LAYER0 each hold their own fixture's values, /notes kept" \
        "$d/r.h5" /Layer0=toy /mid=toy /layer0=causal /LAYER0=perhead3d + \
        ref append_index.py groups "$d/r.h5" Layer0 mid layer0 LAYER0 notes
    parts_fold_apart "/Layer0, /layer0, /LAYER0 each link to a part of its own, no two names equal but for case" \
        "$d/r.h5" Layer0 mid layer0 LAYER0
    twin /Layer0 cross_mask --heads 2 --kv KV --mask key_mask --force
    if [ -n "$failed" ]; then
        bad "--force on /Layer0 beside /layer0 and /LAYER0:$failed"
        return
    fi
    within "--force on /Layer0: its new values, its twins' unchanged" \
        "$d/r.h5" /Layer0=cross_mask /mid=toy /layer0=causal /LAYER0=perhead3d
    parts_fold_apart "--force on /Layer0: a new part no twin's name folds to, the old one removed" \
        "$d/r.h5" Layer0 mid layer0 LAYER0
}

# ------------------------------------------------- 8. every allocation failing in turn

# With the fault-injection build (make builds build/fault/attnrun;
# tests/cli/test_alloc.sh): ATTN_FAIL_ALLOC=N fails attnrun's Nth allocation.
# Appending to an index of two groups, each N until the run needs fewer
# must end with exit 1 and one line, and leave the directory as it was.
check_alloc() {
    local fault=${FAULT_ATTNRUN:-}
    case $fault in
        "") skip "every allocation failing: no FAULT_ATTNRUN (make test passes build/fault/attnrun)"
            return ;;
        /*) ;;
        *) fault=$PWD/$fault ;;
    esac
    local d n before why problems=0
    d=$(workdir alloc)
    mkdir "$d/res"
    run "$FIX/toy.h5" -o "$d/res/r.h5" --heads 1 --append --group /model/a
    run "$FIX/toy.h5" -o "$d/res/r.h5" --heads 1 --append --group /b
    before=$(snapshot "$d/res")
    for ((n = 1; n <= 400; n++)); do
        ATTN_FAIL_ALLOC=$n ASAN_OPTIONS=$FAULT_ASAN_OPTIONS \
            timeout -s KILL "$TL" "$fault" -q "$FIX/toy.h5" -o "$d/res/r.h5" --heads 1 --append \
            --group /model/c </dev/null >/dev/null 2>"$T/stderr"
        rc=$?
        [ $rc -eq 0 ] && break
        why=$(run_problem "$rc" 1 "$T/stderr")
        [ -z "$why" ] && grep -q 'internal error' "$T/stderr" && why="a crash: $(err1)"
        [ -z "$why" ] && [ "$(snapshot "$d/res")" != "$before" ] && why="the directory changed"
        if [ -n "$why" ]; then
            bad "append, allocation $n failing: $why"
            problems=$((problems + 1))
            [ $problems -ge 3 ] && return
        fi
    done
    if [ $rc -ne 0 ]; then
        bad "append: still failing after 400 allocations"
    elif [ $problems -eq 0 ]; then
        ok "append to an index of two groups: each of its $((n - 1)) allocations failing ends with exit 1, one line, nothing changed"
    fi
}

# ---------------------------------------------------------------- main

check_gather
check_refusals
check_force
check_failures
check_lock
check_injected
check_concurrent
check_moves
check_symlink_and_mode
check_order
check_case_twins
check_alloc
finish
