#!/usr/bin/env bash
# tests/cli/test_view.sh - attnrun view: one self-contained HTML page of a
# results file:
#   * the page's bytes (tests/ref/view_check.py): every map's embedded
#     values against the results file read with h5py (level 0 bit for bit;
#     a pooled level's block max and mean, and each thumbnail, against
#     numpy), the colour bars against attnrun plot's (plot_check.py), the
#     tokens, the census against heads_ref (float64), the items and layers
#     (--items, --groups, an --append index in its appended order, a
#     rollout file); NaN, -inf, negative and unnormalised weights; a 1 MB
#     token cut; maps of no query; the safety of the page: a CSP that
#     forbids everything but its own style and script (by their hashes), no
#     URL, no element that fetches, hostile tokens nowhere as markup;
#   * --max-size: a page pooled to fit, at the level expected, within the
#     size, and one line saying so (none with -q); at full resolution
#     without it; peak memory within the budget plus 64 MiB on a map of
#     4096 x 4096;
#   * the page in headless Chromium (tests/ref/view_browser.py, Selenium):
#     thumbnails, colours of sampled cells, tooltips, clicks, keys, the
#     fragment, back and forward, census sorting, the token view, items,
#     the rollout, PNG saving, no console error, no request;
#   * refusals: tokens of the wrong length, layers of other heads, no
#     weights, a missing file or group, a rollout of other results: exit 3;
#     --items outside the file, a page no level fits into --max-size, an
#     existing OUT without --force, --force on a file attnrun did not
#     write, a name not .html, no -o: exit 2; each one `attnrun: ` line,
#     no output and no temporary left; --force replaces a page;
#   * with FAULT_ATTNRUN: each allocation failing in turn ends with exit 1
#     and one line, and leaves nothing.
# About 40 runs and one browser session, ~30 s on two cores.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_view.sh     # from the repository root
#
# Environment:
#   ATTNRUN        the binary under test (default: build/attnrun)
#   FAULT_ATTNRUN  the fault-injection build (optional: its sweep is skipped without)
#   PYTHON         a python with numpy, h5py and selenium (default /usr/bin/python3)
#   TIME_LIMIT     hang guard of one run in seconds (default 60)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "view: N passed, M failed"; the exit status is 1 when M > 0.
set -u

FAULT_ATTNRUN=${FAULT_ATTNRUN:-}
TIME_LIMIT=${TIME_LIMIT:-60}

SUITE="view"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"

