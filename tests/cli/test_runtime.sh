#!/usr/bin/env bash
# tests/cli/test_runtime.sh - attnrun and its process environment:
# closed standard descriptors, an input changed while it is read, locks and
# --wait, FIFO and device inputs, `ulimit -v`, signals and EPIPE, a signal
# during the final fsync, thread caps and `ulimit -u`, bad -o values, long
# output names, umasks, --in-place onto a small tmpfs, a fake clock, the
# wait policy of the threads.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_runtime.sh     # from the repository root
#
# Environment: ATTNRUN (default build/attnrun), PYTHON (a python with numpy
# and h5py, default /usr/bin/python3), TIME_LIMIT (the hang guard of one
# run, default 10 s), RUNTIME_CHECKS (e.g. "signals locks": only those
# check_* groups).  Each check prints "ok NAME", "FAIL NAME: WHY" or
# "skip NAME: WHY" (checks that need root, strace or a C compiler); NAME
# starts with the number of the guarantee it checks in tests/README.md's
# table "Hostile surroundings".  Expected numbers come from the float64
# numpy reference (tests/ref/reference_values.py), never from attnrun.
# Mid-run events are ordered by polling (a temporary of some size, a
# stopped process, a blocked system call), never by sleeping: the drivers
# are tests/ref/midrun_signals.py, lock_contention.py and
# input_changed_midrun.py, on process_control.py.
#
# tags: serial quick-untimed -- its signal and lock checks must end within
# seconds (its quick cases, closed descriptors, time nothing)
set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
TL=${TIME_LIMIT:-10}
FIX=$PWD/fixtures

case $ATTNRUN in
    /*) ;;
    */*) ATTNRUN=$PWD/$ATTNRUN ;;
esac
export ATTNRUN TIME_LIMIT=$TL

SUITE="runtime"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, reference.py
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

ulimit -c 0 2>/dev/null     # SIGQUIT/SIGXCPU against an old binary would dump core

