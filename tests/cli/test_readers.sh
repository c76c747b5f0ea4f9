#!/usr/bin/env bash
# tests/cli/test_readers.sh - the commands that read results files (attnrun
# rollout, attnrun heads, attnrun plot) are as safe as the run: every run of
# each reader, on hostile results files and --append indexes, is judged as
# the run's hostile suites judge theirs -- the documented exit status, never
# killed by the hang guard or a signal, exactly one stderr line starting
# `attnrun: ` when it fails (no glibc, HDF5 or sanitizer text), nothing on
# standard output, no output file and no `*attnrun-tmp*` temporary left,
# and the index and every part byte for byte as they were (sha256 before
# and after).  The cases:
#   1. a part of an index that is a FIFO: exit 3 at once, "FIFO"; a plain
#      results file whose group or weights is an HDF5 external link to a
#      FIFO or to another file: exit 3, "external link", never a hang;
#   2. -o (with --force) naming a part, a new file in the parts directory
#      or the index itself: exit 2, "names a file of the results", nothing
#      changed or added; --force over a file that is not that reader's own
#      output (text, a copy of a results file, the other reader's output):
#      exit 2, "not a rollout file" / "not a census file" / "not a picture";
#   3. a missing part while the working directory holds a file of that
#      relative name: exit 3 naming the missing part, the stranger not read;
#   4. /layer1 replaced (--append --force, other values) while rollout reads
#      the index -- 20 rounds of racing delays and one run stopped mid-read
#      (SIGSTOP) while the replacement commits: each ends with exit 0 and
#      exactly the old or the new index's rollout (computed beforehand), or
#      exit 1 "changed while it was read" and no output; never a mixture;
#      and, made deterministic by tests/lib/vanish_on_open.c, the index
#      replaced between two opens of a part (exit 1, "changed"), and
#      replaced with the parts read still named, by another group appended
#      or by /layer1 replaced while only the other layers are read (exit 0,
#      the rollout of the index as it was);
#   5. the fuzzer's memory-hungry inputs (tests/corpus/fuzz/hdf5-huge-*:
#      a local heap whose free list loops) as the results file and as a
#      part of an index, under ulimit -v 4000000 (not in the ASan build,
#      ATTN_TEST_SANITIZED, whose shadow memory needs more): exit 3 naming
#      the heap, one line, within 20 s of processor time;
#   6. heads -o CENSUS into a full standard output: exit 1, "standard
#      output", no census file;
#   7. ulimit -n letting the index open but not its part: exit 1, never 3;
#      a part locked by another process: exit 1, "locked"; an index with a
#      foreign external link, an attnrun_index that is a string or 2, a part
#      whose query_token holds B + 1 items: exit 3;
#   8. tests/corpus/readers/: plot-stalls.h5 (weights claiming 78 TB of
#      values in a 27 kB file) and part-heap-overflow.h5 (a part whose token
#      strings point past their heap) in place of a real index's
#      /layer1 part; weights (2^40, 1, 2, 2) and (1, 1, 2^20, 2^20) of which
#      no chunk was written: exit 3 within seconds, one line, no glibc text;
#   9. the run's own hostile inputs through the readers: NaN, +-inf and
#      unnormalised weights, tokens with NUL bytes, invalid UTF-8 and 1 MiB
#      long (no crash; exit 0, or 1 or 3 with one line); an index of 1000
#      layers (rollout and heads exit 0 within 60 s together); SIGTERM mid-
#      rollout (exit 1, "interrupted", nothing left); ulimit -f 1 and a
#      read-only output directory (exit 1).
# The hostile files and the drivers are tests/ref/readers_cases.py; the
# inputs of the layers come from rollout_ref.py and attention_inputs.py.
# About 230 runs, 2 to 3 minutes on two cores (most of it the fuzzer's
# memory-hungry inputs, run $JOBS at a time).
#
#   ATTNRUN=build/attnrun bash tests/cli/test_readers.sh     # from the repository root
#
# Environment: ATTNRUN (default build/attnrun), PYTHON (a python with numpy
# and h5py; default /usr/bin/python3), TIME_LIMIT (hang guard of one run in
# seconds, default 30), JOBS (runs of the fuzzer's inputs at a time, default
# the number of cores, at most 4), ATTN_TEST_SANITIZED (set by make for the
# sanitizer build: the ulimit -v runs are skipped), LSAN_OPTIONS (default:
# tests/lib/lsan.supp's suppressions, as make test SANITIZE=... sets).
# Each check prints "ok NAME", "FAIL NAME: WHY" or "skip NAME: WHY"; the last
# line is "readers: N passed, M failed"; the exit status is 1 when M > 0.
set -u

TL=${TIME_LIMIT:-30}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$JOBS" -gt 4 ] && JOBS=4
[ "$JOBS" -lt 1 ] && JOBS=1

SUITE="readers"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, readers_cases.py
TOP=$(dirname "$TESTS")
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

suite_setup readers numpy h5py
START=$(date +%s)
BACKGROUND=()           # processes this suite started and may leave running
RO_MOUNTED=0
cleanup() {
    local p
    for p in "${BACKGROUND[@]}"; do kill "$p" 2>/dev/null; done
    [ "$RO_MOUNTED" = 1 ] && umount "$T/ro" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
export ATTNRUN TIME_LIMIT=$TL PYTHONPATH=$TESTS/ref
# the sanitizer build: fontconfig's and HDF5's own leaks (as make test does)
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$TESTS/lib/lsan.supp:print_suppressions=0}

cases() { ref readers_cases.py "$@"; }
# (the helpers below start no process where a builtin will do: entries
# and file_text are checks.sh's)
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

# ---------------------------------------------------------------- helpers

# snap DIR: every name under DIR with its kind, size, inode and change
# time (ctime: every write, truncation, rename or chmod moves it, and no
# program can set it back), so an unchanged listing is unchanged files;
# FIFOs are listed, never opened.
snap() {
    find "$1" -printf '%y %P %s %i %C@\n'
}

