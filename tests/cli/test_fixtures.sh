#!/usr/bin/env bash
# Run attnrun on every fixture and compare its outputs with the float64
# reference written by fixtures/make_fixtures.py.
#
#   bash tests/cli/test_fixtures.sh          (from the repository root)
#
# Environment: ATTNRUN (default build/attnrun), H5DIFF (default h5diff),
# H5DUMP (default h5dump), PYTHON (default /usr/bin/python3; only needed to
# regenerate the fixtures: "${PYTHON:-/usr/bin/python3}" fixtures/make_fixtures.py).
#
# For each line "<case> TAB <args>" of fixtures/cases.tsv it runs
#   $ATTNRUN fixtures/<case>.h5 -o OUT <args>
# requires exit status 0, and then for each line "<case> TAB <path> TAB <delta>"
# of fixtures/tolerances.tsv checks OUT:<path> against
# fixtures/<case>.expected.h5:<path>:
#   * same current dimensions and same floating type (class and size; byte
#     order is free), read from h5dump -H.  This is needed because h5diff 1.10
#     reports datasets of different shape (or rank) as "Some objects are not
#     comparable" and still exits 0, so h5diff alone would pass a shape bug;
#     and it compares float32 with float64 silently.
#   * h5diff -d <delta> exits 0.  Checked by hand with h5diff 1.10.8:
#       -inf vs -inf         -> equal (exit 0)
#       -inf vs finite       -> a difference (exit 1), even with a huge delta
#       -inf vs +inf / NaN   -> a difference (exit 1)
#       NaN vs finite        -> a difference (exit 1), either order
#       NaN vs NaN           -> equal (the expected files never hold NaN)
#       missing object       -> exit 2
#       -n C caps the printed differences but still exits 1.
# Finally no dataset among scores/weights/heads/output/q/k/v may exist in OUT
# (in the case's group or in /) unless the expected file has it too, e.g. q is
# only written when --save asks for it.
#
# Prints "ok <case> <what>" or "FAIL <case> <what> ..." per check and ends with
# "fixtures: N passed, M failed"; exits 1 when M > 0.
set -u

H5DIFF=${H5DIFF:-h5diff}
H5DUMP=${H5DUMP:-h5dump}
FIX=fixtures
OUTPUT_NAMES="scores weights heads output q k v"

SUITE=fixtures
. "$(dirname "$0")/../lib/checks.sh"
indent() { sed 's/^/    /' | head -n "${1:-40}"; }

for tool in "$H5DIFF" "$H5DUMP"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        bad "setup: $tool not found (Debian: apt-get install hdf5-tools)"
        finish
    fi
done
if [ ! -x "$ATTNRUN" ]; then
    bad "setup: attnrun not found at $ATTNRUN (build it, or set ATTNRUN)"
    finish
fi
for f in "$FIX/cases.tsv" "$FIX/tolerances.tsv"; do
    if [ ! -r "$f" ]; then
        bad "setup: $f missing (run from the repository root)"
        finish
    fi
done

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# "<current dimensions>|<type without byte order>" of one dataset, or "" if
# there is none.  The first DATATYPE/DATASPACE lines of h5dump -H belong to
# the dataset itself (its attributes follow).
h5_meta() {
    "$H5DUMP" -H -d "$2" "$1" 2>/dev/null | awk '
        /DATATYPE/ && t == "" { t = $2; sub(/(LE|BE)$/, "", t) }
        /DATASPACE/ && s == "" { s = $0; sub(/^ *DATASPACE */, "", s); sub(/ \/ .*/, "", s) }
        END { if (t != "" && s != "") print s "|" t }'
}

has_dataset() {
    "$H5DUMP" -H -d "$2" "$1" >/dev/null 2>&1
}

