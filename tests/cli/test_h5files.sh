#!/usr/bin/env bash
# tests/cli/test_h5files.sh - what attnrun's HDF5 files hold: outputs written
# into inputs of every libver bound, --in-place --force replacing only what
# attnrun wrote, long --group and dataset paths, float32 overflow,
# soft-link bombs, and external links to datasets larger than the linking
# file.  Each check's name starts with the number of the guarantee it
# checks in tests/README.md's table "Hostile surroundings".
#
#   ATTNRUN=build/attnrun bash tests/cli/test_h5files.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy, h5py, h5netcdf, xarray (default: /usr/bin/python3)
#   TIME_LIMIT  hang guard of one run in seconds (default 10; make memcheck
#               sets 120).  The link bombs of item 10 get half of it (5 s).
#
# Inputs are generated at test time in a temporary directory removed on
# exit; expected values come from the float64 numpy reference of
# tests/ref/reference.py (the published formulas; tests/ref/h5files_cases.py
# holds the inputs and the checks), never from attnrun's output.  Float32
# results must be within 1e-4 relative to the dataset's largest magnitude,
# float64 within 1e-12.  Each check prints "ok NAME", "FAIL NAME: WHY";
# the last line is "hdf5 files: N passed, M failed".
set -u

TIME_LIMIT=${TIME_LIMIT:-10}
# item 10: "a 5 s limit", scaled with TIME_LIMIT (valgrind)
BOMB_LIMIT=$(( TIME_LIMIT / 2 > 5 ? TIME_LIMIT / 2 : 5 ))

SUITE="hdf5 files"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, reference.py
. "$TESTS/lib/checks.sh"

suite_setup h5files numpy h5py h5netcdf xarray

# ---------------------------------------------------------------- helpers

# h5files_cases COMMAND ARGS...: tests/ref/h5files_cases.py, the inputs,
# the float64 reference and the checks of the files written.
h5files_cases() { PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/h5files_cases.py" "$@"; }

if ! h5files_cases make "$T/c" >"$T/make.log" 2>&1; then
    bad "setup: generating the inputs failed: $(tail -n 3 "$T/make.log")"
    finish
fi
sizes=$(tr '\n' ' ' <"$T/make.log")

# verify NAME OUT IN [verify options]: records NAME as ok when every
# saved output of OUT matches the float64 reference computed from IN.
verify() {
    local name=$1
    shift
    h5check "$name" verify "$@"
}

# h5check NAME COMMAND ARGS...: ok NAME when h5files_cases.py COMMAND ARGS
# holds (with what it says, if anything), else FAIL with its last line.
h5check() {
    local name=$1 out
    shift
    if out=$(h5files_cases "$@" 2>&1); then
        ok "$name${out:+ ($(printf '%s' "$out" | tail -n 1 | head -c 200))}"
    else
        bad "$name: $(printf '%s' "$out" | tail -n 1 | head -c 300)"
    fi
}


# attn LIMIT ARGS...: attnrun -q ARGS under the hang guard; sets rc and
# leaves its output in $T/stdout and $T/stderr.
attn() {
    local limit=$1
    shift
    # (the braces keep bash's "Killed" notice of a guarded run off stderr)
    { timeout -s KILL "$limit" "$ATTNRUN" -q "$@" </dev/null >"$T/stdout" 2>"$T/stderr"; } 2>/dev/null
    rc=$?
}

err1() { head -c 200 "$T/stderr" | head -n 1; }

# snap DIR: the names in DIR and the sha256 of each regular file.
snap() {
    local f
    for f in "$1"/* "$1"/.[!.]*; do
        [ -e "$f" ] || [ -L "$f" ] || continue
        if [ -f "$f" ]; then
            echo "${f##*/} $(sha256sum <"$f" | cut -d ' ' -f 1)"
        else
            echo "${f##*/}"
        fi
    done
}

# temps DIR: attnrun's temporaries in DIR.
temps() { find "$1" -maxdepth 1 -name '.*attnrun-tmp*' -printf '%f ' ; }

# refused NAME STATUS PATTERN DIR LIMIT ARGS...: attnrun ARGS must exit
# STATUS in time, not by a signal, with one "attnrun: " stderr line that
# contains PATTERN (when not empty), and leave DIR (which holds IN and
# OUT's place) exactly as it was: IN's bytes, no OUT, no temporary.
# Whatever a wrong run added to DIR is removed afterwards.
refused() {
    local name=$1 status=$2 pattern=$3 dir=$4 limit=$5 before after f problem
    shift 5
    before=$(snap "$dir")
    attn "$limit" "$@"
    after=$(snap "$dir")
    for f in "$dir"/* "$dir"/.[!.]*; do
        [ -e "$f" ] || [ -L "$f" ] || continue
        printf '%s\n' "$before" | cut -d ' ' -f 1 | grep -qxF -e "${f##*/}" || rm -rf "$f"
    done
    problem=$(run_problem "$rc" "$status" "$T/stderr")
    if [ -n "$problem" ]; then
        bad "$name: $problem"
    elif [ -n "$pattern" ] && ! grep -qF -e "$pattern" "$T/stderr"; then
        bad "$name: the message does not contain '$pattern': $(err1)"
    elif [ "$before" != "$after" ]; then
        bad "$name: $dir changed (IN's bytes, an OUT or a temporary): $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | cut -c 1-80 | tr '\n' ' ')"
    else
        ok "$name (exit $rc: $(err1))"
    fi
}