# verdict STATUSES WORDS OUT RC STDERR STDOUT: why a run that ended with RC
# (its messages in STDERR, its standard output in STDOUT, "" when it went
# elsewhere) did not end as expected -- RC one of STATUSES ("3", "0|3"); a
# failure: one line starting "attnrun: " holding each line of WORDS, no
# "internal error" (the fatal-signal handler), nothing on STDOUT, OUT (when
# not "") absent; a success: every line starts "attnrun: ", OUT (when not
# "") exists; never glibc, HDF5 or sanitizer text.  Prints nothing when so.
verdict() {
    local statuses=$1 words=$2 out=$3 rc=$4 err=$5 stdout=$6 w line lines others="" ours=0 breaks
    file_text "$err"
    local all=$TEXT
    if [ "$rc" -eq 137 ]; then
        echo "no answer within $TL s (killed): ${all:0:300}"
        return
    elif [ "$rc" -ge 124 ]; then
        echo "exit $rc (a signal, or timeout's own failure): ${all:0:300}"
        return
    fi
    case "|$statuses|" in
        *"|$rc|"*) ;;
        *) echo "exit $rc, expected $statuses: ${all:0:300}"; return ;;
    esac
    mapfile -t lines <"$err"
    for line in "${lines[@]}"; do
        if [[ $line == "attnrun: "* ]]; then
            ours=1
        else
            others+=$line$'\n'
            if [[ $line =~ malloc|corrupted|double\ free|HDF5-DIAG|Sanitizer|runtime\ error ]]; then
                w=${all:0:400}
                echo "stderr: ${w//$'\n'/ }"
                return
            fi
        fi
    done
    if [[ $all == *"internal error"* ]]; then
        w=${all:0:400}
        echo "stderr: ${w//$'\n'/ }"
        return
    fi
    if [ "$rc" -eq 0 ]; then
        if [ -n "$others" ]; then
            echo "a line of stderr not from attnrun: ${others:0:300}"
        elif [ -n "$out" ] && [ ! -e "$out" ]; then
            echo "exit 0 but no ${out##*/}"
        fi
        return
    fi
    breaks=${all//[!$'\n']/}
    if [ "${#breaks}" -ne 1 ] || [ "$ours" -eq 0 ]; then
        w=${all:0:400}
        echo "stderr is not one 'attnrun: ' line: ${w//$'\n'/|}"
        return
    fi
    while IFS= read -r w; do
        [ -z "$w" ] || [[ $all == *"$w"* ]] || { echo "the message lacks '$w': ${all%$'\n'}"; return; }
    done <<<"$words"
    if [ -n "$stdout" ] && [ -s "$stdout" ]; then
        file_text "$stdout"
        echo "printed on standard output: ${TEXT:0:200}"
    elif [ -n "$out" ] && [ -e "$out" ]; then
        echo "left $out"
    fi
}

# The verdict's self-check: each fault it must see, seen.
verdict_self_check() {
    local d=$T/verdict why fault missed=""
    mkdir -p "$d"
    : >"$d/empty"
    printf 'attnrun: x: a FIFO\n' >"$d/one"
    printf 'attnrun: x: a FIFO\nHDF5-DIAG: Error detected\n' >"$d/two"
    printf 'attnrun: x: a FIFO\n' >"$d/left"
    printf 'malloc(): corrupted top size\n' >"$d/glibc"
    why=$(verdict 3 "FIFO" "" 3 "$d/one" "$d/empty")
    [ -n "$why" ] && missed="$missed a clean failure judged: $why;"
    for fault in "3 FIFO 137 two" "3 FIFO 134 glibc" "3 FIFO 2 one" "3 FIFO 3 two" "3 socket 3 one" \
        "0 - 0 glibc" "3 FIFO 3 glibc"; do
        set -- $fault
        why=$(verdict "$1" "${2#-}" "" "$3" "$d/$4" "$d/empty")
        [ -z "$why" ] && missed="$missed statuses $1, words $2, exit $3, stderr $4;"
    done
    why=$(verdict 3 "" "" 3 "$d/one" "$d/left")
    [ -z "$why" ] && missed="$missed something on standard output;"
    why=$(verdict 3 "" "$d/left" 3 "$d/one" "")
    [ -z "$why" ] && missed="$missed an output left;"
    why=$(verdict 0 "" "$d/none" 0 "$d/empty" "")
    [ -z "$why" ] && missed="$missed exit 0 without its output;"
    rm -rf "$d"
    if [ -n "$missed" ]; then
        bad "the verdict's self-check: it lets pass:$missed"
        finish
    fi
    ok "the verdict's self-check: it sees each of 10 faults"
}

# judge NAME STATUSES WORDS OUT ARGS...: attnrun ARGS (standard input
# closed; run from $CWD and under `ulimit $ULIM` when they are set; standard
# output into $STDOUT when set; killed after $TL s) must end as verdict
# says; besides, no *attnrun-tmp* anywhere under $T, $O (the outputs'
# directory, emptied first) empty after a failure, the directory $IN (when
# set: the index and its parts) as it was, and within $MAXT seconds when
# set.  ok NAME or FAIL NAME; rc, ms and $T/stderr tell how it ended.
judge() {
    local name=$1 statuses=$2 words=$3 out=$4 why before="" stdout=$T/stdout t0 tmp
    shift 4
    entries "$O"
    [ "${#ENTRIES[@]}" -eq 0 ] || rm -rf "${ENTRIES[@]}"
    [ -n "${IN:-}" ] && before=$(snap "$IN")
    [ -n "${STDOUT:-}" ] && stdout=""
    t0=${EPOCHREALTIME/./}
    (
        [ -z "${ULIM:-}" ] || ulimit $ULIM || exit 125
        [ -z "${CWD:-}" ] || cd "$CWD" || exit 125
        exec timeout -s KILL "$TL" "$ATTNRUN" "$@"
    ) </dev/null >"${STDOUT:-$T/stdout}" 2>"$T/stderr"
    rc=$?
    ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
    why=$(verdict "$statuses" "$words" "$out" "$rc" "$T/stderr" "$stdout")
    if [ -z "$why" ] && [ "$rc" -ne 0 ]; then
        entries "$O"
        [ "${#ENTRIES[@]}" -eq 0 ] || why="left ${ENTRIES[*]##*/}"
    fi
    if [ -z "$why" ]; then
        tmp=$(find "$T" -name '*attnrun-tmp*' -print -quit 2>/dev/null)
        [ -n "$tmp" ] && why="left a temporary: $tmp"
    fi
    if [ -z "$why" ] && [ -n "$before" ] && [ "$(snap "$IN")" != "$before" ]; then
        why="the results changed: $(diff <(echo "$before") <(snap "$IN") | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
    fi
    if [ -z "$why" ] && [ -n "${MAXT:-}" ] && [ "$ms" -gt $((MAXT * 1000)) ]; then
        why="took $ms ms, over $MAXT s"
    fi
    if [ -z "$why" ]; then
        ok "$name: exit $rc${MAXT:+ in $ms ms}"
    else
        bad "$name: $why"
    fi
    [ -z "$why" ]
}

