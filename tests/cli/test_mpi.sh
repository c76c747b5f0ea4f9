#!/usr/bin/env bash
# tests/cli/test_mpi.sh - attnrun-mpi (make MPI=1) under mpirun against the
# serial build: every rank computes its share of the batch (whole batch
# items, or blocks of query rows of a long item) and all write one file.
#
#   ATTNRUN=build/attnrun ATTNRUN_MPI=build/attnrun-mpi bash tests/cli/test_mpi.sh
#                                                    # from the repository root
#
# Environment:
#   ATTNRUN      the serial build, the reference (default build/attnrun)
#   ATTNRUN_MPI  the MPI build under test (default build/attnrun-mpi)
#   PYTHON       a python with numpy and h5py (default /usr/bin/python3)
#   TIME_LIMIT   hang guard of one run in seconds (default 60): every run
#                is under `timeout -s KILL`, a hang is a FAIL
#
# What it checks:
#   - identity: for P = 1, 2, 3, 4, `mpirun -n P attnrun-mpi IN -o OUT ...`
#     writes the file `attnrun IN -o OUT ...` writes: the same groups,
#     datasets, shapes, types, chunks, filters, bit-identical values,
#     attributes (all but created_utc and command_line) and dimension
#     scales (tests/ref/same_file.py, h5py and numpy), and `h5diff -r` finds
#     no difference once those two attributes are made equal; on fixtures
#     and generated inputs whose batch is no multiple of P (B = 5 in slices
#     of 1 and 2), a long item (n = 1100) whose query rows are split among
#     the ranks (also with 40 keys: tiles of 1024 rows by 40), and --save
#     of every output and summary, --compress,
#     --store f16/bf16, --precision f64, --window, --group, --tokens,
#     --in-place and --append (the index's links and every part); and
#     under a BLAS that computes a row by its place in the block
#     (tests/lib/blas_by_place.c, preloaded): B = 5 in slices of 2 and the
#     long item, its keys projected by the rank that owns their rows;
#   - the comparison itself sees a changed value, attribute, label, scale,
#     chunk shape, filter or member (mutated copies of a serial file);
#   - --dry-run --json under mpirun: one JSON document (rank 0 only), the
#     serial run's apart from the plan;
#   - all or nothing: a NaN in the last item only (rejected, exit 3),
#     q, k and v overflowing float32 in the last rank's rows (exit 3),
#     SIGTERM to mpirun mid-run (exit 1), a full file system (exit 1, with
#     --force past the free-space precheck, whole items or one item's rows
#     shared: the room is reserved first; and the precheck's refusal), a
#     write failing on one rank only (ENOSPC injected with strace: the job
#     is aborted, as the ranks cannot close the file together), a
#     usage error (exit 2): each ends with the status, exactly one line
#     starting "attnrun: ", no OUT, no temporary, no rank left running;
#   - an existing OUT is left byte for byte as it was by a failing run.
# mpirun's own banners (when a rank exits nonzero) are allowed on stderr;
# they are not "attnrun: " lines.  About 100 runs (80 under mpirun), ~2 minutes
# on two cores.
# Each check prints "ok NAME", "FAIL NAME: WHY" or "skip NAME: WHY"; the
# last line is "mpi: N passed, M failed"; the exit status is 1 when M > 0.
set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
ATTNRUN_MPI=${ATTNRUN_MPI:-build/attnrun-mpi}
TL=${TIME_LIMIT:-60}
FIX=$PWD/fixtures
# CI runs as root on a 2-core machine: up to 4 ranks need both options.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
PS="1 2 3 4"
IGNORE=(created_utc command_line)       # differ between any two runs

SUITE="mpi"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, same_file.py
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