# succeeded NAME DIR: the last attn run exited 0 and left no temporary in
# DIR; otherwise records the failure.  Status 0 when it did.
succeeded() {
    local name=$1 dir=$2 left problem
    problem=$(run_problem "$rc" 0 "$T/stderr")
    if [ -n "$problem" ]; then
        bad "$name: $problem"
    elif [ -s "$T/stderr" ]; then
        bad "$name: exit 0 but stderr says: $(err1)"
    elif left=$(temps "$dir") && [ -n "$left" ]; then
        bad "$name: temporaries left: $left"
    else
        return 0
    fi
    return 1
}

# in_place_twice NAME DIR CHECK OPTIONS1 OPTIONS2: attnrun $T/c/DIR/in.h5
# --in-place --heads 2 OPTIONS1 (words in one string), then the same with
# OPTIONS2, each succeeding; then h5check NAME CHECK on the file.
in_place_twice() {
    local name=$1 d=$T/c/$2 check=$3 run argv
    for run in 1 2; do
        read -r -a argv <<<"${@:3+run:1}"
        attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 "${argv[@]}"
        succeeded "$name (run $run)" "$d" || return
    done
    h5check "$name" "$check" "$d/in.h5"
}

ALL=scores,weights,heads,output,q,k,v

# ---------------------------------------------------------------- 4. libver

# Inputs written with every libver bound h5py offers; every output, for -o
# and for --in-place, holds the reference values and stores its bytes.
for lv in earliest v108 v110 latest; do
    for shape in one multi; do
        extra=()
        what="one chunk"
        if [ $shape = multi ]; then
            extra=(--batch-slice 1)
            what="several chunks"
        fi
        d=$T/c/4_${lv}_o_$shape
        name="4 libver $lv, -o, $what: every output holds the reference values"
        attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --save $ALL "${extra[@]}"
        succeeded "$name" "$d" &&
            verify "$name" "$d/out.h5" "$d/in.h5" --save $ALL --storage

        d=$T/c/4_${lv}_inplace_$shape
        cp "$d/in.h5" "$d/orig.h5"
        name="4 libver $lv, --in-place, $what: every output holds the reference values"
        attn "$TIME_LIMIT" "$d/in.h5" --in-place --group /attn --heads 2 --save $ALL "${extra[@]}"
        succeeded "$name" "$d" &&
            verify "$name" "$d/in.h5" "$d/orig.h5" --group /attn --save $ALL --storage
    done
done

# ---------------------------------------------------------------- 5. --force

# a. Datasets named scale, precision (and heads) do not clash with the
# group attributes of those names: links and attributes are two namespaces.
d=$T/c/5a
name="5a user datasets /scale, /precision: --in-place without --force succeeds, both kept"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2
if succeeded "$name" "$d"; then
    h5check "$name" user-datasets-kept "$d/in.h5"
fi

d=$T/c/5a_heads
name="5a user datasets /scale, /precision, /heads: --in-place --save scores,weights,output without --force succeeds"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --save scores,weights,output
if succeeded "$name" "$d"; then
    h5check "$name" user-heads-kept "$d/in.h5"
fi

# b. A second --force run that saves less keeps the axes the first run's
# datasets still use: d_k stays, q and k keep their scales.
in_place_twice "5b --in-place --save q,k,v,output then --force --save output: d_k kept, q/k scales resolve, xarray opens" \
    5b d_k-kept "--save q,k,v,output" "--force --save output"

# c. A dataset named output that attnrun did not write is never replaced;
# d. a user dimension scale named query is not attnrun's either;
# f. nor a user attribute scale on a group attnrun never wrote into.
# Each: the input's directory, the text the message names, the check's
# name and the options after --in-place --heads 2.
NOT_OURS=(
    "5c|output|5c user dataset 'output': --in-place --force is refused naming it|--force"
    "5c_noforce|output|5c user dataset 'output': --in-place without --force is refused naming it|"
    "5d|query|5d user dimension scale 'query': --in-place --force is refused naming it|--force"
    "5f_noforce|scale|5f user attribute 'scale': --in-place without --force is refused|"
    "5f|scale|5f user attribute 'scale': --in-place --force is refused naming it|--force"
)
for row in "${NOT_OURS[@]}"; do
    IFS='|' read -r c text name options <<<"$row"
    read -r -a argv <<<"$options"
    d=$T/c/$c
    refused "$name" 2 "$text" "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 "${argv[@]}"
