#!/usr/bin/env bash
# tests/cli/test_doc_commands.sh - every command README.md, docs/*.md and
# bench/README.md show runs as written, and prints what they show.
#
# tests/ref/doc_commands.py extracts the commands (lines starting `$ ` in
# code blocks, Python sessions starting `>>> `) and runs each page's in
# order, in one bash per page, in a directory of its own prepared as the
# top of the source tree, with `attnrun` the build under test and `python3`
# $PY on PATH; it compares what they print with what the page shows.  Its
# header states the convention, and its table SKIP the few commands that
# cannot run here, with the reason for each.  First the runner checks
# itself: on a page of planted mistakes, and on a copy of README.md with
# one number of an output changed, it must fail exactly where they are.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_doc_commands.sh     # from the repository root
#
# Environment: ATTNRUN (default build/attnrun), PYTHON (a python with
# numpy, h5py and xarray; default /usr/bin/python3).  Each check prints
# "ok WHERE", "FAIL WHERE: WHY" or "skip WHERE: WHY"; the last line is
# "doc_commands: N passed, M failed"; the exit status is 1 when M > 0.
set -u

SUITE="doc_commands"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, ref/doc_commands.py
. "$TESTS/lib/checks.sh"

suite_setup doc_commands numpy h5py xarray

ref doc_commands.py selftest "$ROOT" "$ATTNRUN" "$T/self" >"$T/self.log" 2>&1
report_verdicts "$T/self.log" $?

ref doc_commands.py run "$ROOT" "$ATTNRUN" "$T/pages" >"$T/pages.log" 2>&1
report_verdicts "$T/pages.log" $?

finish