suite_setup mpi numpy h5py
case $ATTNRUN_MPI in
    /*) ;;
    *) ATTNRUN_MPI=$PWD/$ATTNRUN_MPI ;;
esac
if [ ! -x "$ATTNRUN_MPI" ]; then
    bad "setup: attnrun-mpi not found at $ATTNRUN_MPI (make MPI=1)"
    finish
fi
for tool in mpirun h5diff h5ls h5repack timeout pgrep; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        bad "setup: $tool not found"
        finish
    fi
done

MNT=""                                  # the tmpfs of the full-disk checks
cleanup() {
    if [ -n "$MNT" ]; then
        umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT

# ---------------------------------------------------------------- helpers

# serial ARGS...: the serial build; rc, $T/stdout, $T/stderr.
serial() {
    ${PRELOADED:+by_place} timeout -s KILL "$TL" "$ATTNRUN" "$@" </dev/null >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

# mpi P ARGS...: attnrun-mpi on P ranks; rc, $T/stdout, $T/stderr.  After
# the hang guard killed mpirun, ranks still running are ended (by id: the
# ones whose command line holds this suite's temporary directory).
mpi() {
    local p=$1
    shift
    ${PRELOADED:+by_place} timeout -s KILL "$TL" "${MPIRUN[@]}" -n "$p" "$ATTNRUN_MPI" "$@" \
        </dev/null >"$T/stdout" 2>"$T/stderr"
    rc=$?
    [ $rc -eq 137 ] && reap
}

reap() {
    local pid
    for pid in $(pgrep -f -- "$ATTNRUN_MPI .*$T/"); do
        kill -s KILL "$pid" 2>/dev/null
    done
}

# lines: how many stderr lines of the last run start with "attnrun: ".
lines() { grep -c '^attnrun: ' "$T/stderr"; }
err1() {
    local l
    l=$(grep -m 1 '^attnrun: ' "$T/stderr")
    [ -n "$l" ] || l=$(head -n 3 "$T/stderr" | tr '\n' ' ')
    printf '%s' "$l" | head -c 300
}

# mpi_problem STATUS: why the last mpirun did not end with STATUS (and,
# for a failure, exactly one "attnrun: " line); nothing when it did.
mpi_problem() {
    local status=$1 n
    n=$(lines)
    if [ "$rc" -eq 137 ]; then
        echo "no answer within $TL s (killed)"
    elif [ "$rc" -gt 128 ]; then
        echo "killed by signal $((rc - 128)): $(err1)"
    elif [ "$rc" -ne "$status" ]; then
        echo "exit $rc, expected $status: $(err1)"
    elif [ "$status" -ne 0 ] && [ "$n" -ne 1 ]; then
        echo "$n lines start with 'attnrun: ', expected 1: $(grep '^attnrun: ' "$T/stderr" | head -n 3 | tr '\n' ' ' | head -c 300)"
    fi
}

# mpi_check NAME COMMAND ARGS...: ok NAME when mpi_cases COMMAND ARGS holds
# (with what it says, if anything), else FAIL with its last line.
mpi_check() {
    local name=$1 out
    shift
    if out=$(mpi_cases "$@" 2>&1); then
        ok "$name${out:+ ($out)}"
    else
        bad "$name: $(printf '%s\n' "$out" | tail -n 1)"
    fi
}

workdir() {
    local d=$T/$1
    rm -rf "$d"
    mkdir -p "$d"
    echo "$d"
}

# listing DIR: every name in DIR (hidden ones too), one line.
listing() { (cd "$1" && ls -A | LC_ALL=C sort | tr '\n' ' '); }

# mpi_cases COMMAND ARGS...: tests/ref/mpi_cases.py -- the inputs, the
# attributes made equal for h5diff (normalize), the mutated copies of the
# comparison's self-check and the checks of the plans.
mpi_cases() { "$PY" "$TESTS/ref/mpi_cases.py" "$@"; }

# same NAME SERIAL MPI [ATTR...]: ok when same_file.py finds MPI equal to
# SERIAL (ignoring created_utc, command_line and each ATTR) and h5diff -r
# finds no difference between copies with those attributes made equal.
same() {
    local name=$1 a=$2 b=$3 out ign=() x
    shift 3
    for x in "${IGNORE[@]}" "$@"; do ign+=(--ignore-attr "$x"); done
    # Chunk shapes follow the slice size, which follows the threads a
    # process plans with: all cores for the serial run, each rank's share
    # under mpirun (CHUNKS=1: compared too, when both plan alike).
    [ "${CHUNKS:-0}" = 1 ] || ign+=(--no-chunks)
    out=$("$PY" "$TESTS/ref/same_file.py" "$a" "$b" "${ign[@]}" 2>&1)
    x=$?
    if [ $x -ne 0 ]; then
        bad "$name: same_file.py exit $x: $(printf '%s' "$out" | tail -n 1 | head -c 400)"
        return 1
    fi
    mkdir -p "$T/h5diff"
    rm -f "$T/h5diff/serial.h5" "$T/h5diff/mpi.h5"
    cp "$a" "$T/h5diff/serial.h5" && cp "$b" "$T/h5diff/mpi.h5" || {
        bad "$name: cannot copy the files for h5diff"
        return 1
    }
    if ! out=$(mpi_cases normalize "${IGNORE[@]}" "$@" -- "$T/h5diff/serial.h5" "$T/h5diff/mpi.h5" 2>&1); then
        bad "$name: cannot set the attributes for h5diff: $(printf '%s' "$out" | tail -n 1)"
        return 1
    fi
    h5diff -r "$T/h5diff/serial.h5" "$T/h5diff/mpi.h5" >"$T/h5diff/log" 2>&1
    x=$?
    if [ $x -ne 0 ]; then
        bad "$name: h5diff -r exit $x: $(grep -v -e '^0 differences found' -e '^attribute: <' -e '^dataset: <' -e '^group  : <' "$T/h5diff/log" | head -n 4 | tr '\n' ' ' | head -c 400)"
        return 1
    fi
    ok "$name"
}

# identity NAME IN ARGS...: the serial run once, then mpirun -n P for each
# P of $PS with the same arguments, each file compared with the serial one
# (and the directory: nothing but the two files, no temporary).
ncase=0
identity() {
    local name=$1 in=$2 d p why
    shift 2
    ncase=$((ncase + 1))
    d=$(workdir "id$ncase")
    serial "$in" -o "$d/serial.h5" "$@"
    if [ $rc -ne 0 ]; then
        bad "identity $name: the serial run failed: exit $rc: $(head -c 300 "$T/stderr")"
        return
    fi
    for p in $PS; do
        mpi "$p" "$in" -o "$d/mpi.h5" "$@"
        why=$(mpi_problem 0)
        if [ -n "$why" ]; then
            bad "identity $name, P=$p: $why"
        elif [ "$(listing "$d")" != "mpi.h5 serial.h5 " ]; then
            bad "identity $name, P=$p: the directory holds $(listing "$d")"
        else
            same "identity $name, P=$p" "$d/serial.h5" "$d/mpi.h5"
        fi
        rm -f "$d/mpi.h5"
    done
    rm -rf "$d"
}

# ---------------------------------------------------------------- inputs

# The generated inputs (tests/ref/mpi_cases.py inputs): b5.h5 (B = 5, with
# tokens and a key mask), nan.h5 (a NaN in its last item), long.h5 (one item
# of n = 1100) and big.h5 (~800 MB of scores and weights).
if ! out=$(mpi_cases inputs "$T" 2>&1); then
    bad "setup: generating the inputs: $(printf '%s' "$out" | tail -n 1)"
    finish
fi
B5=$T/b5.h5
build_by_place                          # BY_PLACE, by_place (checks.sh)
LONG=$T/long.h5
# one item, 1100 queries and 40 keys: its maps in tiles of 1024 rows by 40
CROSS=$T/cross.h5
if ! out=$(ref attention_inputs.py random "$CROSS" 1 1100 16 3 --kv 40 2>&1); then
    bad "setup: generating the cross input: $(printf '%s' "$out" | tail -n 1)"
    finish
fi
BIG=$T/big.h5
BIG_ARGS=(--heads 4 --save scores,weights,output)
ALL=scores,weights,heads,output,q,k,v,entropy,argmax,distance,mean,result,norms,value_norm

# ------------------------------------------------- 0. the comparison can fail

check_comparison() {
    local d out missed=""
    d=$(workdir selfcheck)
    serial "$FIX/gpt2.h5" -o "$d/ref.h5" --heads 12 &&
        serial "$B5" -o "$d/tokref.h5" --heads 4 --tokens tokens --save weights
    if [ $rc -ne 0 ]; then
        bad "comparison self-check: the serial run failed: $(head -c 300 "$T/stderr")"
        return
    fi
    if ! out=$(mpi_cases mutate "$d" 2>&1); then
        bad "comparison self-check: mpi_cases.py mutate: $(printf '%s' "$out" | tail -n 1)"
        return
    fi
    h5repack -l /weights:CHUNK=1x1x32x32 "$d/ref.h5" "$d/chunk.h5" &&
        h5repack -f /weights:GZIP=1 "$d/ref.h5" "$d/filter.h5" &&
        h5repack "$d/ref.h5" "$d/repacked.h5" || {
        bad "comparison self-check: h5repack failed"
        return
    }
    # Each: the file, its copy, the status same_file.py must end with (1:
    # it sees a difference), the name of a miss, the attribute ignored (-: none).
    local row a b status what ignore
    for row in "ref value 1 value created_utc" "ref attr 1 attr created_utc" \
               "ref dsattr 1 dsattr created_utc" "ref label 1 label created_utc" \
               "ref detach 1 detach created_utc" "ref extra 1 extra created_utc" \
               "ref chunk 1 chunk created_utc" "ref filter 1 filter created_utc" \
               "tokref token 1 token -" "ref created 1 created_utc-not-ignored -" \
               "ref created 0 created-equal created_utc" "ref repacked 0 repacked-equal created_utc"; do
        read -r a b status what ignore <<<"$row"
        if [ "$ignore" = - ]; then
            "$PY" "$TESTS/ref/same_file.py" "$d/$a.h5" "$d/$b.h5" >/dev/null 2>&1
        else
            "$PY" "$TESTS/ref/same_file.py" "$d/$a.h5" "$d/$b.h5" --ignore-attr "$ignore" >/dev/null 2>&1
        fi
        [ $? -eq "$status" ] || missed="$missed $what"
    done
    h5diff -r "$d/ref.h5" "$d/value.h5" >/dev/null 2>&1
    [ $? -eq 1 ] || missed="$missed h5diff-value"
    if [ -z "$missed" ]; then
        ok "comparison self-check: same_file.py sees a changed value (1 ulp), attribute, label, scale, chunk shape, filter, member, token string; h5diff the value; equal files compare equal"
    else
        bad "comparison self-check: missed:$missed"
    fi
    rm -rf "$d"
}

# ------------------------------------------------- 1. identity with the serial build

check_plan() {
    local out
    serial "$LONG" --heads 4 --causal --dry-run --json
    if [ $rc -ne 0 ]; then
        bad "the long item's plan: exit $rc: $(head -c 300 "$T/stderr")"
        return
    fi
    mpi_check "the long item (n = 1100) is planned in query-row blocks smaller than n" \
        row-blocks "$T/stdout"
    serial "$LONG" --heads 4 --causal --dry-run
    if grep -q '^rows .*blocks of' "$T/stdout"; then
        ok "the long item's text plan: $(grep '^rows' "$T/stdout" | tr -s ' ')"
    else
        bad "the long item's text plan says no row blocks: $(tr '\n' ' ' <"$T/stdout" | head -c 300)"
    fi
}

check_identity() {
    # the fixtures, with their options from fixtures/cases.tsv (and more)
    identity "gpt2 --heads 12 (B=2)" "$FIX/gpt2.h5" --heads 12
    identity "batch_bias (B=3) --batch-slice 2, every output" "$FIX/batch_bias.h5" \
        --heads 4 --batch-slice 2 --save scores,weights,heads,output,q,k,v
    identity "causal (B=3) --causal --store f16" "$FIX/causal.h5" --heads 2 --causal --store f16
    identity "cross_mask (B=3) --kv --mask --batch-slice 1, summaries" "$FIX/cross_mask.h5" \
        --heads 2 --kv KV --mask key_mask --batch-slice 1 --save weights,output,entropy,argmax,distance
    identity "rank2 (one item) --group /results" "$FIX/rank2.h5" --heads 2 --group /results
    # generated: B = 5 in slices of 1 and 2
    identity "B=5 --batch-slice 1, every output and summary" "$B5" --heads 4 --batch-slice 1 --save "$ALL"
    identity "B=5 --batch-slice 2 --compress 4 --store bf16 --group /some/group" "$B5" \
        --heads 4 --batch-slice 2 --compress 4 --store bf16 --group /some/group
    identity "B=5 --batch-slice 2 --precision f64 --causal --window 7 --mask" "$B5" \
        --heads 2 --batch-slice 2 --precision f64 --causal --window 7 --mask key_mask \
        --save scores,weights,output,mean,result
    identity "B=5 --batch-slice 1 --tokens" "$B5" --heads 4 --batch-slice 1 --tokens tokens \
        --save weights,output,argmax
    # one long item: its query rows split among the ranks
    identity "n=1100 --causal (rows in blocks)" "$LONG" --heads 4 --causal
    identity "n=1100 --causal --window 100 --compress 4, summaries" "$LONG" --heads 4 --causal \
        --window 100 --compress 4 --save scores,weights,output,entropy,argmax,distance
    identity "n=1100 --precision f64 --store f16 --group /layer/attn" "$LONG" --heads 4 --causal \
        --precision f64 --store f16 --group /layer/attn --save weights,heads,output,mean,result
    identity "n=1100 --save output (online softmax)" "$LONG" --heads 4 --causal --save output,q,k,v
    # the rows are shared in whole tiles of the maps, which are not square
    # here (1024 rows of 40 keys): a rank's rows start on a tile's first row
    identity "n=1100 --kv of m=40 (tiles of 1024 rows by 40 keys)" "$CROSS" --heads 4 --kv KV \
        --save weights,output
    # the ranks project the keys of their own rows and exchange them: k|v
    # side by side above, whole rows when the heads interleave q, k and v
    identity "n=600 fused, heads interleaved (rows exchanged whole)" "$T/fused.h5" --heads 4 \
        --wqkv W_QKV --qkv-split heads --layout linear --causal --save weights,output
    # norms need every key's value length: after the exchange, on each rank
    identity "n=1100 --causal --save norms,value_norm (keys exchanged)" "$LONG" --heads 4 \
        --causal --save weights,norms,value_norm
    identity "B=5 --batch-slice 2, norms in the weights' place" "$B5" --heads 4 \
        --batch-slice 2 --mask key_mask --save norms,value_norm,output
    # sliding keys: each rank's first block projects the keys its window
    # reaches before its rows (docs/running.md, "Steps")
    identity "n=1100 --causal --window 300 --memory 1M (sliding keys)" "$LONG" --heads 4 \
        --causal --window 300 --memory 1M --save weights,output,entropy
    # under a BLAS that computes a row by its place in the block (the
    # stand-in of test_blocks.sh, preloaded into both runs and every rank):
    # each rank's projection blocks are the serial run's on every machine,
    # whole items (slices from item 2 and 4) and one item's rows shared
    if [ -n "$BY_PLACE" ]; then
        PRELOADED=1 identity "B=5 --batch-slice 2 under blas_by_place" "$B5" --heads 4 \
            --batch-slice 2 --save weights,heads,output
        PRELOADED=1 identity "n=1100 --causal under blas_by_place (keys exchanged)" "$LONG" \
            --heads 4 --causal --save weights,heads,output
    fi
    # the same threads and memory cap on both sides: the same plan, so
    # the same chunk shapes too
    CHUNKS=1 identity "B=5 --threads 1 --memory 64M, chunk shapes too" "$B5" --heads 4 \
        --threads 1 --memory 64M --save "$ALL" --compress 2
}

check_in_place() {
    local d p why
    d=$(workdir inplace)
    mkdir "$d/s"
    cp "$B5" "$d/s/in.h5"
    serial "$d/s/in.h5" --in-place --group /res --heads 4 --batch-slice 2 --save "$ALL"
    if [ $rc -ne 0 ]; then
        bad "--in-place: the serial run failed: exit $rc: $(head -c 300 "$T/stderr")"
        return
    fi
    for p in $PS; do
        rm -rf "$d/m"
        mkdir "$d/m"
        cp "$B5" "$d/m/in.h5"
        mpi "$p" "$d/m/in.h5" --in-place --group /res --heads 4 --batch-slice 2 --save "$ALL"
        why=$(mpi_problem 0)
        if [ -n "$why" ]; then
            bad "--in-place --group /res, P=$p: $why"
        elif [ "$(listing "$d/m")" != "in.h5 " ]; then
            bad "--in-place --group /res, P=$p: the directory holds $(listing "$d/m")"
        else
            same "--in-place --group /res, P=$p (input_file ignored too)" "$d/s/in.h5" "$d/m/in.h5" input_file
        fi
    done
    rm -rf "$d"
}

check_append() {
    local d g p in why ok_runs=1 args=()
    d=$(workdir append)
    mkdir "$d/s" "$d/m"
    # /a: B = 5 in slices of 1 on 3 ranks; /b: the long item on 2 ranks
    for g in a b; do
        if [ $g = a ]; then
            in=$B5 p=3 args=(--heads 4 --batch-slice 1 --save weights,output,entropy)
        else
            in=$LONG p=2 args=(--heads 4 --causal --save scores,output)
        fi
        serial "$in" -o "$d/s/results.h5" --append --group "/$g" "${args[@]}"
        if [ $rc -ne 0 ]; then
            bad "--append /$g: the serial run failed: exit $rc: $(head -c 300 "$T/stderr")"
            ok_runs=0
            continue
        fi
        mpi "$p" "$in" -o "$d/m/results.h5" --append --group "/$g" "${args[@]}"
        why=$(mpi_problem 0)
        if [ -n "$why" ]; then
            bad "--append /$g, P=$p: $why"
            ok_runs=0
        fi
    done
    [ $ok_runs -eq 1 ] || return
    local ls_s ls_m
    ls_s=$(cd "$d/s" && find . | LC_ALL=C sort | tr '\n' ' ')
    ls_m=$(cd "$d/m" && find . | LC_ALL=C sort | tr '\n' ' ')
    if [ "$ls_s" = "$ls_m" ]; then
        ok "--append /a (P=3) and /b (P=2): the same files as the serial index ($ls_m)"
    else
        bad "--append: files $ls_m, the serial run's $ls_s"
    fi
    ls_s=$(cd "$d/s" && h5ls -r results.h5 2>&1)
    ls_m=$(cd "$d/m" && h5ls -r results.h5 2>&1)
    if [ "$ls_s" = "$ls_m" ] && printf '%s' "$ls_m" | grep -q 'External Link'; then
        ok "--append: the index's links (h5ls -r) are the serial index's"
    else
        bad "--append: h5ls -r of the index: $(printf '%s' "$ls_m" | tr '\n' ' ' | head -c 200) vs the serial $(printf '%s' "$ls_s" | tr '\n' ' ' | head -c 200)"
    fi
    same "--append: the index file itself (links compared, not followed)" "$d/s/results.h5" "$d/m/results.h5"
    local part
    for part in "$d"/s/results.h5.parts/*.h5; do
        part=${part##*/}
        same "--append: part $part" "$d/s/results.h5.parts/$part" "$d/m/results.h5.parts/$part"
    done
    rm -rf "$d"
}

