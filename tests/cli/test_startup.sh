#!/usr/bin/env bash
# tests/cli/test_startup.sh - attnrun under an address-space limit
# (`ulimit -v`) from its very start: OpenBLAS's constructor takes 128 MiB
# for each of its threads before main and retries a failed mmap forever,
# so attnrun checks first (cmd/cli/process.c, before_libraries).
#
#   ATTNRUN=build/attnrun bash tests/cli/test_startup.sh     # from the repository root
#
# Every limit from 100 MB to 1 GB in 20 MB steps, under no thread variable,
# OPENBLAS_NUM_THREADS=1, GOTO_NUM_THREADS=1 and OMP_NUM_THREADS=1, for
# `attnrun --version`, `attnrun rollout --help` and a run of fixtures/toy.h5
# (--heads 1); and for --version also under settings that once hung:
# OMP_NUM_THREADS=1 with OPENBLAS_NUM_THREADS=2, three OpenMP places,
# one CPU of several (taskset), Debian's pthreads OpenBLAS (by
# LD_LIBRARY_PATH, where installed).  Each run must end within TIME_LIMIT
# seconds (default 20) with exit 0, or exit 1 and exactly one stderr line
# 'attnrun: ...' (and a refused run leaves nothing beside its -o).  When
# the line gives advice -- variables to set ("set NAME=1 ..."), a limit
# ("to ulimit -v N"), or both ("(or to N with NAME=1)") -- the command is
# run again following it, and must then succeed: --version and --help exit
# 0; the run gets past the start (exit 0, or the run's own one-line
# refusal: the start-up check cannot know what a run will need).  Below
# about 75 MB the dynamic loader itself cannot map the libraries (exit
# 127, before any code of attnrun's): not swept.
#
# Environment: ATTNRUN (default build/attnrun), TIME_LIMIT, STARTUP_FROM,
# STARTUP_TO, STARTUP_STEP (the sweep, in KiB as `ulimit -v` takes them).
# Prints "ok NAME", "FAIL NAME: WHY" or "skip NAME: WHY" for each command
# and setting, then "startup: N passed, M failed".  A (command, setting)
# stops at its first hang, so the suite ends in minutes even when every
# run would hang.
set -u

SUITE="startup"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

TL=${TIME_LIMIT:-20}
FROM=${STARTUP_FROM:-100000}
TO=${STARTUP_TO:-1000000}
STEP=${STARTUP_STEP:-20000}
FIX=$(cd "$TESTS/../fixtures" && pwd)

case $ATTNRUN in
    /*) ;;
    */*) ATTNRUN=$PWD/$ATTNRUN ;;
esac
if [ ! -x "$ATTNRUN" ]; then
    bad "setup: attnrun not found at $ATTNRUN"
    finish
fi
if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then
    skip "ulimit -v: the sanitizer build reserves terabytes of shadow memory"
    finish
fi
if [ "$(ulimit -Hv)" != unlimited ]; then
    skip "ulimit -v: the hard limit ($(ulimit -Hv) KiB) would not let advice to raise it be followed"
    finish
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/attnrun-startup.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ulimit -c 0 2>/dev/null

# attempt LIMIT KIND WORD...: attnrun's command KIND (version, help or
# run) under `ulimit -v LIMIT`, with the setting WORD... (NAME=VALUE
# entries of the environment; "taskset" runs it on CPU 0), killed after
# $TL s (SIGKILL 5 s later); its status in rc, what it printed in
# $T/stdout and $T/stderr, a run's output directory $T/out.
attempt() {
    local limit=$1 kind=$2 word vars=() wrap=() args=()
    shift 2
    for word in "$@"; do
        case $word in
            taskset) wrap=(taskset -c 0) ;;
            *=*) vars+=("$word") ;;
        esac
    done
    case $kind in
        version) args=(--version) ;;
        help) args=(rollout --help) ;;
        run) rm -rf "$T/out"
             mkdir "$T/out"
             args=("$FIX/toy.h5" --heads 1 -o "$T/out/out.h5") ;;
    esac
    (ulimit -v "$limit" && for word in "${vars[@]}"; do export "${word?}"; done &&
        exec timeout -k 5 "$TL" "${wrap[@]}" "$ATTNRUN" "${args[@]}") \
        </dev/null >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

# judge KIND: why the last attempt did not end as promised into JUDGED;
# empty when it did.  (In the shell itself: a sweep judges hundreds of
# attempts, and a subshell costs a fork.)
judge() {
    JUDGED=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        JUDGED="no answer within $TL s (a hang)"
    elif [ "$rc" -eq 0 ]; then
        if [ "$1" = run ] && [ ! -s "$T/out/out.h5" ]; then
            JUDGED="exit 0 without the output"
        elif [ "$1" != run ] && [ ! -s "$T/stdout" ]; then
            JUDGED="exit 0 without output"
        fi
    else
        JUDGED=$(run_problem "$rc" 1 "$T/stderr")
        if [ -z "$JUDGED" ] && [ "$1" = run ]; then
            entries "$T/out"
            [ "${#ENTRIES[@]}" -eq 0 ] || JUDGED="exit 1 leaving ${ENTRIES[*]##*/}"
        fi
    fi
}