# readers NAME STATUSES WORDS RESULTS [GROUP]: judge on each reader of
# RESULTS: rollout -o $O/rollout.h5, heads -o $O/census.h5, plot --group
# GROUP (default /layer0) -o $O/plot.png, view -o $O/view.html.
readers() {
    judge "$1: rollout" "$2" "$3" "$O/rollout.h5" rollout "$4" -o "$O/rollout.h5"
    judge "$1: heads" "$2" "$3" "$O/census.h5" heads "$4" -o "$O/census.h5"
    judge "$1: plot" "$2" "$3" "$O/plot.png" plot "$4" --group "${5:-/layer0}" -o "$O/plot.png"
    judge "$1: view" "$2" "$3" "$O/view.html" view "$4" -o "$O/view.html"
}

# fresh NAME SRC: $T/case/NAME, holding a copy of the index SRC/results.h5
# and its parts; prints its path.
fresh() {
    local d=$T/case/$1
    rm -rf "$d"
    mkdir -p "$d"
    cp -a "$2/results.h5" "$2/results.h5.parts" "$d/"
    echo "$d"
}

# made NAME ARGS...: a run that makes an input of the suite succeeds, else
# the suite ends.
made() {
    local name=$1 why
    shift
    timeout -s KILL "$TL" "$ATTNRUN" "$@" -q </dev/null >/dev/null 2>"$T/made.err"
    why=$(run_problem "$?" 0 "$T/made.err")
    if [ -n "$why" ]; then
        bad "setup: $name: $why"
        finish
    fi
}

# ------------------------------------------------------------- the inputs

verdict_self_check
O=$T/out
SRC=$T/src
mkdir -p "$O" "$SRC/toy" "$SRC/bat" "$T/case"
if ! ref rollout_ref.py inputs "$SRC" >"$T/inputs.log" 2>&1 ||
    ! cases hostile "$SRC" >>"$T/inputs.log" 2>&1; then
    bad "setup: cannot write the inputs: $(tail -n 2 "$T/inputs.log" | tr '\n' ' ')"
    finish
fi
M=$SRC/model.h5         # B = 2, n = 6, d_model 16: /lI/X, /lI/W_*, /tok
# TOY: three layers of the toy fixture (n = 4, no batch axis, no tokens)
for L in 0 1 2; do
    made "toy layer $L" "$TOP/fixtures/toy.h5" --heads 1 -o "$SRC/toy/results.h5" --group "/layer$L" --append
done
TOY=$SRC/toy
# BAT: three layers of B = 2 items of 6 tokens, 2 heads, tokens, weights,
# mean and entropy (the shapes of tests/corpus/readers/part-heap-overflow.h5)
for L in 0 1 2; do
    made "batched layer $L" "$M" --x "/l$L/X" --weights-group "/l$L" --heads 2 --tokens /tok \
        --save weights,mean,entropy -o "$SRC/bat/results.h5" --group "/layer$L" --append
done
BAT=$SRC/bat
# PLAIN: a plain results file (no index), its results at /layer0, weights only
made "plain results" "$M" --x /l0/X --weights-group /l0 --heads 2 --tokens /tok --save weights \
    -o "$SRC/plain.h5" --group /layer0
PLAIN=$SRC/plain.h5

# The inputs read as they are: the checks below fail for their own reasons.
IN=$TOY readers "the toy index of three layers" 0 "" "$TOY/results.h5"
IN=$BAT readers "the batched index of three layers" 0 "" "$BAT/results.h5" /layer1
readers "the plain results file" 0 "" "$PLAIN"

# ------------------------------------- 1. FIFOs and external links, never a hang

MAXT=5
for L in 0 1; do
    d=$(fresh fifo$L "$BAT")
    rm "$d/results.h5.parts/layer$L.1.h5"
    mkfifo "$d/results.h5.parts/layer$L.1.h5"
    IN=$d readers "the part of /layer$L a FIFO" 3 "FIFO" "$d/results.h5" "/layer$L"