check_dry_run() {
    local d
    d=$(workdir dry)
    serial "$FIX/gpt2.h5" --heads 12 --dry-run --json
    cp "$T/stdout" "$d/serial.json"
    mpi 2 "$FIX/gpt2.h5" --heads 12 --dry-run --json
    local why
    why=$(mpi_problem 0)
    if [ -n "$why" ]; then
        bad "mpirun -n 2 --dry-run --json: $why"
        return
    fi
    mpi_check "mpirun -n 2 --dry-run --json: one JSON document, the serial one's but for the plan" \
        dry-run-json "$T/stdout" "$d/serial.json"
    if [ -s "$T/stderr" ]; then
        bad "mpirun -n 2 --dry-run --json: stderr not empty: $(head -n 2 "$T/stderr" | tr '\n' ' ')"
    else
        ok "mpirun -n 2 --dry-run --json: nothing on stderr"
    fi
    rm -rf "$d"
}

# --progress under mpirun: the run's last report, made once the ranks
# agree the steps are done, reaches 100% (pipeline.c: the report after
# attn_ranks_agree_sum); every row of the toy counted once
check_progress() {
    local d
    d=$(workdir progress)
    mpi 2 "$FIX/toy.h5" --heads 1 -o "$d/out.h5" --progress
    local why last
    why=$(mpi_problem 0)
    last=$(tr '\r' '\n' <"$T/stderr" | grep -v '^$' | tail -n 1)
    if [ -z "$why" ] && [ "${last%%,*}" = "attnrun: 100% (4/4 rows of item 1/1)" ]; then
        ok "mpirun -n 2 --progress: the last report is 100% of the 4 rows"
    else
        bad "mpirun -n 2 --progress: ${why:-the last report is '$last'}"
    fi
    rm -rf "$d"
}

