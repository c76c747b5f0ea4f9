# tests/lib/checks.sh - the counters and verdict shared by the command-line
# suites: set SUITE, then source this file.  finish prints
# "<SUITE>: N passed, M failed" and exits nonzero when any check failed;
# run_problem judges how a run of attnrun ended.
pass=0
fail=0
ok()  { echo "ok $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
finish() {
    echo "$SUITE: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}

# pycheck ARGS... <<'EOF' check EOF: runs a Python check (modules from
# $T and the tests directory, $TESTS) and prints its output.
pycheck() { PYTHONPATH=$T${TESTS:+:$TESTS/ref} "$PY" - "$@" 2>&1; }

# expect_py NAME ARGS... <<'EOF' check EOF: ok when the check exits 0
# (with its output, if any), else FAIL with its last line.
expect_py() {
    local name=$1 out
    shift
    if out=$(pycheck "$@"); then
        ok "$name${out:+ ($out)}"
    else
        bad "$name: $(printf '%s\n' "$out" | tail -n 1)"
    fi
}

# suite_setup NAME MODULE...: the usual start of a suite -- ATTNRUN made
# absolute, the binary and python modules checked (else a failed setup
# check ends the suite), and T a temporary directory removed on exit.
suite_setup() {
    local name=$1
    shift
    case $ATTNRUN in
        /*) ;;
        */*) ATTNRUN=$PWD/$ATTNRUN ;;
    esac
    if [ ! -x "$ATTNRUN" ]; then
        bad "setup: attnrun not found at $ATTNRUN"
        finish
    fi
    if ! "$PY" -c "import $(echo "$@" | tr ' ' ',')" 2>/dev/null; then
        bad "setup: $PY lacks one of: $*"
        finish
    fi
    T=$(mktemp -d "${TMPDIR:-/tmp}/attnrun-$name.XXXXXX") || exit 1
    trap 'rm -rf "$T"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# run_problem RC STATUS STDERR: why a run of attnrun that ended with RC
# (its messages in the file STDERR) did not end as documented for STATUS:
# killed by the hang guard (timeout -s KILL: 137) or another signal, a
# different status, or -- for a failure -- not exactly one stderr line
# starting "attnrun: ".  Prints nothing when it did.
# self_check SCRIPT: runs a reference's own checks ($PY $TESTS/SCRIPT) and
# reports them; a reference that fails its own checks ends the suite.
self_check() {
    local out
    if out=$(PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/$1" 2>&1); then
        ok "$1 self-check ($(printf '%s' "$out" | tail -n 1))"
    else
        bad "$1 self-check: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ' | head -c 400)"
        finish
    fi
}

# report_verdicts LOG STATUS: counts the "ok ..." and "FAIL ..." lines a
# checker wrote to LOG (other lines are shown indented); a checker that
# ended with a nonzero STATUS fails too.
report_verdicts() {
    local line
    while IFS= read -r line; do
        case $line in
            "ok "*) ok "${line#ok }" ;;
            "FAIL "*) bad "${line#FAIL }" ;;
            *) echo "    $line" ;;
        esac
    done <"$1"
    [ "$2" -eq 0 ] || bad "$(basename "$1" .log) ended with status $2: $(tail -n 2 "$1" | tr '\n' ' ')"
}

run_problem() {
    local rc=$1 status=$2 stderr=$3
    if [ "$rc" -eq 137 ]; then
        echo "no answer within the time limit (killed)"
    elif [ "$rc" -gt 128 ]; then
        echo "killed by signal $((rc - 128)): $(head -c 300 "$stderr")"
    elif [ "$rc" -ne "$status" ]; then
        echo "exit $rc, expected $status: $(head -c 300 "$stderr")"
    elif [ "$status" -ne 0 ] && { [ "$(wc -l <"$stderr")" -ne 1 ] || ! grep -q '^attnrun: ' "$stderr"; }; then
        echo "stderr is not one 'attnrun: ' line: $(head -c 300 "$stderr")"
    fi
}