done
d=$T/case/links
mkdir -p "$d"
mkfifo "$d/fifo.h5"
cp "$PLAIN" "$d/other.h5"
for what in group /weights; do
    for target in fifo other; do
        f=$d/${what#/}_to_$target.h5
        cases link "$PLAIN" "$f" "$target.h5" "${what#/}"
        IN=$d readers "a plain file whose /layer0${what/group/} is an external link to a ${target/other/file}" \
            3 "external link" "$f"
    done
done
# the same named with --groups: the link is met where the layer is read
for target in fifo other; do
    f=$d/group_to_$target.h5
    IN=$d judge "a plain file whose /layer0 links to a ${target/other/file}, --groups /layer0: rollout" \
        3 "external link" "$O/rollout.h5" rollout "$f" -o "$O/rollout.h5" --groups /layer0
    IN=$d judge "a plain file whose /layer0 links to a ${target/other/file}, --groups /layer0: heads" \
        3 "external link" "$O/census.h5" heads "$f" -o "$O/census.h5" --groups /layer0
done
unset MAXT

# ------------------------------------- 2. -o into the results, --force over a stranger

d=$(fresh outputs "$BAT")
P=$d/results.h5.parts
R=$d/results.h5
mkdir "$d/mine"
printf 'my notes\n' >"$d/mine/notes.h5"
printf 'my notes\n' >"$d/mine/notes.png"
cp "$P/layer0.1.h5" "$d/mine/results-copy.h5"
cp "$P/layer0.1.h5" "$d/mine/results-copy.png"
made "a rollout" rollout "$R" -o "$d/mine/rollout.h5"
timeout -s KILL "$TL" "$ATTNRUN" heads "$R" -o "$d/mine/census.h5" </dev/null >/dev/null 2>&1 ||
    bad "setup: a census of $R"
IN=$d
for target in "$P/layer1.1.h5" "$P/new.h5"; do
    judge "rollout --force -o ${target#"$d"/}" 2 "names a file of the results" "" \
        rollout "$R" --force -o "$target"
    judge "heads --force -o ${target#"$d"/}" 2 "names a file of the results" "" \
        heads "$R" --force -o "$target"
done
judge "plot --force -o results.h5.parts/new.png" 2 "names a file of the results" "" \
    plot "$R" --group /layer1 --force -o "$P/new.png"
judge "rollout --force -o the index itself" 2 "names the results file itself" "" \
    rollout "$R" --force -o "$R"
judge "heads --force -o the index itself" 2 "names the results file itself" "" \
    heads "$R" --force -o "$R"
judge "plot --force -o the index itself" 2 "" "" plot "$R" --group /layer1 --force -o "$R"
for f in notes.h5 results-copy.h5 census.h5; do
    judge "rollout --force -o mine/$f (not a rollout)" 2 "not a rollout file" "" \
        rollout "$R" --force -o "$d/mine/$f"
done
for f in notes.h5 results-copy.h5 rollout.h5; do
    judge "heads --force -o mine/$f (not a census)" 2 "not a census file" "" \
        heads "$R" --force -o "$d/mine/$f"
done
for f in notes.png results-copy.png; do
    judge "plot --force -o mine/$f (not a picture)" 2 "not a picture" "" \
        plot "$R" --group /layer1 --force -o "$d/mine/$f"
done
# an index named like a picture, drawn onto itself
d=$T/case/picture
mkdir -p "$d"
made "an index named idx.png" "$TOP/fixtures/toy.h5" --heads 1 -o "$d/idx.png" --group /layer0 --append
IN=$d judge "plot --force -o the index itself, idx.png" 2 "names the results file itself" "" \
    plot "$d/idx.png" --group /layer0 --force -o "$d/idx.png"
unset IN

# ------------------------------------- 3. a missing part, a stranger's file of its name

d=$(fresh stranger "$BAT")
mkdir -p "$d/other/results.h5.parts"
mv "$d/results.h5.parts/layer1.1.h5" "$d/other/results.h5.parts/"
IN=$d CWD=$d/other readers "the part of /layer1 missing, one of its relative name in the working directory" 3 \
    $'missing\n../results.h5.parts/layer1.1.h5' ../results.h5 /layer1

# ------------------------------------- 4. a layer replaced while rollout reads

RACE=$T/race
mkdir -p "$RACE/pristine" "$RACE/newer" "$RACE/out"
ref attention_inputs.py random "$RACE/in0.h5" 8 192 16 1
ref attention_inputs.py random "$RACE/in1.h5" 8 192 16 2
for L in $(seq 0 11); do
    made "race layer $L" "$RACE/in0.h5" --heads 2 --save weights -o "$RACE/pristine/results.h5" \
        --group "/layer$L" --append
done
REPLACE=("$RACE/in1.h5" --heads 2 --save weights --group /layer1 --append --force -q)
made "the old index's rollout" rollout "$RACE/pristine/results.h5" -o "$RACE/old.h5"
cp -a "$RACE/pristine/results.h5" "$RACE/pristine/results.h5.parts" "$RACE/newer/"
made "/layer1 replaced" "${REPLACE[@]}" -o "$RACE/newer/results.h5"
made "the new index's rollout" rollout "$RACE/newer/results.h5" -o "$RACE/new.h5"
expect "the replacement of /layer1 changes the rollout" cases differ "$RACE/old.h5" "$RACE/new.h5"

# race_outcome READER_RC WRITER_RC: how a rollout (its stderr in
# $RACE/reader.err, its output $RACE/out/rollout.h5) raced by the
# replacement (stderr in $RACE/writer.err) ended: "old" or "new" (exit 0,
# exactly that index's rollout), "changed" (exit 1, "changed while it was
# read", nothing left), else "FAIL: WHY".
race_outcome() {
    local out=$RACE/out/rollout.h5 said tmp
    tmp=$(find "$T" -name '*attnrun-tmp*' | head -n 3)
    if [ "$2" -ne 0 ]; then
        echo "FAIL: the replacement failed: exit $2: $(head -c 300 "$RACE/writer.err")"
    elif [ -n "$tmp" ]; then
        echo "FAIL: left a temporary: $tmp"
    elif [ "$1" -eq 0 ]; then
        if [ -s "$RACE/reader.err" ]; then
            echo "FAIL: exit 0 but said: $(head -c 300 "$RACE/reader.err")"
        elif [ ! -f "$out" ]; then
            echo "FAIL: exit 0 without an output"
        else
            said=$(cases which "$out" "$RACE/old.h5" "$RACE/new.h5" 2>&1)
            case $said in
                old|new) echo "$said" ;;
                *) echo "FAIL: exit 0 with $said" ;;
            esac
        fi
    else
        said=$(verdict 1 "changed while it was read" "$out" "$1" "$RACE/reader.err" "")
        [ -z "$said" ] && [ -n "$(ls -A "$RACE/out")" ] && said="left $(ls -A "$RACE/out" | tr '\n' ' ')"
        if [ -n "$said" ]; then echo "FAIL: $said"; else echo changed; fi
    fi
}

declare -A seen=([old]=0 [new]=0 [changed]=0)
race_bad=0
W=$RACE/w
t0=$(now_ms)
for ((round = 0; round < 20; round++)); do
    # the replacement starts from 100 ms before to 375 ms after the reader
    # (a rollout of this index takes about 350 ms on an idle core)
    delay=$((round * 25 - 100))
    rdelay=0 wdelay=0
    if [ "$delay" -lt 0 ]; then rdelay=$((-delay)); else wdelay=$delay; fi
    rm -rf "$W" "$RACE/out"
    mkdir -p "$W" "$RACE/out"
    cp -a "$RACE/pristine/results.h5" "$RACE/pristine/results.h5.parts" "$W/"
    (
        sleep "$(printf '%d.%03d' $((rdelay / 1000)) $((rdelay % 1000)))"
        exec timeout -s KILL "$TL" "$ATTNRUN" rollout "$W/results.h5" -o "$RACE/out/rollout.h5"
    ) </dev/null >/dev/null 2>"$RACE/reader.err" &
    reader=$!
    (
        sleep "$(printf '%d.%03d' $((wdelay / 1000)) $((wdelay % 1000)))"
        exec timeout -s KILL "$TL" "$ATTNRUN" "${REPLACE[@]}" -o "$W/results.h5"
    ) </dev/null >/dev/null 2>"$RACE/writer.err" &
    writer=$!
    wait "$reader"
    rrc=$?
    wait "$writer"
    wrc=$?
    said=$(race_outcome "$rrc" "$wrc")
    case $said in
        old|new|changed) seen[$said]=$((seen[$said] + 1)) ;;
        *) bad "/layer1 replaced while rollout reads, round $round (the replacement at $delay ms): ${said#FAIL: }"
           race_bad=$((race_bad + 1)) ;;
    esac