suite_setup view numpy h5py
case $FAULT_ATTNRUN in
    ""|/*) ;;
    *) FAULT_ATTNRUN=$PWD/$FAULT_ATTNRUN ;;
esac
self_check view_check.py
if ! ref view_check.py inputs "$T" >"$T/inputs.log" 2>&1 ||
    ! ref rollout_ref.py inputs "$T" >>"$T/inputs.log" 2>&1; then
    bad "setup: cannot write the inputs: $(tail -n 2 "$T/inputs.log" | tr '\n' ' ')"
    finish
fi

# page_check NAME ARGS...: view_check.py's checks of a page.
page_check() {
    local log=$T/check.log status
    ref view_check.py "${@:2}" >"$log" 2>&1
    status=$?
    report_verdicts "$log" "$status"
}

O=$T/pages
mkdir "$O"

# ------------------------------------------------------------- the pages

if runs "hand-made layers, three items, hostile tokens" 0 view "$T/hand.h5" -o "$O/hand.html"; then
    page_check hand page "$O/hand.html" "$T/hand.h5"
    [ ! -s "$T/stderr" ] && ok "a page at full resolution says nothing" \
        || bad "it said: $(head -c 300 "$T/stderr")"
fi
quick_done
if runs "--items 2,0 --groups /c,/a" 0 view "$T/hand.h5" -o "$O/some.html" --items 2,0 --groups /c,/a; then
    page_check some page "$O/some.html" "$T/hand.h5" --items 2,0 --groups /c,/a
fi
if runs "NaN, -inf, negative and unnormalised weights" 0 view "$T/odd.h5" -o "$O/odd.html"; then
    page_check odd page "$O/odd.html" "$T/odd.h5"
fi
if runs "a 1 MB token" 0 view "$T/bigtoken.h5" -o "$O/bigtoken.html"; then
    page_check bigtoken page "$O/bigtoken.html" "$T/bigtoken.h5"
    size=$(stat -c %s "$O/bigtoken.html")
    [ "$size" -lt 200000 ] && ok "a 1 MB token is cut, not embedded ($size bytes)" \
        || bad "the page of a 1 MB token is $size bytes"
fi
runs "maps of no query" 0 view "$T/empty.h5" -o "$O/empty.html"
if runs "20 items, no --items" 0 view "$T/many.h5" -o "$O/many.html"; then
    page_check many page "$O/many.html" "$T/many.h5"
    file_text "$T/stderr"
    [ "${TEXT%$'\n'}" = "attnrun: view: items 0 to 15 of 20 shown; --items chooses others" ] &&
        ok "one line says which items the page shows" || bad "the line on items: ${TEXT:0:300}"
fi

# an --append index in its appended order (/layer1 first), with tokens and
# its rollout
ok_layers=1
for i in 1 0 2; do
    run "$T/model.h5" -o "$T/append.h5" --append --group /layer$i --x /l$i/X --weights-group /l$i \
        --heads 4 -q --tokens /tok --save weights
    [ "$rc" -eq 0 ] || ok_layers=0
done
run rollout "$T/append.h5" -o "$T/rollout.h5"
if [ "$ok_layers" -eq 1 ] && [ "$rc" -eq 0 ] &&
    runs "an --append index with --rollout" 0 view "$T/append.h5" --rollout "$T/rollout.h5" \
        -o "$O/append.html"; then
    page_check append page "$O/append.html" "$T/append.h5" --rollout "$T/rollout.h5" \
        --groups /layer1,/layer0,/layer2
else
    bad "setup: the --append index and its rollout: $(head -c 300 "$T/stderr")"
fi

# --max-size: pooled to fit, and said so
if runs "--max-size 300K pools 300 x 277 maps" 0 view "$T/long.h5" -o "$O/long.html" --max-size 300K; then
    page_check long page "$O/long.html" "$T/long.h5" --level 2
    size=$(stat -c %s "$O/long.html")
    [ "$size" -le 307200 ] && ok "the pooled page is within --max-size ($size bytes)" \
        || bad "the pooled page is $size bytes, over 307200"
    file_text "$T/stderr"
    [[ $TEXT == "attnrun: view: maps pooled to fit --max-size"*"4 x 4 (level 2)"* ]] &&
        [ "$(wc -l <"$T/stderr")" -eq 1 ] && ok "one line says what was pooled" \
        || bad "the line on pooling: ${TEXT:0:300}"
fi
if runs "-q: pooled, silently" 0 view "$T/long.h5" -o "$O/quiet.html" --max-size 300K -q; then
    [ ! -s "$T/stderr" ] && ok "-q says nothing" || bad "-q said: $(head -c 200 "$T/stderr")"
fi
if runs "the default --max-size keeps them whole" 0 view "$T/long.h5" -o "$O/whole.html"; then
    page_check whole level "$O/whole.html" 0
fi

# memory: one map at a time, a block of rows of it
"$PY" -c "
import h5py, numpy as np
with h5py.File('$T/big.h5', 'w') as f:
    g = f.create_group('a'); g.attrs['attnrun_version'] = 'hand-made'
    d = g.create_dataset('weights', (1, 1, 4096, 4096), np.float32)
    rng = np.random.default_rng(1)
    for r in range(0, 4096, 512):
        d[0, 0, r:r + 512] = rng.random((512, 4096), np.float32) / 4096
"
if command -v /usr/bin/time >/dev/null && [ -z "${ATTN_TEST_SANITIZED:-}" ]; then
    /usr/bin/time -f %M -o "$T/rss" "$ATTNRUN" view "$T/big.h5" -o "$O/big.html" --max-size 16M -q \
        2>"$T/stderr"
    rc=$?
    kib=$(tail -n 1 "$T/rss")
    if [ "$rc" -eq 0 ] && [ "$kib" -le $(( (16 + 64) * 1024 )) ]; then
        ok "a 64 MiB map into a 16M page: peak RSS $kib KiB, within the budget plus 64 MiB"
    else
        bad "a 64 MiB map into a 16M page: exit $rc, peak RSS $kib KiB: $(head -c 200 "$T/stderr")"
    fi
else
    echo "skip peak RSS: no /usr/bin/time, or a sanitized build"
fi

# ------------------------------------------------------------- in a browser

if "${PYTHON:-/usr/bin/python3}" -c "import selenium" 2>/dev/null && [ -x /usr/bin/chromedriver ]; then
    "${PYTHON:-/usr/bin/python3}" "$TESTS/ref/view_browser.py" "$O" "$T" >"$T/browser.log" 2>&1
    report_verdicts "$T/browser.log" $?
    # the screenshot of docs/view.md (make pictures), taken the same way
    "${PYTHON:-/usr/bin/python3}" "$TESTS/ref/view_browser.py" shot "$O/hand.html" "$T/shot.png" \
        "#view=head&item=0&layer=/b&head=1" >"$T/shot.log" 2>&1
    report_verdicts "$T/shot.log" $?
    "$PY" -c "
import struct, sys
b = open(sys.argv[1], 'rb').read(24)
w, h = struct.unpack('>II', b[16:24])
sys.exit(0 if b[:8] == b'\x89PNG\r\n\x1a\n' and w == 1400 and 600 <= h <= 1000 else 1)
" "$T/shot.png" && ok "a screenshot: a PNG of the 1400-pixel-wide window" || bad "the screenshot is no PNG 1400 pixels wide"
else
    bad "headless Chromium: python3-selenium or chromium-driver is missing (scripts/install-deps.sh installs them)"
fi
if command -v firefox-esr >/dev/null; then
    "$PY" "$TESTS/ref/view_browser.py" firefox "$O/hand.html" "$T" >"$T/firefox.log" 2>&1
    report_verdicts "$T/firefox.log" $?
else
    bad "headless Firefox: firefox-esr is missing (scripts/install-deps.sh installs it)"
fi

# ------------------------------------------------------------- refusals

E=$T/refused
mkdir "$E"
refuse "tokens of the wrong length" 3 "query_token has 2 tokens" view "$T/wronglen.h5" -o "$E/x.html"
refuse "layers of other heads" 3 "choose layers with one number of heads" view "$T/heads.h5" -o "$E/x.html"
refuse "no weights" 3 "--save weights" view "$T/noweights.h5" -o "$E/x.html"
refuse "a missing file" 3 "cannot read input" view "$T/none.h5" -o "$E/x.html"
refuse "a missing group" 3 "results are in /a, /b, /c" view "$T/hand.h5" --groups /zz -o "$E/x.html"
refuse "a rollout file of other results" 3 "roll out this results file" \
    view "$T/hand.h5" --rollout "$T/rollout.h5" -o "$E/x.html"
refuse "--rollout of a file that is no rollout" 3 "not a file of attnrun rollout" \
    view "$T/hand.h5" --rollout "$T/hand.h5" -o "$E/x.html"
refuse "--items outside the file" 2 "holds 3 items (0 to 2); item 7" \
    view "$T/hand.h5" --items 0,7 -o "$E/x.html"
refuse "a page no level fits" 2 "pass a larger --max-size" view "$T/hand.h5" --max-size 1K -o "$E/x.html"
refuse "a name not .html" 2 "must end in .html or .htm" view "$T/hand.h5" -o "$E/x.h5"
refuse "no -o" 2 "give -o VIEW.html" view "$T/hand.h5"
refuse "a bad --items" 2 "expected item numbers" view "$T/hand.h5" --items 2-1 -o "$E/x.html"
refuse "an unknown option" 2 "did you mean --items" view "$T/hand.h5" --itmes 1 -o "$E/x.html"
cp "$O/hand.html" "$E/page.html"
echo "not a page" >"$E/mine.html"
refuse "an existing page without --force" 2 "use --force" view "$T/hand.h5" -o "$E/page.html"
refuse "--force on a file attnrun did not write" 2 "is not a page attnrun wrote" \
    view "$T/hand.h5" -o "$E/mine.html" --force
[ "$(cat "$E/mine.html")" = "not a page" ] && ok "that file is untouched" || bad "mine.html changed"
if runs "--force replaces a page" 0 view "$T/hand.h5" -o "$E/page.html" --force --items 1; then
    page_check force page "$E/page.html" "$T/hand.h5" --items 1
fi
run view --help
[ "$rc" -eq 0 ] && grep -q "Usage: attnrun view RESULTS.h5 -o VIEW.html" "$T/stdout" && ok "--help" \
    || bad "--help: exit $rc"

# ------------------------------------------------------------- faults

if [ -n "$FAULT_ATTNRUN" ]; then
    alloc_sweep "view" 600 "$T/bigtoken.h5" view IN -o OUT.html
else
    echo "skip the allocation sweep: no FAULT_ATTNRUN"
fi

finish
