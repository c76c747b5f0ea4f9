#!/usr/bin/env bash
# tests/cli/test_sysfail.sh - failures of the system while attnrun opens its
# input or output are exit 1 (runtime) with the system's reason, never
# "not an HDF5 file" (exit 3), and never leave a partial output or a
# changed input:
#   * ulimit -n 4, 5 and 6, with -o OUT and with --in-place: exit 1 naming
#     "Too many open files" (4: no descriptor is left for HDF5 to open the
#     input), or a run that fits in them and succeeds with valid results;
#   * an unreadable input (chmod 000) and an unreadable results file for
#     attnrun plot: exit 1 naming "Permission denied" (skipped as root,
#     whom permission bits do not stop).
# Not under valgrind (make memcheck): it needs descriptors of its own.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_sysfail.sh     # from the repository root
set -u

SUITE=sysfail
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
suite_setup sysfail numpy h5py

if ! ref errors_cases.py inputs "$T" >"$T/make.log" 2>&1; then
    bad "setup: making the inputs: $(tail -n 1 "$T/make.log")"
    finish
fi
GOOD=$T/good.h5

# The files under a directory, each with its checksum.
listing() { (cd "$1" && find . -type f -exec sha256sum {} + | LC_ALL=C sort); }

# limited N DIR ARGS...: attnrun ARGS under ulimit -n N, in DIR, within 20 s;
# sets RC, its stderr in $T/stderr.
limited() {
    local n=$1 dir=$2
    shift 2
    (cd "$dir" && ulimit -n "$n" && exec timeout -s KILL 20 "$ATTNRUN" "$@") \
        </dev/null >/dev/null 2>"$T/stderr"
    RC=$?
}

# failed_cleanly BEFORE DIR: exit 1, one line naming the system's reason
# ($REASON), DIR's files as BEFORE (no output, no temporary, the input
# unchanged); prints why not.
failed_cleanly() {
    local before=$1 dir=$2 why
    why=$(run_problem "$RC" 1 "$T/stderr")
    [ -n "$why" ] && { echo "$why"; return; }
    grep -qF -- "$REASON" "$T/stderr" || { echo "exit 1 without '$REASON': $(head -c 300 "$T/stderr")"; return; }
    grep -q "not an HDF5 file" "$T/stderr" && { echo "called the file not HDF5: $(head -c 300 "$T/stderr")"; return; }
    [ "$(listing "$dir")" = "$before" ] || echo "files changed: $(diff <(echo "$before") <(listing "$dir") | tail -n +2 | tr '\n' ' ' | head -c 300)"
}

# ---- ulimit -n: -o OUT and --in-place ---------------------------------------
REASON="Too many open files"
for n in 4 5 6; do
    for mode in out in-place; do
        d=$T/limit-$n-$mode
        mkdir -p "$d"
        cp "$GOOD" "$d/in.h5"
        before=$(listing "$d")
        if [ "$mode" = out ]; then
            limited "$n" "$d" in.h5 -o out.h5 --heads 2
        else
            limited "$n" "$d" in.h5 --in-place --group /r --heads 2
        fi
        name="ulimit -n $n, $( [ "$mode" = out ] && echo "-o OUT" || echo "--in-place")"
        if [ "$RC" -eq 0 ] && [ "$n" -gt 4 ]; then         # the run fitted: it must be right
            why=""
            if [ "$mode" = out ]; then
                [ "$(listing "$d" | grep -cv ' ./out.h5$')" -eq 1 ] || why="files beside OUT: $(ls -A "$d" | tr '\n' ' ')"
                [ -z "$why" ] && ! ref errors_cases.py valid-output "$d/out.h5" >"$T/check" 2>&1 &&
                    why="OUT: $(tail -n 1 "$T/check")"
            else
                [ "$(ls -A "$d")" = in.h5 ] || why="files beside IN: $(ls -A "$d" | tr '\n' ' ')"
                [ -z "$why" ] && ! ref errors_cases.py valid-output "$d/in.h5" /r >"$T/check" 2>&1 &&
                    why="IN's /r: $(tail -n 1 "$T/check")"
            fi
            [ -z "$why" ] && ok "$name: the run fits and succeeds" || bad "$name: exit 0 but $why"
        else
            why=$(failed_cleanly "$before" "$d")
            [ -z "$why" ] && ok "$name: exit 1 '$REASON', nothing written, IN as it was" ||
                bad "$name: $why"
        fi
    done
done

# With no descriptor left for HDF5 the input cannot even be looked at: the
# message says so in the system's words.
d=$T/limit-4-message
mkdir -p "$d"
cp "$GOOD" "$d/in.h5"
limited 4 "$d" in.h5 -o out.h5 --heads 2
if grep -qxF "attnrun: in.h5: cannot read input: $REASON" "$T/stderr"; then
    ok "ulimit -n 4: 'attnrun: in.h5: cannot read input: $REASON'"
else
    bad "ulimit -n 4: exit $RC: $(head -c 300 "$T/stderr")"
fi

# ---- unreadable files: EACCES -----------------------------------------------
REASON="Permission denied"
if [ "$(id -u)" -eq 0 ]; then
    echo "skip unreadable input and results (chmod 000): root reads them anyway"
else
    d=$T/unreadable
    mkdir -p "$d"
    cp "$GOOD" "$d/in.h5"
    "$ATTNRUN" "$GOOD" -o "$d/results.h5" --heads 2 >/dev/null 2>&1 || bad "setup: a run for the results file failed"
    chmod 000 "$d/in.h5" "$d/results.h5"
    before=$(cd "$d" && ls -A)
    for args in "in.h5 -o out.h5 --heads 2" "in.h5 --in-place --heads 2" "plot results.h5 -o p.png"; do
        # shellcheck disable=SC2086
        (cd "$d" && exec timeout -s KILL 20 "$ATTNRUN" $args) </dev/null >/dev/null 2>"$T/stderr"
        RC=$?
        why=$(run_problem "$RC" 1 "$T/stderr")
        [ -z "$why" ] && ! grep -qF "$REASON" "$T/stderr" && why="no '$REASON': $(head -c 300 "$T/stderr")"
        [ -z "$why" ] && [ "$(cd "$d" && ls -A)" != "$before" ] && why="files changed: $(cd "$d" && ls -A | tr '\n' ' ')"
        [ -z "$why" ] && ok "unreadable (chmod 000): attnrun $args: exit 1 '$REASON'" ||
            bad "unreadable (chmod 000): attnrun $args: $why"
    done
    chmod 644 "$d/in.h5" "$d/results.h5"
fi

finish