T=$(mktemp -d "${TMPDIR:-/tmp}/attnrun-runtime.XXXXXX") || exit 1
MOUNTS=()
cleanup() {
    local m
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ALL=scores,weights,heads,output,q,k,v

# ---------------------------------------------------------------- helpers

# drive MODULE ARGS...: a driver of tests/ref under a hang guard of its own;
# what it printed in $drv.
drive() {
    drv=$(timeout -s KILL $((TL * 6 + 30)) "$PY" "$TESTS/ref/$1" "${@:2}" 2>"$T/driver.err")
    [ -n "$drv" ] || drv="driver failed: $(tail -n 1 "$T/driver.err")"
}

# values_ok NAME OUT GROUP IN HEADS [NAMES]: OUT's group against the reference.
values_ok() { expect_silent "$1" ref reference_values.py values "${@:2}"; }

ERR=$T/stderr
# Runs attnrun under the hang guard; stdout in $T/stdout, stderr in $ERR; sets $rc.
# (The braces keep bash's "Killed" notice for a run the guard ended out of the log.)
run() {
    { timeout -s KILL "$TL" "$ATTNRUN" "$@" </dev/null >"$T/stdout" 2>"$ERR"; rc=$?; } 2>/dev/null
}

err1() { head -c 300 "$ERR" | head -n 2 | tr '\n' ' '; }
sha() { if [ -f "$1" ]; then sha256sum <"$1" | cut -d ' ' -f 1; else echo -; fi; }
temps_in() { [ -d "$1" ] && find "$1" -maxdepth 1 -name '*.attnrun-tmp-*' -printf '%f\n'; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }

workdir() {
    local d=$T/$1
    rm -rf "$d"
    mkdir -p "$d"
    echo "$d"
}

# verdict NAME WANT TEXT DIR OUT [IN SUM]: the last run ($rc, $ERR) exited
# WANT, not by a signal nor the hang guard; on failure stderr is one line
# starting "attnrun: " that matches each extended regex of TEXT (several
# joined by "&&") and OUT (when given) does not exist; on success OUT does;
# DIR holds no temporary; IN's sha256 is SUM (when given).  Prints FAIL and
# returns 1, or returns 0 (the caller says ok or checks more).  Temporaries
# it found are removed, so that the next check starts clean.
verdict() {
    _verdict "$@"
    local status=$?
    [ -d "$4" ] && find "$4" -maxdepth 1 -name '*.attnrun-tmp-*' -delete
    return $status
}
_verdict() {
    local name=$1 want=$2 text=$3 dir=$4 out=$5 in=${6:-} sum=${7:-} pat missing= problem
    local rest=$text
    while [ "$want" -ne 0 ] && [ -n "$rest" ]; do
        pat=${rest%%&&*}
        if [ "$pat" = "$rest" ]; then rest=; else rest=${rest#*&&}; fi
        grep -qE -- "$pat" "$ERR" || missing="$missing '$pat'"
    done
    problem=$(run_problem "$rc" "$want" "$ERR")
    if [ -n "$problem" ]; then
        bad "$name: $problem"
    elif [ -n "$missing" ]; then
        bad "$name: the message lacks$missing: $(err1)"
    elif [ "$want" -ne 0 ] && [ -n "$out" ] && [ -e "$out" ]; then
        bad "$name: exit $rc but OUT exists"
    elif [ "$want" -eq 0 ] && [ -n "$out" ] && [ ! -f "$out" ]; then
        bad "$name: exit 0 but no OUT"
    elif [ -n "$(temps_in "$dir")" ]; then
        bad "$name: left $(temps_in "$dir" | tr '\n' ' ')"
    elif [ -n "$in" ] && [ "$(sha "$in")" != "$sum" ]; then
        bad "$name: the input changed"
    else
        return 0
    fi
    return 1
}

# The driver's answer "RC [more]" into rc and drv_rest; FAIL NAME when it is
# not a status (the run ended before its event, or the driver failed).
take_rc() {
    read -r rc drv_rest <<<"$drv"
    if ! is_int "${rc:-x}"; then
        bad "$1: $drv"
        rc=
        return 1
    fi
}

# Runs as the unprivileged user 65534 (nobody): as_nobody CMD ARGS...
as_nobody() {
    setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
}

# A copy of attnrun in a 0755 directory and a 0777 work directory under a
# traversable $T, for the non-root checks; sets PUB_BIN and PUB_WORK.
public_dirs() {
    chmod 755 "$T"
    mkdir -p "$T/pub/bin"
    chmod 755 "$T/pub" "$T/pub/bin"
    cp "$ATTNRUN" "$T/pub/bin/attnrun" && chmod 755 "$T/pub/bin/attnrun"
    PUB_BIN=$T/pub/bin/attnrun
    PUB_WORK=$(workdir "pub/${1:-work}")
    chmod 777 "$PUB_WORK"
}

can_switch_user() {
    [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && as_nobody true 2>/dev/null
}

# ------------------------------------------- 1. closed standard descriptors

check_closed_descriptors() {
    local d mode name args
    d=$(workdir fds)
    run "$FIX/batch_bias.h5" -o "$d/open.h5" --heads 4 --save $ALL
    if ! verdict "1 baseline" 0 "" "$d" "$d/open.h5"; then
        return
    fi
    values_ok "1 baseline run with open descriptors matches the reference" \
        "$d/open.h5" / "$FIX/batch_bias.h5" 4
    for mode in stdout stderr stdin all; do
        name="1 $mode closed: exit 0 and the same datasets, bitwise"
        : >"$ERR"
        args=("$FIX/batch_bias.h5" -o "$d/$mode.h5" --heads 4 --save "$ALL")
        case $mode in
            stdout) timeout -s KILL "$TL" "$ATTNRUN" "${args[@]}" </dev/null >&- 2>"$ERR" ;;
            stderr) timeout -s KILL "$TL" "$ATTNRUN" "${args[@]}" </dev/null >/dev/null 2>&- ;;
            stdin)  timeout -s KILL "$TL" "$ATTNRUN" "${args[@]}" <&- >/dev/null 2>"$ERR" ;;
            all)    timeout -s KILL "$TL" "$ATTNRUN" "${args[@]}" <&- >&- 2>&- ;;
        esac
        rc=$?
        verdict "$name" 0 "" "$d" "$d/$mode.h5" || continue
        expect_silent "$name" ref same_file.py datasets "$d/open.h5" "$d/$mode.h5"
    done

    timeout -s KILL "$TL" "$ATTNRUN" "$FIX/batch_bias.h5" --heads 4 --dry-run </dev/null >&- 2>"$ERR"
    rc=$?
    verdict "1 --dry-run with stdout closed: exit 1, 'standard output'" 1 "standard output" "$d" "" &&
        ok "1 --dry-run with stdout closed: exit 1, 'standard output'"

    mkdir "$d/err"
    : >"$ERR"
    timeout -s KILL "$TL" "$ATTNRUN" "$FIX/batch_bias.h5" -o "$d/err/out.h5" --heads 4 --x missing \
        </dev/null >/dev/null 2>&-
    rc=$?
    name="1 an error with stderr closed: exit 3, nothing left"
    if [ "$rc" -ne 3 ]; then
        bad "$name: exit $rc"
    elif [ -n "$(ls -A "$d/err")" ]; then
        bad "$name: left $(ls -A "$d/err" | tr '\n' ' ')"
    else
        ok "$name"
    fi
}