# ------------------------------------------------- 2. all or nothing

# failed NAME STATUS TEXT DIR [LISTING]: the last mpirun ended with STATUS
# and one "attnrun: " line holding TEXT (a grep -E pattern), and DIR holds
# LISTING (default: nothing).
failed() {
    local name=$1 status=$2 text=$3 dir=$4 want=${5:-} why
    why=$(mpi_problem "$status")
    if [ -n "$why" ]; then
        bad "$name: $why"
    elif ! grep '^attnrun: ' "$T/stderr" | grep -q -i -E -- "$text"; then
        bad "$name: the message lacks '$text': $(err1)"
    elif [ "$(listing "$dir")" != "$want" ]; then
        bad "$name: left in the directory: $(listing "$dir")"
    else
        ok "$name"
    fi
}

check_nan() {
    local d p
    d=$(workdir nan)
    for p in 2 3; do
        mpi "$p" "$T/nan.h5" -o "$d/out.h5" --heads 4 --batch-slice 1
        failed "NaN in the last item only, --batch-slice 1, P=$p: exit 3, one line, no OUT, no temporary" \
            3 "non-finite.*nan|nan.*non-finite" "$d"
    done
}

# A finite input whose projections overflow float32 in rows the last rank
# owns (the long item: each rank projects its own rows' keys): the serial
# run's exit 3 and message, from every P.
check_overflow() {
    local d p
    d=$(workdir overflow)
    serial "$T/overflow.h5" -o "$d/out.h5" --heads 4 --causal
    failed "projections overflowing at row 1000 of the long item, serial: exit 3, one line, no OUT" \
        3 "projections.*overflow float32" "$d"
    for p in 2 3 4; do
        mpi "$p" "$T/overflow.h5" -o "$d/out.h5" --heads 4 --causal
        failed "projections overflowing at row 1000 of the long item (the last rank's rows), P=$p: exit 3, one line, no OUT, no temporary" \
            3 "projections.*overflow float32" "$d"
    done
}

