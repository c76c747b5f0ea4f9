#!/usr/bin/env bash
# The installed product, used as its users use it:
#   * make install DESTDIR=STAGE PREFIX=/usr puts exactly the expected files
#     there, with sane modes: the program, libattn.a, libattn.so.X.Y.Z with
#     soname libattn.so.X and its two links, the public headers under
#     include/attn/ (each compiles on its own and includes no private
#     header), attn.pc and the man page;
#   * the shared library exports only attn_* names and carries its
#     dependencies; pkg-config reports the staged paths;
#   * examples/forward.c (at most 40 lines) builds against the staged tree
#     only, dynamically and statically, and prints the numbers a float64
#     numpy reference written from the formulas gives;
#   * the man page renders without warnings and has its sections (that it
#     names every option is tests/cli/test_options.sh's);
#   * cmd/ compiles against the staged include/attn/ alone and links
#     against the staged libattn.so: the command line uses public headers
#     only;
#   * make uninstall removes exactly what install put;
#   * no string in lib/ names a command-line option (the library's
#     messages speak of its own settings; attnrun adds the option).
#
#   bash tests/cli/test_install.sh          (from the repository root)
#
# Environment: ATTNRUN (the build's attnrun; default build/attnrun), MAKE
# (default make), PYTHON (default /usr/bin/python3), CC (default cc).
# Prints "ok ..." / "FAIL ..." per check and "install: N passed, M failed".
set -u

SUITE=install
MAKE=${MAKE:-make}
CC=${CC:-cc}
TESTS=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/lib/checks.sh
. "$TESTS/lib/checks.sh"
suite_setup install numpy

for tool in pkg-config readelf nm man groff; do
    command -v "$tool" >/dev/null 2>&1 || { bad "setup: $tool not found (make deps)"; finish; }
done

# The version, read here from the one place it is defined.
VERSION=$(sed -n 's/^#define ATTN_VERSION "\([0-9]*\.[0-9]*\.[0-9]*\)"$/\1/p' "$ROOT/include/attn/attn_common.h")
MAJOR=${VERSION%%.*}
[ -n "$VERSION" ] || { bad "setup: no ATTN_VERSION in include/attn/attn_common.h"; finish; }

STAGE=$T/stage
USR=$STAGE/usr
HEADERS=$(cd "$ROOT/include/attn" && echo *.h)   # include/attn/ is exactly what installs
# The build must not reach into the source tree or the environment's paths.
unset CPATH C_INCLUDE_PATH LIBRARY_PATH LD_LIBRARY_PATH PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
PC=(env PKG_CONFIG_PATH="$USR/lib/pkgconfig" PKG_CONFIG_LIBDIR=/nonexistent pkg-config)

# ---- make install ------------------------------------------------------------
# What a user installs: the plain build, also when the suites run under
# the sanitizers (a sanitized libattn.so would need its runtime preloaded).
if (cd "$ROOT" && umask 077 && "$MAKE" --no-print-directory install SANITIZE= DESTDIR="$STAGE" \
        PREFIX=/usr) >"$T/install.log" 2>&1; then
    ok "make install DESTDIR=... PREFIX=/usr (umask 077)"
else
    bad "make install: $(tail -n 5 "$T/install.log" | tr '\n' ' ')"
    finish
fi

# Every file, link and directory under the stage: "mode type path" (a link's
# target instead of its mode).
inventory() {
    (cd "$STAGE" && find . -mindepth 1 | sort | while IFS= read -r p; do
        if [ -L "$p" ]; then
            echo "link ${p#./} -> $(readlink "$p")"
        else
            echo "$(stat -c %a "$p") $(stat -c %F "$p" | tr ' ' _) ${p#./}"
        fi
    done)
}
{
    for d in usr usr/bin usr/include usr/include/attn usr/lib usr/lib/pkgconfig usr/share \
             usr/share/man usr/share/man/man1; do
        echo "755 directory $d"
    done
    echo "755 regular_file usr/bin/attnrun"
    for h in $HEADERS; do echo "644 regular_file usr/include/attn/$h"; done
    echo "644 regular_file usr/lib/libattn.a"
    echo "link usr/lib/libattn.so -> libattn.so.$MAJOR"
    echo "link usr/lib/libattn.so.$MAJOR -> libattn.so.$VERSION"
    echo "755 regular_file usr/lib/libattn.so.$VERSION"
    echo "644 regular_file usr/lib/pkgconfig/attn.pc"
    echo "644 regular_file usr/share/man/man1/attnrun.1"
} | sort >"$T/expected.txt"
inventory | sort >"$T/installed.txt"
if diff "$T/expected.txt" "$T/installed.txt" >"$T/diff.txt"; then
    ok "exactly the expected files, links and modes ($(wc -l <"$T/installed.txt") entries)"