# ------------------------------------------- 2. IN changed while it is read

check_input_changed() {
    local d c how name
    d=$(workdir changed)
    # Each case: how IN changes (input_changed_midrun.py), the check.
    for c in "h5py-w|h5py File(IN, 'w') mid-run: exit 1, 'changed while it was read', nothing left" \
             "same-size|IN overwritten with the same size mid-run: exit 1, 'changed while it was read', nothing left" \
             "truncate|IN overwritten and truncated mid-run: exit 1, 'changed while it was read', nothing left" \
             "in-place|--in-place, IN overwritten mid-run: exit 1, IN keeps the producer's bytes"; do
        how=${c%%|*}
        name="2 ${c#*|}"
        cp "$T/long.h5" "$d/in.h5"
        rm -f "$d/out.h5" "$d"/.*.attnrun-tmp-*
        drive input_changed_midrun.py "$how" "$d" "$ERR"
        take_rc "$name" || continue
        if [ "$how" = in-place ]; then
            verdict "$name" 1 "changed while it was read" "$d" "" || continue
            if [ "$drv_rest" != same ]; then
                bad "$name: IN no longer holds the bytes written into it (attnrun renamed its copy over them)"
                continue
            fi
        else
            verdict "$name" 1 "changed while it was read" "$d" "$d/out.h5" || continue
        fi
        ok "$name"
    done
}

# ------------------------------------------- 3. locks and --wait

# contend NAME INPUT COMMAND [ARGS...]: d, a fresh work directory
# locks/NAME holding a copy of INPUT as in.h5, and the driver
# lock_contention.py COMMAND d ARGS... on it.
contend() {
    d=$(workdir "locks/$1")
    cp "$2" "$d/in.h5"
    drive lock_contention.py "$3" "$d" "${@:4}"
}

check_locks() {
    local d name

    # Two --in-place runs: the first is stopped mid-run (its copy made,
    # holding its lock) while the second starts.
    contend nowait "$T/long.h5" two_runs nowait "$T/err1" "$ERR"
    name="3 second --in-place without --wait while the first runs: exit 1 naming the lock and --wait"
    if take_rc "$name"; then
        local rc1 rest
        read -r rc1 rest <<<"$drv_rest"
        verdict "$name" 1 "lock&&--wait" "$d" "" && ok "$name"
        name="3 the first --in-place run then finishes: its group holds the reference values"
        if [ "$rc1" != 0 ]; then
            bad "$name: exit $rc1: $(head -c 300 "$T/err1")"
        elif [ -n "$(temps_in "$d")" ]; then
            bad "$name: left $(temps_in "$d")"
        else
            # the refused run's group /g2 must not be in IN
            values_ok "$name" "$d/in.h5" /g1 "$T/long.h5" 2 output /g2
        fi
    fi

    contend wait "$T/long.h5" two_runs wait "$T/err1" "$ERR"
    name="3 --wait: the second --in-place waits, both exit 0, IN holds both groups with reference values"
    if take_rc "$name"; then
        local rc1 waited
        read -r rc1 waited <<<"$drv_rest"
        [ "$waited" = blocked ] && name="$name (seen waiting in flock)"
        if [ "$rc" -ne 0 ]; then
            bad "$name: the --wait run exited $rc: $(err1)"
        elif [ "$rc1" != 0 ]; then
            bad "$name: the first run exited $rc1: $(head -c 300 "$T/err1")"
        elif [ -n "$(temps_in "$d")" ]; then
            bad "$name: left $(temps_in "$d")"
        else
            values_ok "$name" "$d/in.h5" /g1,/g2 "$T/long.h5" 2 output
        fi
    fi

    # An h5py program holding IN open for writing.
    contend sigterm "$FIX/batch_bias.h5" sigterm_while_waiting "$ERR"
    name="3 a --wait run sent SIGTERM while waiting: exit 1 'interrupted' within 5 s, IN unchanged"
    if take_rc "$name"; then
        if [ "$rc" -eq 137 ]; then
            bad "$name: still running 5 s after SIGTERM"
        elif verdict "$name" 1 "interrupted" "$d" ""; then
            case $drv_rest in
                same*) ok "$name" ;;
                *) bad "$name: IN changed" ;;
            esac
        fi
    fi

    contend held "$FIX/batch_bias.h5" held "$ERR"
    name="3 -o while h5py holds IN open for writing: exit 1 (not 3) naming the lock"
    if take_rc "$name"; then
        verdict "$name" 1 "lock" "$d" "$d/out.h5" &&
            { [ "$drv_rest" = same ] && ok "$name" || bad "$name: IN changed"; }
    fi

    contend held_wait "$FIX/batch_bias.h5" held_wait "$ERR"
    name="3 -o --wait waits for the h5py writer, then exit 0 with the reference values"
    if take_rc "$name"; then
        verdict "$name" 0 "" "$d" "$d/out.h5" &&
            values_ok "$name" "$d/out.h5" / "$FIX/batch_bias.h5" 4
    fi

    # The kinds of lock: probed with flock(2) while a run is stopped mid-run.
    contend kinds "$T/long.h5" kinds
    if take_rc "3 flock kinds"; then
        local o_sh o_ex i_sh i_ex
        read -r o_sh o_ex i_sh i_ex <<<"$drv_rest"
        name="3 an -o run holds a shared flock on IN"
        [ "$o_sh $o_ex" = "free held" ] && ok "$name" ||
            bad "$name: LOCK_SH $o_sh, LOCK_EX $o_ex (expected free, held)"
        name="3 an --in-place run holds an exclusive flock on IN"
        [ "$i_sh $i_ex" = "held held" ] && ok "$name" ||
            bad "$name: LOCK_SH $i_sh, LOCK_EX $i_ex (expected held, held)"
    fi
}

