# tests/checks.sh - the counters and verdict shared by the command-line
# suites: set SUITE, then source this file.  finish prints
# "<SUITE>: N passed, M failed" and exits nonzero when any check failed.
pass=0
fail=0
ok()  { echo "ok $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
finish() {
    echo "$SUITE: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}