done
[ "$race_bad" -eq 0 ] &&
    ok "/layer1 replaced while rollout reads, 20 rounds in $(($(now_ms) - t0)) ms: ${seen[old]} the old index's rollout, ${seen[new]} the new one's, ${seen[changed]} exit 1 'changed while it was read', no mixture"

# deterministic: the rollout stopped (SIGSTOP) once 1 MB of its output is
# written, the replacement run to its end, the rollout continued
rm -rf "$W" "$RACE/out"
mkdir -p "$W" "$RACE/out"
cp -a "$RACE/pristine/results.h5" "$RACE/pristine/results.h5.parts" "$W/"
said=$(cases stopped "$W/results.h5" "$RACE/out" 1000000 "${REPLACE[@]}" -o "$W/results.h5")
case $said in
    early:*) skip "/layer1 replaced while rollout is stopped mid-read: $said" ;;
    *) read -r rrc wrc <<<"$said"
       mv "$RACE/out/err" "$RACE/reader.err"
       mv "$RACE/out/writer.err" "$RACE/writer.err"
       said=$(race_outcome "$rrc" "$wrc")
       case $said in
           old|new|changed) ok "/layer1 replaced while rollout is stopped mid-read: $said (exit $rrc)" ;;
           *) bad "/layer1 replaced while rollout is stopped mid-read: ${said#FAIL: }" ;;
       esac ;;
esac

# deterministic: the replacement lands between two opens of the part.  A
# reader opens /layer1's part several times (its descriptor, then HDF5 by
# name, on each pass); tests/lib/vanish_on_open.c, preloaded, renames the
# new index over the old and removes the old part (what the append does)
# just before the Nth of those opens.  Each window must end as the race
# may: exit 1, "changed while it was read", nothing left.
VANISH=$T/vanish_on_open.so

# vanish_rollout INDEX PART TRIGGER AT ARGS...: a rollout (ARGS added) of
# $W/results.h5, a fresh copy of the pristine index, with INDEX and (beside
# the old parts) PART ready to land: just before the AT-th open of the part
# TRIGGER, vanish_on_open renames INDEX over the copy's index and removes
# TRIGGER (unless VANISH_KEEP is set).  Its status in rrc, its stderr in
# $RACE/reader.err, its output $RACE/out/rollout.h5.
vanish_rollout() {
    local index=$1 part=$2 trigger=$3 at=$4
    shift 4
    rm -rf "$W" "$RACE/out"
    mkdir -p "$W" "$RACE/out"
    cp -a "$RACE/pristine/results.h5" "$RACE/pristine/results.h5.parts" "$W/"
    cp "$index" "$W/next-index.h5"
    cp "$part" "$W/results.h5.parts/"
    VANISH_PATH=results.h5.parts/$trigger VANISH_AT=$at VANISH_FROM=$W/next-index.h5 \
        VANISH_TO=$W/results.h5 preloaded "$VANISH" \
        timeout -s KILL "$TL" "$ATTNRUN" rollout "$W/results.h5" "$@" -o "$RACE/out/rollout.h5" \
        </dev/null >/dev/null 2>"$RACE/reader.err"
    rrc=$?
}
old_part=$(cd "$RACE/pristine/results.h5.parts" && echo layer1.*.h5)
new_part=$(cd "$RACE/newer/results.h5.parts" && echo layer1.*.h5)
if ! "${CC:-cc}" -shared -fPIC -O2 -o "$VANISH" "$TESTS/lib/vanish_on_open.c" -ldl 2>"$T/cc.log"; then
    bad "setup: cannot build tests/lib/vanish_on_open.c: $(head -c 300 "$T/cc.log")"
else
    windows=0 vanish_bad=""
    for at in 1 2 3 4 5 6 7 8; do
        vanish_rollout "$RACE/newer/results.h5" "$RACE/newer/results.h5.parts/$new_part" \
            "$old_part" "$at"
        [ -e "$W/results.h5.parts/$old_part" ] && break    # no Nth open
        windows=$((windows + 1))
        said=$(race_outcome "$rrc" 0)
        [ "$said" = changed ] || vanish_bad+=" open $at: ${said#FAIL: };"
    done
    if [ -n "$vanish_bad" ]; then
        bad "/layer1 replaced between two opens of its part:$vanish_bad"
    elif [ "$windows" -lt 4 ]; then
        bad "/layer1 replaced between two opens of its part: only $windows opens of the part seen, expected 4 or more"
    else
        ok "/layer1 replaced between two opens of its part, at each of its first $windows opens: exit 1, 'changed while it was read', nothing left"
    fi
fi

# kept_rollout NAME NEW_INDEX NEW_PART ARGS...: a rollout of a copy of the
# pristine index (ARGS added) over which NEW_INDEX, with NEW_PART beside the
# old parts, lands at the first open of /layer5's part, no part removed:
# the groups read still name the parts read, so it must end as the same
# rollout of the pristine index does (made first): exit 0, nothing said.
kept_rollout() {
    local name=$1 index=$2 part=$3 layer5 said
    shift 3
    layer5=$(cd "$RACE/pristine/results.h5.parts" && echo layer5.*.h5)
    rm -f "$RACE/kept-ref.h5"
    made "$name: the pristine index's rollout" rollout "$RACE/pristine/results.h5" "$@" \
        -o "$RACE/kept-ref.h5"
    VANISH_KEEP=1 vanish_rollout "$index" "$part" "$layer5" 1 "$@"
    if [ -e "$W/next-index.h5" ]; then
        bad "$name: the index was never replaced (no open of $layer5)"
        return
    fi
    said=$(verdict 0 "" "$RACE/out/rollout.h5" "$rrc" "$RACE/reader.err" "")
    [ -z "$said" ] && [ -s "$RACE/reader.err" ] && said="said: $(head -c 300 "$RACE/reader.err")"
    [ -z "$said" ] && said=$(cases which "$RACE/out/rollout.h5" "$RACE/kept-ref.h5" \
                                   "$RACE/kept-ref.h5" 2>&1)
    [ "$said" = old ] && ok "$name: exit 0, the pristine index's rollout" ||
        bad "$name: expected the pristine index's rollout: $said"
}