# ------------------------------------------- 8. FIFO and device inputs

check_special_inputs() {
    local d
    d=$(workdir special)
    mkfifo "$d/fifo.h5"
    mkdir "$d/out"
    run "$d/fifo.h5" -o "$d/out/out.h5" --heads 1
    verdict "8 IN a FIFO without a writer: exit 3 'not a regular file'" 3 "not a regular file" \
        "$d/out" "$d/out/out.h5" && [ -z "$(ls -A "$d/out")" ] &&
        ok "8 IN a FIFO without a writer: exit 3 'not a regular file'"
    run /dev/zero -o "$d/out/out.h5" --heads 1
    verdict "8 IN /dev/zero: exit 3" 3 "" "$d/out" "$d/out/out.h5" && [ -z "$(ls -A "$d/out")" ] &&
        ok "8 IN /dev/zero: exit 3"
}

# ------------------------------------------- 9. ulimit -v

check_address_limit() {
    local d v name
    if [ -n "${ATTN_TEST_SANITIZED:-}" ]; then
        skip "9 ulimit -v: the sanitizer build reserves terabytes of shadow memory"
        return
    fi
    for v in 100000 200000 400000; do
        d=$(workdir "ulimit_v/$v")
        name="9 ulimit -v $v: exit 1 'out of memory'"
        [ "$v" -ne 100000 ] && name="9 ulimit -v $v: exit 1 'out of memory' or exit 0 with the reference values"
        { (ulimit -v "$v" && exec timeout -s KILL "$TL" "$ATTNRUN" "$FIX/batch_bias.h5" -o "$d/out.h5" \
            --heads 4 </dev/null >/dev/null 2>"$ERR"); rc=$?; } 2>/dev/null
        if [ "$rc" -eq 0 ] && [ "$v" -ne 100000 ]; then
            verdict "$name" 0 "" "$d" "$d/out.h5" && values_ok "$name" "$d/out.h5" / "$FIX/batch_bias.h5" 4
        else
            verdict "$name" 1 "out of memory" "$d" "$d/out.h5" && ok "$name"
        fi
    done

    # The fixture under 200000 kB (refused at once, before the temporary
    # exists, instead of hanging), and the long run under
    # 1000000 kB (enough: the signal lands mid-run).  SIGTERM goes once the
    # temporary has 16 KiB, or after 2 s.
    for v in 200000 1000000; do
        d=$(workdir "ulimit_v/sigterm_$v")
        drive midrun_signals.py address_limit "$d" "$ERR" "$v" "$FIX/batch_bias.h5" "$T/long.h5"
        name="9 SIGTERM ends a run under ulimit -v $v within 5 s, nothing left"
        take_rc "$name" || continue
        if [ "$rc" -eq 137 ]; then
            bad "$name: still running 5 s after SIGTERM"
        elif [ "$rc" -eq 0 ]; then
            verdict "$name" 0 "" "$d" "$d/out.h5" && ok "$name (it finished first)"
        else
            verdict "$name" 1 "" "$d" "$d/out.h5" && ok "$name ($drv_rest: $(err1))"
        fi
    done
}