else
    bad "installed tree differs (< expected, > installed): $(tr '\n' ' ' <"$T/diff.txt")"
fi

if "$USR/bin/attnrun" --version 2>&1 | grep -qx "attnrun $VERSION"; then
    ok "installed attnrun --version says $VERSION"
else
    bad "installed attnrun --version: $("$USR/bin/attnrun" --version 2>&1 | head -c 200)"
fi

# ---- the shared library ------------------------------------------------------
SO=$USR/lib/libattn.so.$VERSION
dynamic=$(readelf -d "$SO" 2>&1)
soname=$(printf '%s\n' "$dynamic" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libattn.so.$MAJOR" ] && ok "soname libattn.so.$MAJOR" || bad "soname '$soname', expected libattn.so.$MAJOR"
missing=""
for lib in libhdf5 libhdf5.*_hl libopenblas libdeflate libgomp libm; do
    printf '%s\n' "$dynamic" | grep '(NEEDED)' | grep -q "\[$lib[._]" || missing="$missing $lib"
done
[ -z "$missing" ] && ok "libattn.so needs HDF5, HDF5_hl, OpenBLAS, libdeflate, libgomp, libm" \
    || bad "libattn.so does not name its dependencies:$missing"
openmp_blas=/usr/lib/$($CC -print-multiarch)/openblas-openmp
if [ -e "$openmp_blas/libopenblas.so.0" ]; then
    if printf '%s\n' "$dynamic" | grep -E '\((RUN|R)PATH\)' | grep -q "$openmp_blas"; then
        ok "libattn.so finds the OpenMP OpenBLAS by its run path"
    else
        bad "libattn.so has no run path to $openmp_blas: $(printf '%s\n' "$dynamic" | grep PATH)"
    fi
fi
nm -D --defined-only "$SO" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sed 's/@.*//' | sort -u >"$T/exported.txt"
others=$(grep -v '^attn_' "$T/exported.txt" | head -n 5 | tr '\n' ' ')
if [ -z "$others" ] && grep -qx attn_forward "$T/exported.txt" && grep -qx attn_run "$T/exported.txt"; then
    ok "libattn.so exports attn_* only ($(wc -l <"$T/exported.txt") names, attn_forward and attn_run among them)"
else
    bad "exported names: not attn_*: '$others'; $(wc -l <"$T/exported.txt") in all"
fi

# ---- headers -----------------------------------------------------------------
private=""
for h in "$USR"/include/attn/*.h; do
    for inc in $(sed -n 's/^#include "\(.*\)"/\1/p' "$h"); do
        [ -e "$USR/include/attn/$inc" ] || private="$private $(basename "$h")->$inc"
    done
done
[ -z "$private" ] && ok "public headers include only public headers" || bad "private includes:$private"
for h in $HEADERS; do
    for mode in "-std=c11 -D_POSIX_C_SOURCE=200809L" "-std=gnu17" "-std=c99 -D_POSIX_C_SOURCE=200809L"; do
        # shellcheck disable=SC2086
        if printf '#include <attn/%s>\nint main(void) { return 0; }\n' "$h" |
                "$CC" $mode -Wall -Wextra -Wpedantic -Werror -I"$USR/include" -x c - -o "$T/h.out" \
                >"$T/h.log" 2>&1; then
            :
        else
            bad "<attn/$h> alone does not compile ($mode): $(head -n 3 "$T/h.log" | tr '\n' ' ')"
            continue 2
        fi
    done
    ok "<attn/$h> compiles on its own (c11, gnu17, c99; -Wall -Wextra -Wpedantic -Werror)"
done

# ---- pkg-config --------------------------------------------------------------
got=$(PKG_CONFIG_SYSROOT_DIR=$STAGE "${PC[@]}" --cflags --libs attn 2>&1 | xargs)
[ "$got" = "-I$USR/include -L$USR/lib -lattn" ] && ok "pkg-config --cflags --libs attn: $got" \
    || bad "pkg-config --cflags --libs attn (sysroot $STAGE): '$got'"
got=$("${PC[@]}" --modversion attn 2>&1)
[ "$got" = "$VERSION" ] && ok "pkg-config --modversion attn: $got" || bad "pkg-config --modversion attn: '$got'"
got=$("${PC[@]}" --define-prefix --static --libs attn 2>&1)
missing=""
for flag in "-L$USR/lib" -lattn -lhdf5_hl -lhdf5 -lopenblas -ldeflate -fopenmp -lm; do
    case " $got " in *" $flag "*) ;; *) missing="$missing $flag" ;; esac
done
[ -z "$missing" ] && ok "pkg-config --static --libs attn names what libattn.a needs" \
    || bad "pkg-config --static --libs attn lacks$missing: '$got'"

# ---- examples/forward.c against the staged tree ------------------------------
lines=$(wc -l <"$ROOT/examples/forward.c")
[ "$lines" -le 40 ] && ok "examples/forward.c has $lines lines (at most 40)" \
    || bad "examples/forward.c has $lines lines, more than 40"

# check_numbers NAME OUTPUT: the example's output against numpy float64
# (tests/ref/forward_example_check.py, written from the formulas), to 1e-9.
check_numbers() {
    "$PY" "$TESTS/ref/forward_example_check.py" "$2" >"$T/numbers.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ]; then
        ok "$1: the numpy float64 reference ($(tail -n 1 "$T/numbers.log"))"
    else
        bad "$1: $(tail -n 2 "$T/numbers.log" | tr '\n' ' ' | head -c 600)"
    fi
}

# Dynamic: exactly the line docs/library.md gives.
# shellcheck disable=SC2046
if (cd "$T" && "$CC" "$ROOT/examples/forward.c" $("${PC[@]}" --define-prefix --cflags --libs attn) \
        -o forward) >"$T/cc.log" 2>&1; then
    ok "forward.c builds with \$(pkg-config --cflags --libs attn) against the staged tree"
    if readelf -d "$T/forward" | grep '(NEEDED)' | grep -q "\[libattn.so.$MAJOR\]"; then
        ok "forward needs libattn.so.$MAJOR"
    else
        bad "forward does not need libattn.so.$MAJOR: $(readelf -d "$T/forward" | grep NEEDED | tr '\n' ' ')"
    fi
    if LD_LIBRARY_PATH=$USR/lib LD_DEBUG=libs "$T/forward" >"$T/forward.out" 2>"$T/forward.debug"; then
        loaded=$(sed -n 's/.*calling init: \(.*libattn\.so.*\)/\1/p' "$T/forward.debug" | head -n 1)
        [ "$loaded" = "$USR/lib/libattn.so.$MAJOR" ] && ok "forward ran with the staged libattn.so.$MAJOR" \
            || bad "forward loaded libattn from '$loaded'"
        check_numbers "forward (shared)" "$T/forward.out"
    else
        bad "forward (shared) failed: $(grep -v '^ *[0-9]*:' "$T/forward.debug" | head -n 3 | tr '\n' ' ')"
    fi
else
    bad "forward.c does not build against the staged tree: $(head -n 5 "$T/cc.log" | tr '\n' ' ')"
fi

# Static: libattn.a, then what it needs (docs/library.md).
# shellcheck disable=SC2046
if (cd "$T" && "$CC" "$ROOT/examples/forward.c" $("${PC[@]}" --define-prefix --cflags attn) \
        "$USR/lib/libattn.a" -Wl,--as-needed $("${PC[@]}" --define-prefix --static --libs attn) \
        -o forward_static) >"$T/cc.log" 2>&1; then
    if readelf -d "$T/forward_static" | grep '(NEEDED)' | grep -q libattn; then
        bad "forward_static still needs libattn.so"
    else
        ok "forward.c links statically against libattn.a (no libattn.so needed)"
    fi
    if "$T/forward_static" >"$T/forward_static.out" 2>"$T/forward_static.err"; then
        check_numbers "forward (static)" "$T/forward_static.out"
    else
        bad "forward_static failed: $(head -n 3 "$T/forward_static.err" | tr '\n' ' ')"
    fi
else
    bad "forward.c does not link against libattn.a: $(head -n 5 "$T/cc.log" | tr '\n' ' ')"
fi

# ---- the man page ------------------------------------------------------------
MAN=$USR/share/man/man1/attnrun.1
if MANWIDTH=80 man --warnings -E UTF-8 -l "$MAN" >"$T/man.txt" 2>"$T/man.err" && [ ! -s "$T/man.err" ]; then
    ok "man -l renders attnrun.1 without warnings ($(wc -l <"$T/man.txt") lines)"
else
    bad "man --warnings -l attnrun.1: $(head -n 5 "$T/man.err" | tr '\n' ' ')"
fi
groff -z -wall -man "$MAN" >"$T/groff.err" 2>&1 && [ ! -s "$T/groff.err" ] \
    && ok "groff -z -wall -man: no warnings" || bad "groff -wall: $(head -n 5 "$T/groff.err" | tr '\n' ' ')"
missing=""
for section in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" ENVIRONMENT FILES EXAMPLES "SEE ALSO"; do
    grep -qx "$section" "$T/man.txt" || missing="$missing '$section'"
done
[ -z "$missing" ] && ok "attnrun.1 has NAME ... SEE ALSO" || bad "attnrun.1 lacks sections:$missing"
# That it names exactly the options of each command's table and --help is
# tests/cli/test_options.sh's.

# ---- the command line on the public headers alone ---------------------------
# cmd/ built against the staged include/attn/ and libattn.so only (no lib/
# on the include path): it uses nothing but the public headers.
cmd_objects=()
cmd_failed=""
# (attnrun view's page is embedded from cmd/view/page/ by paths from the
# top of the tree, with the hashes the Makefile passes: the same here.)
hashes=(-DVIEW_CSS_SHA256="\"$(sh "$ROOT/scripts/page-hashes.sh" "$ROOT/cmd/view/page/view.css")\""
        -DVIEW_JS_SHA256="\"$(sh "$ROOT/scripts/page-hashes.sh" "$ROOT/cmd/view/page/view.js")\"")
for src in "$ROOT"/cmd/main.c "$ROOT"/cmd/*/*.c; do
    obj=$T/cmd_$(basename "$(dirname "$src")")_$(basename "$src" .c).o
    # shellcheck disable=SC2046
    if ! (cd "$ROOT" && "$CC" -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp -c "$src" -I"$USR/include/attn" \
            -I"$ROOT/cmd" "${hashes[@]}" $(pkg-config --cflags cairo) -o "$obj") >>"$T/cmd.log" 2>&1; then
        cmd_failed="$cmd_failed ${src#"$ROOT"/}"
    fi
    cmd_objects+=("$obj")
done
# shellcheck disable=SC2046
if [ -n "$cmd_failed" ]; then
    bad "cmd/ does not compile against include/attn alone:$cmd_failed: $(head -n 3 "$T/cmd.log" | tr '\n' ' ')"
elif "$CC" -fopenmp "${cmd_objects[@]}" $("${PC[@]}" --define-prefix --libs attn) \
        $(pkg-config --libs cairo) -lm -Wl,-rpath,"$USR/lib" -o "$T/attnrun_public" >"$T/cmd.log" 2>&1 &&
     "$T/attnrun_public" --version | grep -qx "attnrun $VERSION"; then
    ok "cmd/ builds against the staged include/attn and libattn.so alone, and runs"
else
    bad "cmd/ on the staged tree: $(head -n 3 "$T/cmd.log" | tr '\n' ' ')"
fi

# ---- make uninstall ----------------------------------------------------------
touch "$USR/lib/someone-elses.so" "$USR/include/attn/someone-elses.h"
if (cd "$ROOT" && "$MAKE" --no-print-directory uninstall SANITIZE= DESTDIR="$STAGE" PREFIX=/usr) \
        >"$T/uninstall.log" 2>&1; then
    left=$(cd "$STAGE" && find . \( -type f -o -type l \) | sort | tr '\n' ' ')
    [ "$left" = "./usr/include/attn/someone-elses.h ./usr/lib/someone-elses.so " ] \
        && ok "make uninstall removes exactly what install put (others' files stay)" \
        || bad "after make uninstall: '$left'"
    rm -f "$USR/include/attn/someone-elses.h"
    (cd "$ROOT" && "$MAKE" --no-print-directory uninstall SANITIZE= DESTDIR="$STAGE" PREFIX=/usr) >/dev/null 2>&1
    [ ! -e "$USR/include/attn" ] && ok "make uninstall removes include/attn/ once it is empty" \
        || bad "include/attn/ left behind empty"
else
    bad "make uninstall: $(tail -n 5 "$T/uninstall.log" | tr '\n' ' ')"
fi

# ---- the library speaks of its own settings, not of options -----------------
# Every string literal of lib/ (adjacent ones joined, comments skipped;
# tests/ref/install_strings_check.py): none may name an option such as
# --force or -o.
"$PY" "$TESTS/ref/install_strings_check.py" "$ROOT"/lib/*/*.c "$ROOT"/lib/*/*.h "$ROOT"/lib/*/*.inc \
    "$ROOT"/include/attn/*.h >"$T/strings.log" 2>&1
if [ $? -eq 0 ]; then
    ok "no string of lib/ names a command-line option ($(tail -n 1 "$T/strings.log"))"
else
    bad "$(head -c 1500 "$T/strings.log")"
fi

# ... and attnrun names the option for every hint the library can give.
hints=$(sed -n 's/^ *\(ATTN_HINT_[A-Z_]*\)[ ,=].*/\1/p' "$ROOT/include/attn/attn_common.h" |
        grep -v -e '^ATTN_HINT_NONE$' -e '^ATTN_HINT_COUNT$')
missing=""
for hint in $hints; do
    grep -q "^ *\[$hint\] = \"..*\"," "$ROOT/cmd/cli/hints.c" || missing="$missing $hint"
done
if [ -z "$hints" ]; then
    bad "no ATTN_HINT_ values found in include/attn/attn_common.h"
elif [ -z "$missing" ]; then
    ok "attnrun turns each of the $(echo "$hints" | wc -w) library hints into its option"
else
    bad "cmd/cli/hints.c has no option text for:$missing"
fi

finish