while IFS=$'\t' read -r -u 3 case args; do
    case $case in '' | '#'*) continue ;; esac
    in=$FIX/$case.h5
    exp=$FIX/$case.expected.h5
    out=$tmp/$case.out.h5
    read -r -a argv <<<"${args:-}"

    # Tolerance rows of this case: "path TAB delta".
    rows=$(awk -F '\t' -v c="$case" '$1 == c { print $2 "\t" $3 }' "$FIX/tolerances.tsv")
    if [ -z "$rows" ]; then
        bad "$case tolerances (no rows in $FIX/tolerances.tsv)"
        continue
    fi

    "$ATTNRUN" "$in" -o "$out" ${argv[@]+"${argv[@]}"} \
        </dev/null >"$tmp/$case.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] || [ ! -f "$out" ]; then
        bad "$case run (exit $rc): $ATTNRUN $in -o OUT ${args:-}"
        indent <"$tmp/$case.log"
        while IFS=$'\t' read -r path delta; do
            bad "$case $path (not checked: attnrun failed)"
        done <<<"$rows"
        continue
    fi
    ok "$case run"

    groups="/"
    while IFS=$'\t' read -r path delta; do
        g=${path%/*}
        g=${g:-/}
        case " $groups " in *" $g "*) ;; *) groups="$groups $g" ;; esac

        m_out=$(h5_meta "$out" "$path")
        m_exp=$(h5_meta "$exp" "$path")
        if [ -z "$m_exp" ]; then
            bad "$case $path (missing from $exp: regenerate the fixtures)"
            continue
        fi
        if [ -z "$m_out" ]; then
            bad "$case $path (missing from the output)"
            continue
        fi
        if [ "$m_out" != "$m_exp" ]; then
            bad "$case $path (shape/type: output $m_out, expected $m_exp)"
            continue
        fi
        # attnrun adds attributes the reference lacks (description, axis
        # labels and scales); the values are what is compared here.
        report=$("$H5DIFF" -r -n 10 -d "$delta" --exclude-attribute "$path" \
                 "$out" "$exp" "$path" "$path" 2>&1)
        rc=$?
        if [ "$rc" -ne 0 ] || grep -qi 'not comparable' <<<"$report"; then
            bad "$case $path (h5diff -d $delta exit $rc; left: output, right: expected)"
            indent 30 <<<"$report"
            continue
        fi
        ok "$case $path"
    done <<<"$rows"

    # Nothing written that was not asked for.
    extra=""
    for g in $groups; do
        for name in $OUTPUT_NAMES; do
            p=${g%/}/$name
            if has_dataset "$out" "$p" && ! has_dataset "$exp" "$p"; then
                extra="$extra $p"
            fi
        done
    done
    if [ -n "$extra" ]; then
        bad "$case unrequested datasets in the output:$extra"
    else
        ok "$case no unrequested datasets"
    fi

    # The same case with only the output saved takes the online softmax
    # (no maps kept): it must meet the same tolerance on the output.
    online=$tmp/$case.online.h5
    "$ATTNRUN" "$in" -o "$online" ${argv[@]+"${argv[@]}"} --save output \
        </dev/null >"$tmp/$case.online.log" 2>&1
    rc=$?
    while IFS=$'\t' read -r path delta; do
        case $path in */output) ;; *) continue ;; esac
        if [ "$rc" -ne 0 ]; then
            bad "$case $path online softmax (attnrun exit $rc)"
            indent <"$tmp/$case.online.log"
            continue
        fi
        report=$("$H5DIFF" -r -n 10 -d "$delta" --exclude-attribute "$path" \
                 "$online" "$exp" "$path" "$path" 2>&1)
        if [ $? -ne 0 ] || grep -qi 'not comparable' <<<"$report"; then
            bad "$case $path online softmax (h5diff -d $delta; left: output, right: expected)"
            indent 30 <<<"$report"
        else
            ok "$case $path online softmax"
        fi
    done <<<"$rows"
done 3<"$FIX/cases.tsv"

finish