# ------------------------------------------- 11. signals, SIGPIPE, EPIPE

check_signals() {
    local d sig line sum
    local signals=(INT TERM HUP QUIT USR1 USR2 ALRM XCPU VTALRM PROF IO PWR RTMIN RTMAX)
    d=$(workdir signals)
    cp "$T/long.h5" "$d/in.h5"
    sum=$(sha "$d/in.h5")
    drive midrun_signals.py each "$d" "${signals[@]}"
    for sig in "${signals[@]}"; do
        local name="11 SIG$sig mid-run: exit 1 'interrupted' within 5 s, nothing left, IN unchanged"
        line=$(grep "^$sig " <<<"$drv")
        rc=${line#"$sig "}
        if [ -z "$line" ]; then
            bad "$name: ${drv:0:300}"
            continue
        elif ! is_int "$rc"; then
            bad "$name: $rc"
            continue
        fi
        ERR=$d/err_$sig
        verdict "$name" 1 "interrupted" "$d/sig/$sig" "$d/sig/$sig/out.h5" "$d/in.h5" "$sum" &&
            { [ -z "$(ls -A "$d/sig/$sig")" ] && ok "$name" || bad "$name: left $(ls -A "$d/sig/$sig")"; }
        ERR=$T/stderr
    done

    rm -rf "$d/sig" "$d"/err_*
    drive midrun_signals.py sigpipe "$d" "$ERR"
    local name="11 SIGPIPE mid-run is ignored: exit 0 with the reference values"
    if take_rc "$name"; then
        verdict "$name" 0 "" "$d" "$d/out.h5" "$d/in.h5" "$sum" &&
            values_ok "$name" "$d/out.h5" / "$T/long.h5" 2 output
    fi

    rm -f "$d/out.h5"
    drive midrun_signals.py epipe_progress "$d"
    name="11 --progress into a pipe closed early: exit 1 (EPIPE), no OUT, no temporary"
    if take_rc "$name"; then
        if [ "$rc" -eq 137 ]; then
            bad "$name: no answer within the time limit"
        elif [ "$rc" -gt 128 ]; then
            bad "$name: killed by signal $((rc - 128))"
        elif [ "$rc" -ne 1 ]; then
            bad "$name: exit $rc, expected 1"
        elif [ -e "$d/out.h5" ] || [ -n "$(temps_in "$d")" ]; then
            bad "$name: left $(find "$d" -mindepth 1 -maxdepth 1 ! -name in.h5 -printf '%f ')"
        elif [ "$(sha "$d/in.h5")" != "$sum" ]; then
            bad "$name: the input changed"
        else
            ok "$name"
        fi
    fi
}

# ------------------------------------------- 12. a signal during the final fsync

check_signal_in_fsync() {
    local d mode name sum
    if ! command -v strace >/dev/null; then
        skip "12 SIGINT during the final fsync: strace is not installed (Debian package strace)"
        return
    fi
    if ! strace -f -qq -o /dev/null -e trace=fsync -e inject=fsync:delay_exit=1000 true 2>/dev/null; then
        skip "12 SIGINT during the final fsync: strace cannot trace or inject here"
        return
    fi
    d=$(workdir fsync)
    for mode in -o --in-place; do
        name="12 SIGINT during the final fsync ($mode): exit 1 'interrupted', nothing left"
        cp "$FIX/toy.h5" "$d/in.h5"
        rm -f "$d/out.h5" "$d"/.*.attnrun-tmp-*
        sum=$(sha "$d/in.h5")
        [ "$mode" = --in-place ] && name="12 SIGINT during the final fsync (--in-place): exit 1 'interrupted', IN unchanged"
        drive midrun_signals.py fsync "$d" "$mode" "$ERR"
        take_rc "$name" || continue
        if [ "$mode" = -o ]; then
            verdict "$name" 1 "interrupted" "$d" "$d/out.h5" "$d/in.h5" "$sum" && ok "$name"
        else
            verdict "$name" 1 "interrupted" "$d" "" "$d/in.h5" "$sum" && ok "$name"
        fi
    done
}

# ------------------------------------------- 13. threads

check_threads() {
    local d name n cap threads sum
    d=$(workdir threads)
    run "$FIX/toy.h5" -o "$d/out.h5" --heads 1 --threads 100000
    name="13 --threads 100000: exit 2 'at most'"
    verdict "$name" 2 "at most" "$d" "$d/out.h5" && ok "$name"

    name="13 OMP_NUM_THREADS=100000: exit 0 with the reference values"
    OMP_NUM_THREADS=100000 run "$FIX/batch_bias.h5" -o "$d/out.h5" --heads 4
    verdict "$name" 0 "" "$d" "$d/out.h5" && values_ok "$name" "$d/out.h5" / "$FIX/batch_bias.h5" 4

    name="13 OMP_NUM_THREADS=100000 --dry-run: a threads line of at most 4 x nproc"
    # nproc itself obeys OMP_NUM_THREADS; the larger of the usable and installed counts
    n=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
    cap=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc --all)
    [ "$cap" -gt "$n" ] 2>/dev/null && n=$cap
    OMP_NUM_THREADS=100000 run "$FIX/batch_bias.h5" --heads 4 --dry-run
    threads=$(awk '$1 == "threads" { print $2 }' "$T/stdout")
    if [ "$rc" -ne 0 ]; then
        bad "$name: exit $rc: $(err1)"
    elif ! is_int "${threads:-x}"; then
        bad "$name: no threads line: $(head -c 200 "$T/stdout")"
    elif [ "$threads" -lt 1 ] || [ "$threads" -gt $((4 * n)) ]; then
        bad "$name: threads $threads, nproc $n"
    else
        ok "$name (threads $threads, nproc $n)"
    fi

    name="13 ulimit -u too small for threads (non-root) with --threads 8: exit 1 'cannot start', nothing left"
    if ! can_switch_user; then
        skip "$name: needs root and setpriv to run as user 65534"
        return
    fi
    public_dirs threads
    cp "$FIX/batch_bias.h5" "$PUB_WORK/in.h5"
    chmod 644 "$PUB_WORK/in.h5"
    sum=$(sha "$PUB_WORK/in.h5")
    # tasks (threads included) whose real user is 65534, which RLIMIT_NPROC counts
    n=$(cat /proc/[0-9]*/task/[0-9]*/status 2>/dev/null | awk '$1 == "Uid:" && $2 == 65534' | wc -l)
    : >"$ERR"
    timeout -s KILL "$TL" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
        env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        bash -c 'ulimit -u "$1" && shift && exec "$@"' - $((n + 1)) \
        "$PUB_BIN" "$PUB_WORK/in.h5" -o "$PUB_WORK/out.h5" --heads 4 --threads 8 \
        </dev/null >/dev/null 2>"$ERR"
    rc=$?
    verdict "$name" 1 "cannot start" "$PUB_WORK" "$PUB_WORK/out.h5" "$PUB_WORK/in.h5" "$sum" &&
        ok "$name"
}