check_sigterm() {
    local d pid mp i seen=0 left
    d=$(workdir sigterm)
    timeout -s KILL "$TL" "${MPIRUN[@]}" -n 2 "$ATTNRUN_MPI" "$BIG" -o "$d/out.h5" "${BIG_ARGS[@]}" \
        --compress 1 </dev/null >/dev/null 2>"$T/stderr" &
    pid=$!
    for ((i = 0; i < TL * 20; i++)); do     # until the temporary exists
        if [ -n "$(find "$d" -maxdepth 1 -name '.out.h5.attnrun-tmp-*')" ]; then seen=1; break; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    sleep 0.5
    mp=$(pgrep -P "$pid" -x mpirun)
    if [ $seen -eq 0 ] || [ -z "$mp" ] || ! kill -s TERM "$mp" 2>/dev/null; then
        wait "$pid"
        rc=$?
        bad "SIGTERM to mpirun mid-run: no temporary seen, or mpirun ended (exit $rc) before the signal: $(err1)"
        reap
        return
    fi
    wait "$pid"
    rc=$?
    [ $rc -eq 137 ] && reap
    failed "SIGTERM to mpirun -n 2 mid-run: exit 1, one line naming SIGTERM, no OUT, no temporary" \
        1 "SIGTERM" "$d"
    for ((i = 0; i < 100; i++)); do
        left=$(pgrep -f -- "$ATTNRUN_MPI .*$d/out.h5")
        [ -z "$left" ] && break
        sleep 0.1
    done
    if [ -z "$left" ]; then
        ok "SIGTERM to mpirun: no attnrun-mpi rank left running"
    else
        bad "SIGTERM to mpirun: ranks still running after 10 s: $left"
        reap
    fi
    rm -rf "$d"
}