# advice LINE: each piece of advice of a refusal, a line "LIMIT NAME=V ..."
# (LIMIT - for the same limit; no variables for a limit alone).
advice() {
    local line=$1
    if [[ $line =~ set\ ([A-Z_]+=[0-9]+( [A-Z_]+=[0-9]+)*) ]]; then
        echo "- ${BASH_REMATCH[1]}"
    fi
    if [[ $line =~ to\ ulimit\ -v\ ([0-9]+) ]]; then
        echo "${BASH_REMATCH[1]}"
    fi
    if [[ $line =~ \(or\ to\ ([0-9]+)\ with\ ([A-Z_]+=[0-9]+( [A-Z_]+=[0-9]+)*)\) ]]; then
        echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
    fi
}

# follow LIMIT KIND MESSAGE WORD...: runs KIND again following each piece
# of MESSAGE's advice (under LIMIT and the setting WORD... otherwise);
# unfollowed is why one did not work, empty when all did; followed counts
# them.
follow() {
    local limit=$1 kind=$2 message=$3 piece to why
    shift 3
    unfollowed=""
    while read -r to piece; do
        [ -n "$to" ] || continue
        [ "$to" = - ] && to=$limit
        # the same advice, given at another limit, was followed already
        case " $seen " in *" $to:${piece// /+} "*) continue ;; esac
        seen="$seen $to:${piece// /+}"
        # shellcheck disable=SC2086  # piece: NAME=V words
        attempt "$to" "$kind" "$@" $piece
        followed=$((followed + 1))
        judge "$kind"
        why=$JUDGED
        if [ -z "$why" ] && [ "$rc" -ne 0 ] && [ "$kind" != run ]; then
            why="exit $rc: $(head -c 300 "$T/stderr")"
        elif [ -z "$why" ] && [ "$rc" -ne 0 ] && grep -q 'OpenBLAS takes' "$T/stderr"; then
            why="refused at the start again: $(head -c 300 "$T/stderr")"
        fi
        if [ -n "$why" ]; then
            unfollowed="following '$message' (ulimit -v $to${piece:+ $piece}): $why"
            return
        fi
    done < <(advice "$message")
}

# sweep KIND SETTING: KIND under every limit of the sweep with SETTING (a
# string of words, see attempt), one verdict.
sweep() {
    local kind=$1 setting=$2 words limit why message first="" ran=0 refused=0 problems=()
    local name="$kind${setting:+ with $setting}, ulimit -v $FROM to $TO in steps of $STEP"
    read -ra words <<<"$setting"
    followed=0
    for ((limit = FROM; limit <= TO; limit += STEP)); do
        attempt "$limit" "$kind" "${words[@]}"
        judge "$kind"
        why=$JUDGED
        if [ -z "$why" ] && [ "$rc" -eq 0 ]; then
            ran=$((ran + 1))
            [ -n "$first" ] || first=$limit
        elif [ -z "$why" ]; then
            refused=$((refused + 1))
            message=
            IFS= read -r message <"$T/stderr"
            follow "$limit" "$kind" "$message" "${words[@]}"
            why=$unfollowed
        fi
        if [ -n "$why" ]; then
            problems+=("ulimit -v $limit: $why")
            case $why in *"(a hang)"*) break ;; esac
            [ "${#problems[@]}" -ge 3 ] && break
        fi
    done
    if [ "${#problems[@]}" -eq 0 ]; then
        ok "$name: $ran ran (from ${first:-none}), $refused refused with one line, $followed pieces of advice followed"
    else
        bad "$name: $(printf '%s; ' "${problems[@]}" | head -c 1500)"
    fi
}

# The sweeps, JOBS at a time (STARTUP_JOBS, default 2): each in a
# directory of its own, its verdict in its log, reported in order.
JOBS=${STARTUP_JOBS:-2}
TOP=$T
count=0
job() {
    count=$((count + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    (T=$TOP/$count && mkdir "$T" && seen="" && "$@") >"$TOP/$count.log" 2>&1 &
}

SETTINGS=("" "OPENBLAS_NUM_THREADS=1" "GOTO_NUM_THREADS=1" "OMP_NUM_THREADS=1")
if [ -n "$QUICK" ]; then
    # the quick tier (tests/README.md): --version under no variable, in
    # steps of 150 MB
    STEP=${STARTUP_STEP:-150000}
    job sweep version ""
    wait
    report_verdicts "$TOP/1.log" 0
    quick_done
fi
for kind in version run; do
    for setting in "${SETTINGS[@]}"; do
        job sweep "$kind" "$setting"
    done
done

# A subcommand's --help, and settings that once hung at start-up, where
# the start-up matters (up to 600 MB: above, every start fits).
[ "$TO" -gt 600000 ] && TO=600000
for setting in "${SETTINGS[@]}"; do
    job sweep help "$setting"
done
job sweep version "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2"
job sweep version "OMP_PLACES={0},{0},{0}"
if ! command -v taskset >/dev/null || [ "$(nproc --all 2>/dev/null || echo 1)" -lt 2 ]; then
    job skip "version with taskset: needs taskset and two CPUs"
else
    job sweep version "taskset"
fi
PTHREAD=/usr/lib/$(${CC:-cc} -print-multiarch 2>/dev/null)/openblas-pthread
if [ ! -e "$PTHREAD/libopenblas.so.0" ]; then
    job skip "version with Debian's pthreads OpenBLAS: $PTHREAD/libopenblas.so.0 is not installed"
else
    job sweep version "LD_LIBRARY_PATH=$PTHREAD"
    job sweep version "LD_LIBRARY_PATH=$PTHREAD OPENBLAS_NUM_THREADS=1"
fi
wait

for ((i = 1; i <= count; i++)); do
    report_verdicts "$TOP/$i.log" 0
done
finish
