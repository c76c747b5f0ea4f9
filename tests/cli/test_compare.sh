#!/usr/bin/env bash
# tests/cli/test_compare.sh - scripts/compare-builds.py, the check HACKING.md
# gives for a change that should change nothing for users: it finds two
# copies of one build the same, and tells a build that writes different
# numbers, or fails, from the one before.
set -u

SUITE=compare
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"
suite_setup compare h5py

compare() { "$PY" "$ROOT/scripts/compare-builds.py" "$@" --work "$T/work" >"$T/log" 2>&1; }

# HACKING.md's command, with BEFORE a copy of this build.
BEFORE="$T/before/attnrun"
mkdir -p "$T/before" && cp "$ATTNRUN" "$BEFORE"
expect_usage() {
    local what=$1 expected=$2
    shift 2
    "$PY" "$ROOT/scripts/compare-builds.py" "$@" >"$T/log" 2>&1
    local rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "$expected" "$T/log"; then
        ok "usage: $what"
    else
        bad "usage: $what: exit $rc: $(tail -1 "$T/log")"
    fi
}
expect_usage "a set that does not exist" "--only fixture: no set fixture (choose from fixtures," \
    "$BEFORE" "$ATTNRUN" --only fixture
expect_usage "a program that does not exist" "$T/none is not an executable file" \
    "$T/none" "$ATTNRUN"
quick_done      # the quick tier: the usage errors only

compare "$BEFORE" "$ATTNRUN" --only fixtures,presets
rc=$? fixtures=$(grep -c '^same fixture' "$T/log") presets=$(grep -c '^same preset' "$T/log")
# Three runs a fixture (as listed, and each softmax path with every output),
# two a preset (the presets as attnrun's refusal of an unknown one lists them).
cases=$(grep -cv '^#\|^$' "$ROOT/fixtures/cases.tsv")
named=$("$ATTNRUN" in.h5 -o out.h5 --preset none 2>&1 | sed -n 's/.*(choose from \([^)]*\)).*/\1/p')
count=$(echo "$named" | tr ',' '\n' | grep -c .)
if [ "$rc" -eq 0 ] && [ "$fixtures" -eq $((3 * cases)) ] && [ "$presets" -eq $((2 * count)) ] &&
    grep -q "^$((fixtures + presets)) comparisons: $((fixtures + presets)) the same, 0 not$" "$T/log"; then
    ok "a copy of the build: $fixtures fixture and $presets preset comparisons the same"
else
    bad "a copy of the build: exit $rc, $fixtures fixtures of $((3 * cases)), $presets presets of $((2 * count)): $(tail -3 "$T/log")"
fi

# A build that writes one number one bit off (the first weight of each
# run, tests/lib/one_bit_off.sh): exit 1, and a FAIL line naming /weights
# for each run with every output; the online path keeps no weights, so its
# runs are the same.
export ATTNRUN PY
compare "$BEFORE" "$TESTS/lib/one_bit_off.sh" --only fixtures
rc=$? failed=$(grep -c '^FAIL fixture [a-z0-9_]*, full: /[a-z/]*weights: values differ (1 elements)' "$T/log")
online=$(grep -c '^same fixture [a-z0-9_]*, online$' "$T/log")
if [ "$rc" -eq 1 ] && [ "$failed" -eq "$cases" ] && [ "$online" -eq "$cases" ]; then
    ok "a build one bit off: exit 1, each of the $cases runs with every output FAIL, none online"
else
    bad "a build one bit off: exit $rc, $failed and $online of $cases: $(grep -m2 FAIL "$T/log"; tail -1 "$T/log")"
fi

# A build that adds a setting (a cap on the scores): exit 1, the setting's
# attribute named.
mkdir -p "$T/changed"
printf '#!/bin/sh\nexec %s --softcap 2 "$@"\n' "$ATTNRUN" >"$T/changed/attnrun"
chmod +x "$T/changed/attnrun"
compare "$BEFORE" "$T/changed/attnrun" --only fixtures
rc=$?
if [ "$rc" -eq 1 ] &&
    grep -q '^FAIL fixture toy, full: /@softcap: attribute values 0.0 vs 2.0$' "$T/log"; then
    ok "a build with another setting: exit 1, the attribute named"
else
    bad "a build with another setting: exit $rc: $(grep -m1 FAIL "$T/log")"
fi

# A build that fails every run: exit 1, the failing side and its status.
printf '#!/bin/sh\necho "attnrun: broken" >&2\nexit 3\n' >"$T/changed/attnrun"
compare "$BEFORE" "$T/changed/attnrun" --only fixtures
rc=$?
if [ "$rc" -eq 1 ] && grep -q '^FAIL fixture toy as listed: new exit 3: attnrun: broken$' "$T/log"; then
    ok "a build that fails: exit 1, the side and its message"
else
    bad "a build that fails: exit $rc: $(grep -m1 FAIL "$T/log") ... $(tail -n 3 "$T/log" | tr '\n' '|')"
fi

# Usage errors: exit 2 and a line saying what to give.
finish