check_full() {
    local d
    d=$T/full
    mkdir -p "$d"
    if [ "$(id -u)" -ne 0 ]; then
        skip "a full file system: not root (a tmpfs is mounted)"
        return
    fi
    if ! mount -t tmpfs -o size=20m tmpfs "$d" 2>/dev/null; then
        skip "a full file system: cannot mount a tmpfs on $d"
        return
    fi
    MNT=$d
    mpi 2 "$BIG" -o "$d/out.h5" "${BIG_ARGS[@]}" --force
    failed "a full file system (20 MiB tmpfs, ~800 MB of outputs, --force), P=2: exit 1, one line saying so, the tmpfs empty" \
        1 "no space left on device" "$d"
    mpi 3 "$BIG" -o "$d/out.h5" "${BIG_ARGS[@]}"
    failed "the free-space precheck (20 MiB tmpfs, ~800 MB of outputs), P=3: exit 1, one line, nothing written" \
        1 "free" "$d"
    # Ranks sharing one item's rows: the room is reserved before any rank
    # writes, so the full disk is found there.
    local p
    for p in 2 3; do
        mpi "$p" "$LONG" -o "$d/out.h5" --heads 4 --causal --save weights,scores --force
        failed "a full file system, one item's rows shared (n=1100), P=$p: exit 1, one line saying so, the tmpfs empty" \
            1 "no space left on device" "$d"
        [ -z "$(pgrep -f -- "$ATTNRUN_MPI .*$d/")" ] && ok "  ... and no rank left (P=$p)" \
            || bad "  ... ranks left running after the full-disk abort (P=$p)"
    done
    umount "$d" 2>/dev/null || umount -l "$d"
    MNT=""
}