# ------------------------------------------- 14. bad -o values

check_bad_outputs() {
    local d o force name before after
    d=$(workdir bad_o)
    mkdir "$d/dir" "$d/existing_dir"
    cp "$FIX/toy.h5" "$d/in.h5"
    for o in '' dir/out.h5/ - existing_dir; do
        for force in "" --force; do
            name="14 -o '$o'${force:+ $force}: exit 2, one line, nothing created"
            before=$(cd "$d" && find . | sort | tr '\n' ' ')
            (cd "$d" && timeout -s KILL "$TL" "$ATTNRUN" in.h5 --heads 1 -o "$o" $force \
                </dev/null >/dev/null 2>"$ERR")
            rc=$?
            after=$(cd "$d" && find . | sort | tr '\n' ' ')
            if verdict "$name" 2 "" "$d" "" && verdict "$name" 2 "" "$d/dir" "" &&
                verdict "$name" 2 "" "$d/existing_dir" ""; then
                if [ "$before" != "$after" ]; then
                    bad "$name: created or removed something: before: $before after: $after"
                else
                    ok "$name"
                fi
            fi
            rm -rf "$d/-"
        done
    done
}

# ------------------------------------------- 15. long output names

check_long_names() {
    local d len base name left
    d=$(workdir names)
    mkdir "$d/in"
    cp "$T/long.h5" "$d/in/long.h5"
    for len in 240 255; do
        base=$(printf 'n%.0s' $(seq $((len - 3)))).h5
        name="15 a $len-byte output name: exit 0, the reference values, no temporary"
        run "$FIX/toy.h5" -o "$d/$base" --heads 1
        verdict "$name" 0 "" "$d" "$d/$base" && values_ok "$name" "$d/$base" / "$FIX/toy.h5" 1
        rm -f "$d/$base"
    done

    mkdir "$d/kill"
    base=$(printf 'k%.0s' $(seq 247)).h5
    drive midrun_signals.py long_name_kill "$d/kill" "$d/in/long.h5" "$base" "$ERR"
    name="15 SIGKILL mid-run with a 250-byte name: only a temporary .*.attnrun-tmp-?????? of <= 255 bytes remains"
    if take_rc "$name"; then
        left=$(ls -A "$d/kill")
        if [ "$rc" -ne 137 ]; then
            bad "$name: exit $rc, expected 137 (killed)"
        elif [ -e "$d/kill/$base" ]; then
            bad "$name: OUT exists after SIGKILL"
        elif [ -n "$left" ] && grep -Evq '^\..*\.attnrun-tmp-.{6}$' <<<"$left"; then
            bad "$name: left something not named as a temporary: ${left:0:300}"
        elif [ -n "$left" ] && [ "$(awk '{ print length($0) }' <<<"$left" | sort -n | tail -n 1)" -gt 255 ]; then
            bad "$name: a name longer than 255 bytes"
        else
            ok "$name (${#left}-byte name)"
        fi
    fi
}

