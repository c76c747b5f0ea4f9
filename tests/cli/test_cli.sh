#!/usr/bin/env bash
# Command-line behaviour tests for attnrun that are not numeric comparisons
# (docs/contract.md §3, §4 and §5): axis labels, provenance, layout, filters,
# --save, --dry-run, atomic output, --in-place, streaming, memory, signals,
# progress, threads, non-finite input and on-disk types.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_cli.sh     # from the repository root
#
# Environment:
#   ATTNRUN   the binary under test (default: build/attnrun)
#   PYTHON    a python with numpy and h5py (default: /usr/bin/python3)
#
# Inputs other than fixtures/ are generated at test time
# (tests/ref/attention_inputs.py) in a temporary directory that is removed
# on exit; the checks of files are tests/ref/output_layout.py,
# provenance_check.py, in_place_result.py and same_file.py.  Each
# check prints "ok NAME [detail]", "FAIL NAME: WHY" or "skip NAME: WHY";
# the last line is "cli: N passed, M failed"; the exit status is 1 when M > 0.

set -u

FIX=$PWD/fixtures
SUITE="cli"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, the checks in ref/
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

suite_setup cli numpy h5py

ALL=scores,weights,heads,output,q,k,v

# ---------------------------------------------------------------- helpers

# gen PATH B n d_model [seed] [--same-rows] [--nan-at b,q,c]: a generated input.
gen() { ref attention_inputs.py random "$@"; }

# Runs attnrun with stdout/stderr captured in $T/stdout, $T/stderr; sets $rc.
run() {
    "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

# ran NAME ARGS...: run; when attnrun did not exit 0, FAIL NAME and status 1.
ran() {
    run "${@:2}"
    [ $rc -eq 0 ] || { bad "$1: exit $rc: $(err1)"; return 1; }
}

# First line of the last run's stderr (for FAIL messages).
err1() { head -n 1 "$T/stderr"; }

# Prints the temporary files attnrun left in directory $1 (none: prints nothing).
temps_in() { find "$1" -maxdepth 1 -name '*attnrun-tmp*' -printf '%f\n'; }

# no_temps NAME DIR: FAIL NAME and status 1 when attnrun left a temporary in DIR.
no_temps() { [ -z "$(temps_in "$2")" ] || { bad "$1: left $(temps_in "$2")"; return 1; }; }

# The sha256 of a file; "-" when there is none.
sha() { if [ -f "$1" ]; then sha256sum "$1" | cut -d ' ' -f 1; else echo -; fi; }

# A fresh work directory for one check.
workdir() {
    local d=$T/$1
    rm -rf "$d"
    mkdir -p "$d"
    echo "$d"
}

# left_alone NAME WANT FILE SUM DIR: the last run exited WANT ("fail": any
# status but 0), FILE's sha256 is still SUM ("-": FILE does not exist) and
# DIR holds no temporary.
left_alone() {
    local name=$1 want=$2 file=$3 sum=$4 dir=$5
    case $want:$rc in
        fail:0) bad "$name: exit 0, expected a failure"; return ;;
        fail:* | "$rc:$rc") ;;
        *) bad "$name: exit $rc, expected $want: $(err1)"; return ;;
    esac
    if [ "$(sha "$file")" != "$sum" ]; then
        bad "$name: exit $rc and ${file##*/} $([ "$sum" = - ] && echo exists || echo changed)"
    elif no_temps "$name" "$dir"; then
        ok "$name"
    fi
}

# ---------------------------------------------------------------- 1. labels

check_labels_and_scales() {
    local out=$T/labels.h5 c
    ran axis_labels "$FIX/batch_bias.h5" -o "$out" --heads 4 --save $ALL || return
    for c in axis_labels descriptions dimension_scales; do
        expect "$c" ref output_layout.py "$c" "$out"
    done
}

# ---------------------------------------------------------------- 2. provenance

check_provenance() {
    local d
    d=$(workdir prov)
    ran provenance "$FIX/batch_bias.h5" -o "$d/out.h5" --heads 4 || return
    expect provenance ref provenance_check.py attributes "$d/out.h5" / f32 0
    ran group_option "$FIX/batch_bias.h5" -o "$d/group.h5" --heads 4 --group /results/run1 &&
        expect group_option ref provenance_check.py group_option "$d/group.h5"
}

