#!/bin/sh
# Runs each test suite given (a program, or "bash,SCRIPT" for a shell
# script), lets it print its own results, and ends with one line counting
# the suites: "suites: N passed, M failed".  Exits 1 when any failed.
passed=0
failed=0
for suite in "$@"; do
    case $suite in
        bash,*) bash "${suite#bash,}" ;;
        *) "$suite" ;;
    esac
    if [ $? -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "suite failed: ${suite#bash,}"
    fi
done
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