# ------------------------------------------- 16. umask as a non-root user

check_umask() {
    local m want name mode
    if ! can_switch_user; then
        skip "16 umask 222 and 277 as a non-root user: needs root and setpriv to run as user 65534"
        return
    fi
    public_dirs umask
    cp "$FIX/batch_bias.h5" "$PUB_WORK/in.h5"
    chmod 644 "$PUB_WORK/in.h5"
    for m in 222 277; do
        want=$([ "$m" = 222 ] && echo 444 || echo 400)
        name="16 umask $m as a non-root user: exit 0, the reference values, OUT mode 0$want"
        : >"$ERR"
        timeout -s KILL "$TL" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
            bash -c 'umask "$1" && shift && exec "$@"' - "$m" \
            "$PUB_BIN" "$PUB_WORK/in.h5" -o "$PUB_WORK/out_$m.h5" --heads 4 \
            </dev/null >/dev/null 2>"$ERR"
        rc=$?
        verdict "$name" 0 "" "$PUB_WORK" "$PUB_WORK/out_$m.h5" || continue
        mode=$(stat -c %a "$PUB_WORK/out_$m.h5")
        if [ "$mode" != "$want" ]; then
            bad "$name: mode $mode"
        else
            values_ok "$name" "$PUB_WORK/out_$m.h5" / "$FIX/batch_bias.h5" 4
        fi
    done
}

# ------------------------------------------- 17. --in-place onto a small tmpfs

check_in_place_tmpfs() {
    local d small name sum real
    name="17 --in-place through a symlink onto a 1 MiB tmpfs: exit 1 naming 'free' and the tmpfs, IN unchanged"
    if [ "$(id -u)" -ne 0 ]; then
        skip "$name: needs root to mount a tmpfs"
        return
    fi
    d=$(workdir tmpfs)
    small=$d/small
    mkdir "$small" "$d/big"
    if ! mount -t tmpfs -o size=1m tmpfs "$small" 2>/dev/null; then
        skip "$name: cannot mount a tmpfs here"
        return
    fi
    MOUNTS+=("$small")
    # 544 KB: fits the tmpfs once, not twice
    ref attention_inputs.py random "$small/in.h5" 64 64 32
    ln -s "$small/in.h5" "$d/big/link.h5"
    sum=$(sha "$small/in.h5")
    real=$(realpath "$small")
    run "$d/big/link.h5" --in-place --heads 2
    if verdict "$name" 1 "free" "$small" "" "$small/in.h5" "$sum" &&
        verdict "$name" 1 "" "$d/big" "" "$small/in.h5" "$sum"; then
        if ! grep -qF -- "$small" "$ERR" && ! grep -qF -- "$real" "$ERR"; then
            bad "$name: the message does not name $small: $(err1)"
        elif [ ! -L "$d/big/link.h5" ]; then
            bad "$name: the symbolic link was replaced"
        else
            ok "$name"
        fi
    fi
    umount "$small" && unset 'MOUNTS[-1]'
}