# ---------------------------------------------------------------- 3. rank 2

check_rank2() {
    ran rank2_drops_batch "$FIX/rank2.h5" -o "$T/rank2.h5" --heads 2 &&
        expect rank2_drops_batch ref output_layout.py rank2_drops_batch "$T/rank2.h5" "$FIX/rank2.h5"
}

# ---------------------------------------------------------------- 4. chunks

check_chunking() {
    local d
    d=$(workdir chunks)
    gen "$d/in.h5" 64 128 32
    ran chunking "$d/in.h5" -o "$d/out.h5" --heads 2 &&
        expect chunking ref output_layout.py chunking "$d/out.h5"
}

# ---------------------------------------------------------------- 5. compress

check_compress() {
    local d plain gz
    d=$(workdir compress)
    # Compressible: every query row of an item is the same, so each row of
    # scores/weights is constant-per-row and heads/output repeat row after row.
    gen "$d/in.h5" 16 64 32 --same-rows
    ran "compress: plain run" "$d/in.h5" -o "$d/plain.h5" --heads 2 || return
    ran "compress: --compress 4" "$d/in.h5" -o "$d/gz.h5" --heads 2 --compress 4 || return
    expect compress_filters ref output_layout.py compress_filters "$d/gz.h5" "$d/plain.h5"
    expect compress_same_values ref same_file.py outputs / "$d/gz.h5" "$d/plain.h5"
    plain=$(stat -c %s "$d/plain.h5")
    gz=$(stat -c %s "$d/gz.h5")
    if [ "$gz" -lt "$plain" ]; then
        ok "compress_smaller ($gz < $plain bytes)"
    else
        bad "compress_smaller: --compress 4 file is $gz bytes, uncompressed $plain"
    fi
}

# ---------------------------------------------------------------- 6. precision

check_precision() {
    local c name dtype tag opts
    # Each case: the check, every output's dtype, the attribute precision,
    # attnrun's options.
    for c in "precision_default_f32 float32 f32" "precision_f64 float64 f64 --precision f64"; do
        read -r name dtype tag opts <<<"$c"
        # shellcheck disable=SC2086
        ran "$name" "$FIX/batch_bias.h5" -o "$T/$tag.h5" --heads 4 $opts --save $ALL &&
            expect "$name" ref output_layout.py precision "$T/$tag.h5" "$dtype" "$tag"
    done
}

# ---------------------------------------------------------------- 7. --save

check_save_subset() {
    ran save_subset "$FIX/batch_bias.h5" -o "$T/save.h5" --heads 4 --save weights,output &&
        expect save_subset ref output_layout.py save_subset "$T/save.h5"
}

# ---------------------------------------------------------------- 8. --dry-run

check_dry_run() {
    local d
    d=$(workdir dry)
    ran dry_run "$FIX/batch_bias.h5" -o "$d/out.h5" --heads 4 --dry-run --save $ALL || return
    if [ -e "$d/out.h5" ]; then
        bad "dry_run: wrote $d/out.h5"
    elif no_temps dry_run "$d"; then
        expect dry_run ref output_layout.py dry_run "$T/stdout"
    fi
}

# ---------------------------------------------------------------- 9. atomic -o

check_atomic_output() {
    local d out before mode
    d=$(workdir atomic)
    out=$d/out.h5
    echo "not an attnrun output" >"$out"
    before=$(sha "$out")
    run "$FIX/batch_bias.h5" -o "$out" --heads 4
    left_alone atomic_refuse_existing 2 "$out" "$before" "$d"

    ran atomic_force_replace "$FIX/batch_bias.h5" -o "$out" --heads 4 --force &&
        no_temps atomic_force_replace "$d" &&
        expect atomic_force_replace ref output_layout.py default_outputs "$out"

    rm -f "$out"
    run "$FIX/batch_bias.h5" -o "$out" --heads 4 --wq missing_name
    left_alone atomic_failure_leaves_nothing fail "$out" - "$d"

    # A new OUT gets 0666 less the umask, like any other program's output.
    rm -f "$out"
    (umask 027 && "$ATTNRUN" "$FIX/batch_bias.h5" -o "$out" --heads 4 >/dev/null 2>&1)
    mode=$(stat -c %a "$out" 2>/dev/null)
    if [ "$mode" = 640 ]; then
        ok output_mode_follows_umask
    else
        bad "output_mode_follows_umask: mode ${mode:-none} under umask 027, expected 640"
    fi
}