# deterministic: another group appended while rollout reads every layer;
# and /layer1 replaced while rollout reads every other layer.
if [ -f "$VANISH" ]; then
    mkdir -p "$RACE/grown"
    cp -a "$RACE/pristine/results.h5" "$RACE/pristine/results.h5.parts" "$RACE/grown/"
    made "another group appended" "$RACE/in1.h5" --heads 2 --save weights --group /extra \
        --append -o "$RACE/grown/results.h5"
    extra=$(cd "$RACE/grown/results.h5.parts" && echo extra.*.h5)
    kept_rollout "another group appended while rollout reads" "$RACE/grown/results.h5" \
        "$RACE/grown/results.h5.parts/$extra"
    others=/layer0$(printf ',/layer%s' 2 3 4 5 6 7 8 9 10 11)
    kept_rollout "/layer1 replaced while rollout reads the other layers" \
        "$RACE/newer/results.h5" "$RACE/newer/results.h5.parts/$new_part" --groups "$others"
fi

# ------------------------------------- 5. the fuzzer's memory-hungry inputs

# fuzz_start KEY ARGS...: attnrun ARGS in the background, under ulimit -v
# 4000000 and the hang guard; its status, wall-clock and processor time
# (user + system, ms) and messages land in $F/KEY.rc, .ms, .cpu, .err.
# At most $JOBS run at once.
fuzz_start() {
    local key=$1
    shift
    (
        t0=$(now_ms)
        ( [ -n "${ATTN_TEST_SANITIZED:-}" ] || ulimit -v 4000000
          exec timeout -s KILL "$TL" "$ATTNRUN" "$@" ) \
            </dev/null >"$F/$key.out" 2>"$F/$key.err"
        echo $? >"$F/$key.rc"
        echo $(($(now_ms) - t0)) >"$F/$key.ms"
        # the second line of `times` (run in this shell, not in a pipe's):
        # this subshell's children, "XmY.YYYs XmY.YYYs"
        times >"$F/$key.times"
        sed -n 2p "$F/$key.times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
                                           printf "%d\n", t * 1000 }' >"$F/$key.cpu"
    ) &
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
}

# fuzz_judge KEY NAME OUT DIR SNAPSHOT: how the run KEY ended (exit 3 or 1,
# one line, OUT absent, within 20 s of processor time: the hang guard is
# 30 s of wall-clock time), DIR as SNAPSHOT says it was.
fuzz_judge() {
    local key=$1 name=$2 out=$3 ms cpu why
    ms=$(cat "$F/$key.ms")
    cpu=$(cat "$F/$key.cpu")
    why=$(verdict "3" "local heap" "$out" "$(cat "$F/$key.rc")" "$F/$key.err" "")
    [ -z "$why" ] && [ "$cpu" -gt 20000 ] && why="took $cpu ms of processor time ($ms ms)"
    [ -z "$why" ] && [ "$(snap "$4")" != "$5" ] && why="the results changed"
    if [ -z "$why" ]; then
        ok "$name: exit $(cat "$F/$key.rc") in $ms ms ($cpu ms of processor time)"
    else
        bad "$name: $why"
    fi
}

{
    F=$T/fuzz
    mkdir -p "$F"
    HUGE=()
    for found in "$TESTS"/corpus/fuzz/hdf5-huge-metadata-*; do
        [ -f "$found" ] || continue
        base=$(basename "$found")
        HUGE+=("$base")
        mkdir -p "$F/$base"
        tail -c +2 "$found" >"$F/$base/results.h5"       # the first byte is the fuzzer's options
        snap "$F/$base" >"$F/$base.snap"
        fuzz_start "$base.rollout" rollout "$F/$base/results.h5" -o "$F/$base.rollout.h5"
        fuzz_start "$base.heads" heads "$F/$base/results.h5" -o "$F/$base.census.h5"
        fuzz_start "$base.plot" plot "$F/$base/results.h5" --group /layer0 -o "$F/$base.png"
    done
    if [ "${#HUGE[@]}" -eq 0 ]; then
        bad "setup: no tests/corpus/fuzz/hdf5-huge-metadata-* files"
    fi
    # two of them as the part of /layer1 of an index
    PARTS=()
    [ "${#HUGE[@]}" -gt 0 ] && PARTS=("${HUGE[0]}" "${HUGE[$((${#HUGE[@]} - 1))]}")
    for base in "${PARTS[@]}"; do
        d=$F/part-$base
        mkdir -p "$d"
        cp -a "$BAT/results.h5" "$BAT/results.h5.parts" "$d/"
        cp "$F/$base/results.h5" "$d/results.h5.parts/layer1.1.h5"
        snap "$d" >"$d.snap"
        fuzz_start "part-$base.rollout" rollout "$d/results.h5" -o "$F/part-$base.rollout.h5"
        fuzz_start "part-$base.heads" heads "$d/results.h5" -o "$F/part-$base.census.h5"
        fuzz_start "part-$base.plot" plot "$d/results.h5" --group /layer1 -o "$F/part-$base.png"
    done
    wait
    for base in "${HUGE[@]}"; do
        fuzz_judge "$base.rollout" "fuzz/$base as the results: rollout" "$F/$base.rollout.h5" "$F/$base" "$(cat "$F/$base.snap")"
        fuzz_judge "$base.heads" "fuzz/$base as the results: heads" "$F/$base.census.h5" "$F/$base" "$(cat "$F/$base.snap")"
        fuzz_judge "$base.plot" "fuzz/$base as the results: plot" "$F/$base.png" "$F/$base" "$(cat "$F/$base.snap")"
    done
    for base in "${PARTS[@]}"; do
        d=$F/part-$base
        fuzz_judge "part-$base.rollout" "fuzz/$base as the part of /layer1: rollout" "$F/part-$base.rollout.h5" "$d" "$(cat "$d.snap")"
        fuzz_judge "part-$base.heads" "fuzz/$base as the part of /layer1: heads" "$F/part-$base.census.h5" "$d" "$(cat "$d.snap")"
        fuzz_judge "part-$base.plot" "fuzz/$base as the part of /layer1: plot" "$F/part-$base.png" "$d" "$(cat "$d.snap")"
    done
    tmp=$(find "$T" -name '*attnrun-tmp*' | head -n 3)
    if [ -z "$tmp" ]; then ok "the fuzzer's inputs left no temporary"; else bad "the fuzzer's inputs left $tmp"; fi
    rm -rf "$F"
}