# ------------------------------------------- 18. a fake clock

check_fake_clock() {
    local d c t expected name out
    if ! command -v cc >/dev/null; then
        skip "18 fake clock: no C compiler (cc) to build the LD_PRELOAD shim"
        return
    fi
    d=$(workdir clock)
    if ! out=$(ref fake_clock.py build "$d" 2>&1); then
        skip "18 fake clock: the shim does not build: $(printf '%s\n' "$out" | tail -n 1)"
        return
    fi
    # Each case: the fake clock's seconds, the created_utc attnrun writes
    # (an ISO-8601 date within years 1 to 9999, else "@seconds").
    for c in "86400 1970-01-02T00:00:00Z" \
             "0 1970-01-01T00:00:00Z" \
             "1000000000 2001-09-09T01:46:40Z" \
             "253402300799 9999-12-31T23:59:59Z" \
             "253402300800 @253402300800" \
             "-62135596800 0001-01-01T00:00:00Z" \
             "-62135596801 @-62135596801" \
             "100000000000000 @100000000000000" \
             "-100000000000000 @-100000000000000" \
             "9223372036854775807 @9223372036854775807" \
             "-9223372036854775808 @-9223372036854775808"; do
        read -r t expected <<<"$c"
        name="18 FAKE_TIME=$t: exit 0, created_utc $expected"
        rm -f "$d/out.h5"
        FAKE_TIME=$t preloaded "$d/fake_time.so" run "$FIX/toy.h5" -o "$d/out.h5" --heads 1
        verdict "$name" 0 "" "$d" "$d/out.h5" || continue
        expect_silent "$name" ref provenance_check.py created_utc "$d/out.h5" "$expected"
    done
}

# ------------------------------------------- 21. threads that wait sleep

# libgomp reads its wait policy before main; attnrun sets it first
# (cmd/main.c), whatever the environment: OMP_DISPLAY_ENV=verbose makes
# libgomp print what it read.  Passive means a spin count of 0.  Cases: the
# shell's environment (with "_"), one without "_" (attnrun executes itself
# again), and one asking for spinning.
check_waiting() {
    local d c name
    d=$(workdir waiting)
    for c in "with the shell's environment|env" \
             "without _ (executed again)|env -i PATH=$PATH" \
             "with OMP_WAIT_POLICY=active GOMP_SPINCOUNT=100000|env OMP_WAIT_POLICY=active GOMP_SPINCOUNT=100000"; do
        name="21 threads wait passively $c"
        name=${name%%|*}
        rm -f "$d/out.h5"
        { timeout -s KILL "$TL" ${c#*|} OMP_DISPLAY_ENV=verbose "$ATTNRUN" "$T/long.h5" \
              -o "$d/out.h5" --heads 2 --save output --threads 2 \
              </dev/null >"$T/stdout" 2>"$ERR"; rc=$?; } 2>/dev/null
        if [ $rc -ne 0 ]; then
            bad "$name: exit $rc: $(err1)"
        elif ! grep -q "GOMP_SPINCOUNT = '0'" "$ERR" || ! grep -q "OMP_WAIT_POLICY = 'PASSIVE'" "$ERR"; then
            bad "$name: libgomp read $(grep -E "OMP_WAIT_POLICY|GOMP_SPINCOUNT" "$ERR" | tr -s ' \n' ' ')"
        else
            values_ok "$name; the output right" "$d/out.h5" / "$T/long.h5" 2 output
        fi
    done
}

# ---------------------------------------------------------------- main

if [ ! -x "$ATTNRUN" ]; then
    bad "setup: $ATTNRUN is not an executable (run make first)"
elif ! "$PY" -c 'import numpy, h5py' 2>/dev/null; then
    bad "setup: $PY lacks numpy or h5py (set PYTHON)"
elif ! ref attention_inputs.py random "$T/long.h5" 16384 4 8 1; then
    bad "setup: cannot write the inputs"
else
    for check in ${RUNTIME_CHECKS:-closed_descriptors input_changed locks special_inputs address_limit \
                 signals signal_in_fsync threads bad_outputs long_names umask in_place_tmpfs fake_clock \
                 waiting}; do
        "check_$check"
    done
fi
finish