# ---------------------------------------------------------------- 10. in-place

check_in_place() {
    local d f before mode
    d=$(workdir inplace)
    f=$d/causal.h5
    cp "$FIX/causal.h5" "$f"
    cp "$FIX/causal.h5" "$d/original.h5"
    chmod 640 "$f"
    ran in_place_adds_group "$f" --in-place --group /attn --heads 2 --causal || return
    expect in_place_adds_group ref in_place_result.py adds_group "$f" "$d/original.h5"
    mode=$(stat -c %a "$f")
    if [ "$mode" = 640 ]; then
        ok in_place_keeps_mode
    else
        bad "in_place_keeps_mode: IN was mode 640, now $mode"
    fi

    before=$(sha "$f")
    run "$f" --in-place --group /attn --heads 2 --causal
    left_alone in_place_refuse_existing 2 "$f" "$before" "$d"

    ran in_place_force "$f" --in-place --group /attn --heads 2 --causal --force &&
        no_temps in_place_force "$d" &&
        expect in_place_force ref in_place_result.py replaced_group "$f" "$d/original.h5"

    before=$(sha "$f")
    run "$f" --in-place --group /attn --heads 2 --causal --force --wq missing_name
    left_alone in_place_failure_untouched fail "$f" "$before" "$d"
}

# ---------------------------------------------------------------- 11. streaming

check_streaming() {
    local d s
    d=$(workdir stream)
    gen "$d/in.h5" 7 9 16 3
    ran "streaming_slices: default slice" "$d/in.h5" -o "$d/default.h5" --heads 4 --causal --save $ALL ||
        return
    for s in 1 3; do
        ran "streaming_slices: --batch-slice $s" "$d/in.h5" -o "$d/slice$s.h5" --heads 4 --causal \
            --save $ALL --batch-slice $s || return
    done
    expect streaming_slices ref same_file.py outputs / "$d/default.h5" "$d/slice1.h5" "$d/slice3.h5"
}

# ---------------------------------------------------------------- 12. memory

# Peak RSS in kB of one attnrun run (prints it), or nothing when the run failed.
peak_rss() {
    local log=$T/time.log
    /usr/bin/time -v "$ATTNRUN" "$@" >/dev/null 2>"$log" || return 1
    awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$log"
}

check_memory() {
    local d small big
    if [ ! -x /usr/bin/time ]; then
        skip "memory_flat_in_B: /usr/bin/time is missing (Debian package: time)"
        return
    fi
    d=$(workdir memory)
    gen "$d/b256.h5" 256 32 64
    gen "$d/b4096.h5" 4096 32 64
    small=$(peak_rss "$d/b256.h5" -o "$d/o256.h5" --heads 4)
    big=$(peak_rss "$d/b4096.h5" -o "$d/o4096.h5" --heads 4)
    if [ -z "$small" ] || [ -z "$big" ]; then
        bad "memory_flat_in_B: a run failed: $(grep -v '^\s' "$T/time.log" | head -n 1)"
        return
    fi
    # limit = 1.5 * small + 20 MB, all in kB
    local limit=$((small * 3 / 2 + 20000))
    if [ "$big" -lt "$limit" ]; then
        ok "memory_flat_in_B (peak RSS B=256: $small kB, B=4096: $big kB, limit $limit kB)"
    else
        bad "memory_flat_in_B: peak RSS B=256: $small kB, B=4096: $big kB >= 1.5x + 20 MB = $limit kB"
    fi
}

# ---------------------------------------------------------------- 13. signals