check_usage() {
    local d
    d=$(workdir usage)
    mpi 2 "$B5" -o "$d/out.h5" --heads 0
    failed "usage error --heads 0 under mpirun -n 2: exit 2, one line, nothing written" 2 "heads" "$d"
    mpi 2 "$B5" -o "$d/out.h5" --heads 4 --no-such-option
    failed "unknown option under mpirun -n 2: exit 2, one line, nothing written" 2 "no-such-option" "$d"
}

check_existing() {
    local d before
    d=$(workdir existing)
    serial "$FIX/causal.h5" -o "$d/out.h5" --heads 2 --causal
    if [ $rc -ne 0 ]; then
        bad "an existing OUT: the serial run failed: $(head -c 300 "$T/stderr")"
        return
    fi
    before=$(sha256sum <"$d/out.h5")
    mpi 2 "$B5" -o "$d/out.h5" --heads 4 --batch-slice 1
    failed "an existing OUT without --force, P=2: exit 2, one line, nothing else written" 2 "exists" "$d" "out.h5 "
    if [ "$(sha256sum <"$d/out.h5")" = "$before" ]; then
        ok "an existing OUT without --force: byte for byte as it was"
    else
        bad "an existing OUT without --force: its bytes changed"
    fi
    mpi 3 "$T/nan.h5" -o "$d/out.h5" --heads 4 --batch-slice 1 --force
    failed "an existing OUT, --force, NaN in the last item, P=3: exit 3, one line, nothing else written" \
        3 "non-finite" "$d" "out.h5 "
    if [ "$(sha256sum <"$d/out.h5")" = "$before" ]; then
        ok "an existing OUT after a rejected --force run: byte for byte as it was"
    else
        bad "an existing OUT after a rejected --force run: its bytes changed"
    fi
    rm -rf "$d"
}