# ------------------------------------- 6. the CSV into a full device

d=$(fresh full "$BAT")
IN=$d STDOUT=/dev/full judge "heads -o census.h5 >/dev/full (no census left)" 1 "standard output" \
    "$O/census.h5" heads "$d/results.h5" -o "$O/census.h5"

# ------------------------------------- 7. the system's failures are 1, damage is 3

# ulimit -n: the smallest limits fail on the index, then on a part; either
# is the system's failure (exit 1), never the input's (3)
d=$(fresh files "$BAT")
for reader in rollout heads plot; do
    found="" others=""
    for n in 4 5 6 7 8 9 10 11 12; do
        case $reader in
            rollout) set -- rollout "$d/results.h5" -o "$O/out.h5" ;;
            heads) set -- heads "$d/results.h5" -o "$O/out.h5" ;;
            plot) set -- plot "$d/results.h5" --group /layer1 -o "$O/out.png" ;;
        esac
        find "$O" -mindepth 1 -delete
        ( ulimit -n "$n" && exec timeout -s KILL "$TL" "$ATTNRUN" "$@" ) </dev/null >/dev/null 2>"$T/stderr"
        rc=$?
        why=$(verdict "0|1" "" "" "$rc" "$T/stderr" "")
        [ -n "$why" ] && others="$others ulimit -n $n: $why;"
        if [ -z "$found" ] && [ "$rc" -eq 1 ] && grep -q 'results.h5.parts/.*Too many open files' "$T/stderr"; then
            found=$n
        fi
    done
    if [ -n "$others" ]; then
        bad "$reader under ulimit -n 4 ... 12:$others"
    else
        ok "$reader under ulimit -n 4 ... 12: exit 0 or 1 with one line, never 3"
    fi
    if [ -z "$found" ]; then
        bad "$reader: no ulimit -n from 4 to 12 opens the index but not a part"
        continue
    fi
    case $reader in
        plot) IN=$d ULIM="-n $found" judge "plot, ulimit -n $found (the index opens, its part does not)" 1 \
            $'Too many open files\nresults.h5.parts/' "$O/plot.png" plot "$d/results.h5" --group /layer1 -o "$O/plot.png" ;;
        *) IN=$d ULIM="-n $found" judge "$reader, ulimit -n $found (the index opens, a part does not)" 1 \
            $'Too many open files\nresults.h5.parts/' "$O/out.h5" "$reader" "$d/results.h5" -o "$O/out.h5" ;;
    esac
done

# a part held under an exclusive lock by another process
d=$(fresh lock "$BAT")
part=$d/results.h5.parts/layer1.1.h5
( exec 9<"$part" && flock -x 9 && exec sleep 60 ) &
locker=$!
BACKGROUND+=("$locker")
for ((i = 0; i < 500; i++)); do
    flock -n -x "$part" true 2>/dev/null || break
    sleep 0.01
done
if flock -n -x "$part" true 2>/dev/null; then
    bad "setup: the lock on $part is not held"
else
    MAXT=10 IN=$d readers "the part of /layer1 locked by another process" 1 "locked" "$d/results.h5" /layer1
fi
kill "$locker" 2>/dev/null
wait "$locker" 2>/dev/null
BACKGROUND=()

# an index someone added a link to another file to
d=$(fresh foreign "$BAT")
cases foreign "$d/results.h5"
IN=$d readers "an index with an external link /evil to elsewhere.h5" 3 "/evil" "$d/results.h5" /layer1
# the index's format number
d=$(fresh format-string "$BAT")
cases index_format "$d/results.h5" string
IN=$d readers "an index whose attnrun_index is a string" 3 "attnrun_index" "$d/results.h5" /layer1
d=$(fresh format-2 "$BAT")
cases index_format "$d/results.h5" 2
IN=$d readers "an index whose attnrun_index is 2" 3 "format 2" "$d/results.h5" /layer1
# tokens of B + 1 items beside maps of B
d=$(fresh tokens "$BAT")
cases extra_tokens "$d/results.h5.parts/layer1.1.h5" /layer1
IN=$d judge "query_token of 3 items beside maps of 2: rollout" 3 "query_token" "$O/rollout.h5" \
    rollout "$d/results.h5" -o "$O/rollout.h5"
IN=$d judge "query_token of 3 items beside maps of 2: heads" 3 "query_token" "$O/census.h5" \
    heads "$d/results.h5" -o "$O/census.h5"
IN=$d judge "query_token of 3 items beside maps of 2: plot" 3 "query_token" "$O/plot.png" \
    plot "$d/results.h5" --group /layer1 -o "$O/plot.png"

# ------------------------------------- 8. the damaged files of tests/corpus/readers

MAXT=10
d=$T/case/stalls
mkdir -p "$d"
cp "$TESTS/corpus/readers/plot-stalls.h5" "$d/"
# heads and plot read the damaged weights; rollout reads each layer's head
# mean first, which is intact here, and never the weights: it succeeds
stalls="plot-stalls.h5 (/layer0/weights claims (2, 2, 820338753542, 6))"
IN=$d judge "$stalls: rollout (the intact mean)" 0 "" "$O/rollout.h5" rollout "$d/plot-stalls.h5" \
    -o "$O/rollout.h5"
IN=$d judge "$stalls: heads" 3 "" "$O/census.h5" heads "$d/plot-stalls.h5" -o "$O/census.h5"
IN=$d judge "$stalls: plot" 3 "" "$O/plot.png" plot "$d/plot-stalls.h5" --group /layer0 \
    -o "$O/plot.png"
d=$(fresh heap "$BAT")
cp "$TESTS/corpus/readers/part-heap-overflow.h5" "$d/results.h5.parts/layer1.1.h5"
IN=$d readers "part-heap-overflow.h5 as the part of /layer1" 3 "" "$d/results.h5" /layer1
d=$T/case/unwritten
mkdir -p "$d"
cp "$SRC/unwritten.h5" "$SRC/unwritten_map.h5" "$d/"
IN=$d readers "weights (2^40, 1, 2, 2), no chunk written" 3 "" "$d/unwritten.h5"
IN=$d readers "weights (1, 1, 2^20, 2^20), no chunk written" 3 "" "$d/unwritten_map.h5"
unset MAXT