# interrupt_with SIG DIR [in-place]: signals attnrun mid-run (inputs in
# DIR).  SIGINT and SIGTERM: exit 1 with one "interrupted" line, no OUT, no
# temporary, IN as it was.  SIGKILL: no OUT and IN as it was; a temporary
# may remain, named as docs/safety.md says (.NAME.attnrun-tmp-XXXXXX), which
# the test removes.
interrupt_with() {
    local sig=$1 d=$2 mode=${3:-} name out pid before input
    name=signal_${sig,,}${mode:+_$mode}
    out=$d/out_$sig.h5
    input=$d/in.h5
    if [ "$mode" = in-place ]; then
        input=$d/in_$sig.h5
        cp "$d/in.h5" "$input"
    fi
    before=$(sha "$input")
    if [ "$mode" = in-place ]; then
        "$ATTNRUN" "$input" --in-place --group /r --heads 4 --batch-slice 16 --save output \
            --threads 1 >/dev/null 2>"$T/stderr" &
    else
        "$ATTNRUN" "$input" -o "$out" --heads 4 --batch-slice 16 --save output --threads 1 \
            >/dev/null 2>"$T/stderr" &
    fi
    pid=$!
    # Signal it 0.3 s into the computation: once its temporary output exists
    # (so a slow start cannot make this test signal it before it is running).
    for _ in $(seq 100); do
        [ -n "$(temps_in "$d")" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    sleep 0.3
    if ! kill -s "$sig" "$pid" 2>/dev/null; then
        wait "$pid"
        bad "$name: attnrun ended (exit $?) before the signal; the input is too small"
        return
    fi
    for _ in $(seq 100); do             # at most 10 s to shut down
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -s KILL "$pid"
        wait "$pid"
        bad "$name: still running 10 s after SIG$sig"
        return
    fi
    wait "$pid"
    rc=$?
    local lines left
    lines=$(wc -l <"$T/stderr")
    left=$(temps_in "$d")
    if [ "$sig" = KILL ]; then
        if [ $rc -ne 137 ]; then
            bad "$name: exit $rc, expected 137 (killed)"
        elif [ -e "$out" ]; then
            bad "$name: OUT exists after SIGKILL"
        elif [ "$(sha "$input")" != "$before" ]; then
            bad "$name: the input changed"
        elif [ -n "$left" ] && ! grep -Eq '^\.[^/]+\.attnrun-tmp-[A-Za-z0-9]{6}$' <<<"$left"; then
            bad "$name: left something not named as a temporary: $left"
        else
            ok "$name"
        fi
        rm -f "$d"/.*.attnrun-tmp-*
        return
    fi
    if [ $rc -ne 1 ]; then
        bad "$name: exit $rc, expected 1 (stderr: $(err1))"
    elif [ "$lines" -ne 1 ] || ! grep -q '^attnrun: .*interrupt' "$T/stderr"; then
        bad "$name: stderr is not one 'attnrun: ...interrupt...' line: $(head -c 300 "$T/stderr")"
    elif [ -e "$out" ]; then
        bad "$name: OUT exists after the interrupt"
    elif [ -n "$left" ]; then
        bad "$name: left $left"
    elif [ "$(sha "$input")" != "$before" ]; then
        bad "$name: the input changed"
    else
        ok "$name"
    fi
}

check_signals() {
    local d mode sig
    d=$(workdir signals)
    # About 1.5 s of work on one thread (B=3000, n=256, d_model=64, H=4).
    gen "$d/in.h5" 3000 256 64
    for mode in "" in-place; do
        for sig in INT TERM KILL; do
            interrupt_with $sig "$d" $mode
        done
    done
}

# ---------------------------------------------------------------- 14. progress

check_progress() {
    local d c name opts
    d=$(workdir progress)
    if ran progress_flag "$FIX/batch_bias.h5" -o "$d/a.h5" --heads 4 --progress; then
        if grep -Eq '^attnrun: 100% \([0-9]+/[0-9]+ rows of items? ' "$T/stderr"; then
            ok progress_flag
        else
            bad "progress_flag: no 'attnrun: 100% (... rows of item' on stderr: $(head -c 200 "$T/stderr")"
        fi
    fi
    # Each case: the check, then attnrun's options; stderr must stay empty.
    for c in "quiet_when_not_a_terminal" "quiet_flag --progress -q"; do
        read -r name opts <<<"$c"
        # shellcheck disable=SC2086
        ran "$name" "$FIX/batch_bias.h5" -o "$d/$name.h5" --heads 4 $opts || continue
        if [ -s "$T/stderr" ]; then
            bad "$name: ${opts:-attnrun} wrote to stderr: $(head -c 200 "$T/stderr")"
        else
            ok "$name"
        fi
    done
}

# ---------------------------------------------------------------- 15. threads

check_threads() {
    local d t
    d=$(workdir threads)
    gen "$d/in.h5" 16 96 64 5
    for t in 1 2; do
        ran "threads_bit_identical: --threads $t" "$d/in.h5" -o "$d/t$t.h5" --heads 4 --threads $t \
            --save $ALL || return
    done
    expect threads_bit_identical ref same_file.py outputs / "$d/t1.h5" "$d/t2.h5"
}

# ---------------------------------------------------------------- 16. non-finite

check_nonfinite() {
    local d
    d=$(workdir nonfinite)
    gen "$d/in.h5" 3 5 8 --nan-at 1,2,3
    run "$d/in.h5" -o "$d/out.h5" --heads 2
    if [ $rc -ne 3 ]; then
        bad "nonfinite_rejected: exit $rc, expected 3"
    elif ! grep -q '\bX\b' "$T/stderr" || ! grep -qF '[1, 2, 3]' "$T/stderr"; then
        bad "nonfinite_rejected: message does not name X and [1, 2, 3]: $(err1)"
    elif [ -e "$d/out.h5" ] || [ -n "$(temps_in "$d")" ]; then
        bad "nonfinite_rejected: left an output or temporary file"
    else
        ok nonfinite_rejected
    fi
    if ran nonfinite_allowed "$d/in.h5" -o "$d/out.h5" --heads 2 --allow-nonfinite; then
        if [ -s "$d/out.h5" ]; then ok nonfinite_allowed; else bad "nonfinite_allowed: no output"; fi
    fi
}

# ---------------------------------------------------------------- 17. types

check_input_types() {
    if ! ref attention_inputs.py float16-bigendian "$FIX/perhead3d.h5" 2>/dev/null; then
        bad "float16_bigendian_input: fixtures/perhead3d.h5 no longer has a float16 X and big-endian W_Q"
    elif ran float16_bigendian_input "$FIX/perhead3d.h5" -o "$T/types.h5"; then
        ok float16_bigendian_input
    fi
}

# ------------------------------------------------------------ refusals

# Expects the last run to have failed with CODE and a stderr line holding TEXT.
expect_refusal() {
    local name=$1 code=$2 text=$3
    if [ $rc -ne "$code" ] || [ "$(wc -l <"$T/stderr")" -ne 1 ] || ! grep -q -- "$text" "$T/stderr"; then
        bad "$name: exit $rc, expected $code with '$text': $(err1)"
    else
        ok "$name"
    fi
}

check_refusals() {
    local d before
    d=$(workdir refusals)
    cp "$FIX/causal.h5" "$d/in.h5"

    mkfifo "$d/fifo.h5"
    run "$d/in.h5" -o "$d/fifo.h5" --force --heads 2
    if [ -p "$d/fifo.h5" ]; then
        expect_refusal force_refuses_non_regular_out 2 "not a regular file"
    else
        bad "force_refuses_non_regular_out: the FIFO was replaced"
    fi

    ln "$d/in.h5" "$d/link.h5"
    before=$(sha "$d/in.h5")
    run "$d/in.h5" --in-place --heads 2
    expect_refusal in_place_refuses_hard_links 2 "hard links"
    [ "$(sha "$d/in.h5")" = "$before" ] || bad "in_place_refuses_hard_links: IN changed"
    rm "$d/link.h5"

    ln -s in.h5 "$d/sym.h5"
    run "$d/sym.h5" --in-place --heads 2 --group /viasym
    if [ $rc -ne 0 ] || [ ! -L "$d/sym.h5" ]; then
        bad "in_place_through_symlink: exit $rc, link kept: $([ -L "$d/sym.h5" ] && echo yes || echo no): $(err1)"
    else
        expect in_place_through_symlink ref in_place_result.py has "$d/in.h5" viasym/weights
    fi

    run "$d/in.h5" -o "$d/g.h5" --heads 2 --group //
    expect_refusal group_path_checked 2 "group '//'"

    run "$d/in.h5" -o "$d/g.h5" --wq none
    expect_refusal option_named_in_message 2 "^attnrun: --wq none"

    ref attention_inputs.py huge-value "$d/wide.h5"
    run "$d/wide.h5" -o "$d/w.h5" --heads 2
    expect_refusal float32_overflow_explained 3 "1e+100 at \\[1, 2, 3\\], too large for float32"
    ran float64_keeps_large_values "$d/wide.h5" -o "$d/w.h5" --heads 2 --precision f64 &&
        ok float64_keeps_large_values

    no_temps refusals_leave_no_temporary "$d"
}

# ------------------------------------------------------------ xarray

# xarray (through h5netcdf) sees the dimension scales as named dimensions
# with coordinates, and the values equal h5py's.
check_xarray() {
    if ! "$PY" -c 'import xarray, h5netcdf' 2>/dev/null; then
        skip "xarray_opens: python3-xarray and python3-h5netcdf are not installed"
        return
    fi
    ran xarray_opens "$FIX/batch_bias.h5" -o "$T/xarray.h5" --heads 4 &&
        expect xarray_opens ref output_layout.py xarray_opens "$T/xarray.h5"
}

# ------------------------------------------------------- write failures

# A write that fails (full disk, file size limit) ends with exit 1, one
# message naming the cause, and nothing left behind - never a crash.
expect_write_failure() {
    local name=$1 want=$2 dir=$3
    if [ $rc -ne 1 ] || [ "$(wc -l <"$T/stderr")" -ne 1 ] || ! grep -q "$want" "$T/stderr"; then
        bad "$name: exit $rc, expected 1 with '$want': $(err1)"
    elif [ -n "$(ls -A "$dir")" ]; then
        bad "$name: left behind: $(ls -A "$dir" | tr '\n' ' ')"
    else
        ok "$name"
    fi
}

check_write_failures() {
    local d small
    d=$(workdir writefail)
    gen "$d/in.h5" 256 32 64
    small=$d/small
    mkdir "$small"
    if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1m tmpfs "$small" 2>/dev/null; then
        # the plan (12.0 MiB of outputs, the dry run's total) does not fit:
        # refused before writing, with both figures
        run "$d/in.h5" -o "$small/out.h5" --heads 4
        expect_write_failure no_room "free; use --force to try anyway" "$small"
        local total need
        total=$("$ATTNRUN" "$d/in.h5" --heads 4 --dry-run | awk '$1 == "total" { print $2 }')
        need=$(awk -v b="$total" 'BEGIN { printf "%.1f MiB", b / 1048576 }')
        if ! grep -q "needs $need (the outputs) but .* has 1.0 MiB free" "$T/stderr"; then
            bad "no_room_numbers: expected both sizes: $(err1)"
        else
            ok no_room_numbers
        fi
        # --force tries anyway: the disk fills, and nothing is left behind
        run "$d/in.h5" -o "$small/out.h5" --heads 4 --force
        expect_write_failure disk_full "No space left" "$small"
        umount "$small"
    else
        skip "disk_full: needs root and a tmpfs mount"
    fi
    mkdir -p "$d/limited"
    (ulimit -f 512; "$ATTNRUN" "$d/in.h5" -o "$d/limited/out.h5" --heads 4 >"$T/stdout" 2>"$T/stderr")
    rc=$?
    expect_write_failure file_size_limit "File too large" "$d/limited"
}

# ---------------------------------------------------------------- main

check_labels_and_scales
check_provenance
check_rank2
check_chunking
check_compress
check_precision
check_save_subset
check_dry_run
check_atomic_output
check_in_place
check_streaming
check_memory
check_signals
check_progress
check_threads
check_nonfinite
check_input_types
check_write_failures
check_xarray
check_refusals
finish