done

# e. attnrun's own query scale (n=8) still serves q, which run 2 keeps:
# replacing it by one of length 6 would break q.
d=$T/c/5e
name="5e --force --x X2 (n=6) over a run with n=8 whose q keeps 'query'"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group /r --save q,output
if succeeded "$name (run 1)" "$d"; then
    refused "$name: refused naming query" 2 query \
        "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group /r --force --save output --x X2
fi

# g. The same --force command twice: both succeed, everything resolves.
in_place_twice "5g the same --in-place --force --save all twice: reference values, scales resolve, attnrun_role marks, xarray opens" \
    5g force-twice "--force --save $ALL" "--force --save $ALL"

# ---------------------------------------------------------------- 6. long --group

G=/results/$(printf 'g%.0s' $(seq 4200))

d=$T/c/6_external
refused "6 --in-place --group of 4209 bytes through an external link: refused, both files unchanged" \
    2 "external link" "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group "$G"

d=$T/c/6_soft
refused "6 --in-place --group of 4209 bytes through a soft link: refused (docs/safety.md, Safety)" \
    2 "" "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group "$G"

d=$T/c/6_long_o
name="6 -o --group of 4209 bytes (no links): the results are at that path"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --group "$G"
succeeded "$name" "$d" && verify "$name" "$d/out.h5" "$d/in.h5" --group "$G"

d=$T/c/6_long_inplace
cp "$d/in.h5" "$d/orig.h5"
name="6 --in-place --group of 4209 bytes (no links): the results are at that path"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group "$G"
succeeded "$name" "$d" && verify "$name" "$d/in.h5" "$d/orig.h5" --group "$G"

# ---------------------------------------------------------------- 7. overflow

d=$T/c/7_scale
refused "7 --scale 1e39 does not fit float32: usage error" 2 float32 \
    "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --scale 1e39
refused "7 --scale 1e-50 is 0 in float32: usage error" 2 "" \
    "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --scale 1e-50

for e in 19 30; do
    d=$T/c/7_x$e
    refused "7 X around 1e$e, default outputs: float32 overflow refused" 3 "--precision f64" \
        "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
    refused "7 X around 1e$e, --save output: float32 overflow refused" 3 "--precision f64" \
        "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --save output
done

d=$T/c/7_one_masked
refused "7 one score below float32 (-inf) under a key mask: float32 overflow refused" 3 "--precision f64" \
    "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --mask M
d=$T/c/7_first_masked
refused "7 the first key's score below float32 (-inf) under a key mask: float32 overflow refused" 3 \
    "--precision f64" "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --mask M

d=$T/c/7_x19
name="7 X around 1e19 with --precision f64: finite values matching the reference"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --precision f64 --save $ALL
succeeded "$name" "$d" &&
    verify "$name" "$d/out.h5" "$d/in.h5" --save $ALL --precision f64
rm -f "$d/out.h5"

# ---------------------------------------------------------------- 10. link bombs

d=$T/c/10_small
refused "10 soft link looping through a hard-link cycle (4 KB paths): refused within $BOMB_LIMIT s" \
    3 links "$d" "$BOMB_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
d=$T/c/10_big
refused "10 chain of 76 soft links of 4 KB paths: refused within $BOMB_LIMIT s" \
    3 links "$d" "$BOMB_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
d=$T/c/10_one
name="10 one soft link through a 4 KB path of hard-linked groups: resolves"
attn "$BOMB_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
succeeded "$name" "$d" && verify "$name" "$d/out.h5" "$d/in.h5"
echo "# item 10 and 19 input sizes (bytes): $sizes"

# ---------------------------------------------------------------- 19. external

d=$T/c/19
name="19 --allow-external: X links to 64 KiB of values in another file, more than the linking file"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 1 --allow-external
succeeded "$name" "$d" && verify "$name" "$d/out.h5" "$d/in.h5" --heads 1

# ---------------------------------------------------------------- 20. long --x

d=$T/c/20
X20=/$(printf 'p%.0s' $(seq 2500))/$(printf 'q%.0s' $(seq 2500))/X
name="20 --x of 5008 bytes: the reference values, the same as for /X"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/long.h5" --heads 2 --x "$X20" --save $ALL
if succeeded "$name" "$d"; then
    attn "$TIME_LIMIT" "$d/in.h5" -o "$d/short.h5" --heads 2 --save $ALL
    if succeeded "$name (the run on /X)" "$d"; then
        h5check "$name" long-x "$d/long.h5" "$d/short.h5" "$d/in.h5" "$X20"
    fi
fi

finish