# ------------------------------------- 9. the run's own hostile inputs

d=$T/case/hostile
mkdir -p "$d"
for f in nan unnorm nul utf8 mega; do cp "$SRC/$f.h5" "$d/"; done
IN=$d readers "weights with NaN, +inf and -inf" "0|1|3" "" "$d/nan.h5"
IN=$d readers "weights of rows summing to 3 and a negative row" "0|1|3" "" "$d/unnorm.h5"
IN=$d readers "tokens with NUL bytes" "0|1|3" "" "$d/nul.h5"
IN=$d readers "tokens of invalid UTF-8" "0|1|3" "" "$d/utf8.h5"
IN=$d readers "tokens of 1 MiB" "0|1|3" "" "$d/mega.h5"

# an index of 1000 tiny layers
d=$T/case/many
mkdir -p "$d/one"
made "one tiny layer" "$TOP/fixtures/toy.h5" --heads 1 --save weights -o "$d/one/results.h5" --group /layer0 --append
if cases many "$d/one/results.h5.parts/layer0.1.h5" "$d/results.h5" 1000 >"$T/many.log" 2>&1; then
    rm -rf "$d/one"
    MAXT=60 IN=$d judge "an index of 1000 layers: rollout" 0 "" "$O/rollout.h5" rollout "$d/results.h5" -o "$O/rollout.h5"
    total=$ms
    MAXT=60 IN=$d judge "an index of 1000 layers: heads" 0 "" "$O/census.h5" heads "$d/results.h5" -o "$O/census.h5"
    total=$((total + ms))
    if [ "$total" -le 60000 ]; then
        ok "an index of 1000 layers: rollout and heads in $total ms together"
    else
        bad "an index of 1000 layers: rollout and heads took $total ms together, over 60 s"
    fi
    MAXT=60 IN=$d judge "an index of 1000 layers: plot" 0 "" "$O/plot.png" plot "$d/results.h5" --group /layer999 -o "$O/plot.png"
else
    bad "setup: an index of 1000 layers: $(tail -n 2 "$T/many.log" | tr '\n' ' ')"
fi

# SIGTERM to a rollout mid-run (the race's index: about 350 ms of work)
d=$RACE/sig
mkdir -p "$d"
said=$(cases signalled "$RACE/pristine/results.h5" "$d" TERM 1000000)
case $said in
    early:*) skip "SIGTERM mid-rollout: $said" ;;
    *) why=$(verdict 1 "interrupted" "$d/out.h5" "$said" "$d/err" "")
       [ -z "$why" ] && [ "$(ls -A "$d")" != "err" ] && why="left $(ls -A "$d" | tr '\n' ' ')"
       if [ -z "$why" ]; then ok "SIGTERM mid-rollout: exit 1, one line, nothing left"; else bad "SIGTERM mid-rollout: $why"; fi ;;
esac

# a file size limit of 1 kB for the output
d=$(fresh fsize "$BAT")
IN=$d ULIM="-f 1" readers "ulimit -f 1" 1 "" "$d/results.h5" /layer1

# a read-only output directory (as root, permission bits do not stop a
# write: a read-only tmpfs instead)
mkdir -p "$T/ro"
if [ "$(id -u)" -eq 0 ]; then
    mount -t tmpfs -o ro tmpfs "$T/ro" 2>"$T/mount.err" && RO_MOUNTED=1
else
    chmod 555 "$T/ro"
fi
if touch "$T/ro/.probe" 2>/dev/null; then
    rm -f "$T/ro/.probe"
    skip "a read-only output directory: cannot make one here ($(head -n 1 "$T/mount.err" 2>/dev/null))"
else
    d=$(fresh readonly "$BAT")
    IN=$d judge "a read-only output directory: rollout" 1 "" "$T/ro/rollout.h5" \
        rollout "$d/results.h5" -o "$T/ro/rollout.h5"
    IN=$d judge "a read-only output directory: heads" 1 "" "$T/ro/census.h5" \
        heads "$d/results.h5" -o "$T/ro/census.h5"
    IN=$d judge "a read-only output directory: plot" 1 "" "$T/ro/plot.png" \
        plot "$d/results.h5" --group /layer1 -o "$T/ro/plot.png"
fi
if [ "$RO_MOUNTED" = 1 ]; then
    umount "$T/ro" && RO_MOUNTED=0
else
    chmod 755 "$T/ro"
fi

# byte mutations of a part (a results file of its own, /layer1), and the
# fuzzer's other inputs as results files: whatever each reader decides, it
# decides cleanly (0, or 1 or 3 with one line), within 10 s
d=$T/case/mutants
mkdir -p "$d"
if cases mutants "$(ls "$BAT"/results.h5.parts/layer1.*.h5 | head -n 1)" "$d" 60 31; then
    clean=0 total=0
    for m in "$d"/mutant-*.h5; do
        for reader in rollout heads plot view; do
            extra=() out=$O/out.h5
            [ "$reader" = plot ] && extra=(--group /layer1) out=$O/out.png
            [ "$reader" = view ] && out=$O/out.html
            total=$((total + 1))
            MAXT=10 IN=$d judge "byte mutation $(basename "$m" .h5): $reader" "0|1|3" "" \
                "$out" "$reader" "$m" "${extra[@]}" -o "$out" >"$T/judged" && clean=$((clean + 1))
            grep -v '^ok ' "$T/judged" || true
        done
    done
    if [ "$clean" -eq "$total" ]; then ok "byte mutations: $total runs of 60 mutants, each clean"; fi
else
    bad "setup: byte mutations"
fi
for found in "$TESTS"/corpus/fuzz/*; do
    case $(basename "$found") in hdf5-huge-*) continue ;; esac   # above, under ulimit -v
    tail -c +2 "$found" >"$T/fuzz.h5"
    for reader in rollout heads view; do
        out=$O/out.h5
        [ "$reader" = view ] && out=$O/out.html
        MAXT=10 judge "fuzz/$(basename "$found"): $reader" "0|1|3" "" "$out" \
            "$reader" "$T/fuzz.h5" -o "$out" >"$T/judged" || cat "$T/judged"
    done
done
ok "the fuzzer's other inputs through rollout, heads and view: judged above when not clean"

echo "    ($(($(date +%s) - START)) s)"
finish
