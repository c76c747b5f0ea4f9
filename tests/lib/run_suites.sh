#!/bin/sh
# Runs each test suite given (a program, "bash,SCRIPT" for a shell script,
# or "python,SCRIPT" for a Python one, run by $PYTHON or python3), lets it
# print its own results, and ends with one line counting
# the suites: "suites: N passed, M failed".  Exits 1 when any failed.
passed=0
failed=0
for suite in "$@"; do
    case $suite in
        bash,*) bash "${suite#bash,}" ;;
        python,*) "${PYTHON:-python3}" "${suite#python,}" ;;
        *) "$suite" ;;
    esac
    if [ $? -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        suite=${suite#bash,}
        echo "suite failed: ${suite#python,}"
    fi
done
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