# A write failing on one rank only (tests/lib/enospc_on_rank1.sh: strace
# makes rank 1's pwritev calls fail with ENOSPC from its third on): the
# ranks agree on the failure, but HDF5 may now see the file differently on
# each, so they do not close it together -- the temporary goes and the job
# is aborted with the status.
check_one_rank_write_fails() {
    local d
    d=$(workdir inject)
    if ! command -v strace >/dev/null 2>&1; then
        skip "a write failing on one rank: strace not found"
        return
    fi
    timeout -s KILL "$TL" "${MPIRUN[@]}" -n 2 sh "$TESTS/lib/enospc_on_rank1.sh" "$ATTNRUN_MPI" \
        "$LONG" -o "$d/out.h5" --heads 4 --causal --save weights,scores </dev/null >"$T/stdout" 2>"$T/stderr"
    rc=$?
    [ $rc -eq 137 ] && reap
    failed "a write failing on rank 1 only (ENOSPC injected), P=2: exit 1, one line, no OUT, no temporary" \
        1 "cannot write" "$d"
    [ -z "$(pgrep -f -- "$ATTNRUN_MPI .*$d/")" ] && ok "  ... and no rank left" \
        || bad "  ... ranks left running after the one-rank write failure"
}

# ---------------------------------------------------------------- main

check_comparison
check_plan
check_identity
check_in_place
check_append
check_dry_run
check_progress
check_nan
check_overflow
check_sigterm
check_full
check_one_rank_write_fails
check_usage
check_existing
finish
