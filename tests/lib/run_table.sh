# tests/lib/run_table.sh - the tables of runs that test_models.sh,
# test_summaries.sh, test_store.sh and test_tokens.sh share: sourced after
# tests/lib/checks.sh, with ATTNRUN, PY, TESTS, TIME_LIMIT and T set.

# make_table MODULE [cases]: tests/ref/MODULE make $T/c writes the fixtures
# and $T/c/runs.tsv (one run a line, its case or name first); a failed
# setup ends the suite.  The check says how many runs (and with "cases",
# how many cases) the table holds.
make_table() {
    local count
    mkdir -p "$T/c" "$T/o"
    if ! PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/$1" make "$T/c" >"$T/mk.log" 2>&1; then
        bad "setup: generating the inputs failed: $(tail -n 3 "$T/mk.log")"
        finish
    fi
    # ATTN_TEST_CASE: only the cases it names (case_wanted); the quick tier:
    # only the first case.
    if [ -n "${ATTN_TEST_CASE:-}" ] || [ -n "$QUICK" ]; then
        local first
        first=$(head -n 1 "$T/c/runs.tsv" | cut -f1)
        while IFS= read -r line; do
            if [ -n "${ATTN_TEST_CASE:-}" ]; then
                case_wanted "${line%%$'\t'*}" && printf '%s\n' "$line"
            elif [ "${line%%$'\t'*}" = "$first" ]; then
                printf '%s\n' "$line"
            fi
        done <"$T/c/runs.tsv" >"$T/c/wanted.tsv"
        mv "$T/c/wanted.tsv" "$T/c/runs.tsv"
    fi
    count="$(wc -l <"$T/c/runs.tsv") runs"
    [ "${2:-}" = cases ] && count="$(cut -f1 "$T/c/runs.tsv" | sort -u | wc -l) cases, $count"
    ok "fixtures generated ($count)"
}

# run_table MODULE: make_table MODULE, the fixtures $T/c/<case>/in.h5 and
# runs.tsv lines "case TAB mode TAB attnrun options".  Then every run of the
# table: attnrun -q $T/c/<case>/in.h5 -o $T/o/<case>.<mode>.h5 OPTIONS under
# the hang guard.  Each run that ends with status 0 and writes its file is
# listed in $T/done.tsv ("case TAB mode TAB out TAB options"), each other
# is a FAIL; RUN_TABLE_FAILED counts those.
run_table() {
    local case mode args out rc argv
    make_table "$1" cases

    : >"$T/done.tsv"
    RUN_TABLE_FAILED=0
    while IFS=$'\t' read -r -u 3 case mode args; do
        read -r -a argv <<<"$args"
        out=$T/o/$case.$mode.h5
        timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "$T/c/$case/in.h5" -o "$out" "${argv[@]}" \
            </dev/null >"$T/o/$case.$mode.log" 2>&1
        rc=$?
        if [ "$rc" -ne 0 ] || [ ! -f "$out" ]; then
            bad "$case $mode: attnrun IN -o OUT $args: $(run_problem "$rc" 0 "$T/o/$case.$mode.log")"
            RUN_TABLE_FAILED=$((RUN_TABLE_FAILED + 1))
        else
            printf '%s\t%s\t%s\t%s\n' "$case" "$mode" "$out" "$args" >>"$T/done.tsv"
        fi
    done 3<"$T/c/runs.tsv"
}

# verify_table MODULE: tests/ref/MODULE verify $T/c $T/done.tsv, its
# verdicts counted.
verify_table() {
    PYTHONPATH=$TESTS/ref "$PY" "$TESTS/ref/$1" verify "$T/c" "$T/done.tsv" >"$T/verify.log" 2>&1
    report_verdicts "$T/verify.log" $?
}
