# tests/lib/checks.sh - the counters and verdict shared by the command-line
# suites: set SUITE, then source this file.  finish prints
# "<SUITE>: N passed, M failed" and exits nonzero when any check failed;
# run_problem judges how a run of attnrun ended.
# What every suite runs: attnrun, and Debian's Python (numpy, h5py); the
# repository's root, above TESTS (tests/), when the suite set that.
ATTNRUN=${ATTNRUN:-build/attnrun}
PY=${PYTHON:-/usr/bin/python3}
ROOT=$(dirname "${TESTS:-tests}")
QUICK=
[ "${ATTN_TEST_TIER:-full}" = quick ] && QUICK=1

pass=0
fail=0
# ATTN_TEST_TIMES set: each verdict ends with the seconds since the last
# (where a suite spends its time).
_last=${EPOCHREALTIME/./}
_took() {
    [ -z "${ATTN_TEST_TIMES:-}" ] && return
    local now=${EPOCHREALTIME/./}
    printf -v "$1" ' [+%d.%03d s]' $(((now - _last) / 1000000)) $(((now - _last) / 1000 % 1000))
    _last=$now
}
# In the quick tier (below) a suite ends after its first QUICK_CHECKS
# (default 2) passed checks, unless it ends sooner at its quick_done.
ok()  {
    local took=
    _took took
    echo "ok $*$took"
    pass=$((pass + 1))
    [ -n "$QUICK" ] && [ "$pass" -ge "${QUICK_CHECKS:-2}" ] && quick_done
    return 0
}
# With ATTN_TEST_FAIL_FAST set (make mutate), the first failed check ends
# the suite.
bad() {
    local took=
    _took took
    echo "FAIL $*$took"
    fail=$((fail + 1))
    [ -z "${ATTN_TEST_FAIL_FAST:-}" ] || finish
}
finish() {
    echo "$SUITE: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}

# The tiers (tests/README.md): with ATTN_TEST_TIER=quick (make test-quick,
# tests/lib/runner.py --tier quick) a suite runs its first, fastest cases:
# it stops at its quick_done, or after QUICK_CHECKS checks have passed.
# QUICK is 1 then, empty otherwise, for a suite that picks its quick cases
# another way.
quick_done() {
    [ -z "$QUICK" ] && return 0
    echo "(the quick tier ends $SUITE here; make test runs the rest)"
    finish
}

# case_wanted NAME: whether a case of a table (run_table.sh) is run: every
# case, or with ATTN_TEST_CASE=WORDS only those whose name holds WORDS.
case_wanted() {
    [ -z "${ATTN_TEST_CASE:-}" ] && return 0
    case $1 in *"$ATTN_TEST_CASE"*) return 0 ;; esac
    return 1
}

# ref MODULE ARGS...: runs tests/ref/MODULE (a check, a generator, a
# driver) with $PY.
ref() { "$PY" "$TESTS/ref/$1" "${@:2}"; }

# The stand-in BLAS that computes a row of C by its place in the block
# (tests/lib/blas_by_place.c).  build_by_place builds it into $T and sets
# BY_PLACE to its path (empty, after a FAIL, when it cannot be built);
# by_place COMMAND ARGS... runs COMMAND (a program or a function, such as
# run) with it preloaded.
build_by_place() {
    BY_PLACE=$T/blas_by_place.so
    "${CC:-cc}" -shared -fPIC -O2 -o "$BY_PLACE" "$TESTS/lib/blas_by_place.c" -ldl -lm \
        2>"$T/cc.log" && return
    bad "setup: cannot build tests/lib/blas_by_place.c: $(head -c 300 "$T/cc.log")"
    BY_PLACE=
}
by_place() { preloaded "$BY_PLACE" "$@"; }

# preloaded LIB COMMAND ARGS...: COMMAND (a program or a function) with the
# shared library LIB preloaded, and a sanitized build's ASan told not to
# insist on coming first.
preloaded() {
    LD_PRELOAD=$1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "${@:2}"
}

# expect NAME COMMAND... [+ COMMAND...]...: ok NAME when every COMMAND
# exits 0 (what they printed shown after the name), else FAIL NAME with
# the last line the first failing one printed.
expect() {
    local name=$1 out="" said cmd
    shift
    while [ $# -gt 0 ]; do
        cmd=()
        while [ $# -gt 0 ] && [ "$1" != + ]; do cmd+=("$1"); shift; done
        [ $# -gt 0 ] && shift
        if ! said=$("${cmd[@]}" 2>&1); then
            bad "$name: $(printf '%s\n' "${said:-${cmd[*]} failed}" | tail -n 1)"
            return 1
        fi
        out=$out$said
    done
    ok "$name${out:+ ($out)}"
}

# expect_silent NAME COMMAND...: ok NAME when COMMAND exits 0 and prints
# nothing, else FAIL NAME with the last line it printed.
expect_silent() {
    local name=$1 out
    shift
    if out=$("$@" 2>&1) && [ -z "$out" ]; then
        ok "$name"
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
    T=$(mktemp -d "${TMPDIR:-/tmp}/attnrun-$name.XXXXXX") || exit 1
    trap 'py_worker_stop; rm -rf "$T"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # the worker imports the modules (and says which it lacks), or, without
    # one, a Python of its own does
    if ! py_worker_start "$@" && ! "$PY" -c "import $(echo "$@" | tr ' ' ',')" 2>/dev/null; then
        bad "setup: $PY lacks one of: $*"
        finish
    fi
}

# py_worker_start [MODULE...]: one Python for the suite
# (tests/lib/pyworker.py), numpy, h5py and the MODULEs imported once; from
# then on PY is tests/lib/pyclient, which runs each script forked from it
# as $PY would have run it.  ATTN_TEST_NO_WORKER set: every script in a
# Python of its own, as before.
py_worker_start() {
    [ -n "${ATTN_TEST_NO_WORKER:-}" ] && return 1
    local said=
    # the runner's worker, shared by its suites (tests/lib/runner.py),
    # where it runs: asked, in a fork of it, whether it has the MODULEs
    if [ -n "${ATTN_SHARED_PYWORKER:-}" ] && [ -p "$ATTN_SHARED_PYWORKER/requests" ] &&
        kill -0 "${ATTN_SHARED_PYWORKER_PID:-0}" 2>/dev/null; then
        ATTN_PYWORKER=$ATTN_SHARED_PYWORKER ATTN_PYWORKER_PID=$ATTN_SHARED_PYWORKER_PID
        ATTN_PYTHON_REAL=$PY
        export ATTN_PYWORKER ATTN_PYWORKER_PID ATTN_PYTHON_REAL
        if "$TESTS/lib/pyclient" "$TESTS/lib/has_modules.py" "$@" >/dev/null; then
            PY=$TESTS/lib/pyclient
            ATTN_PYWORKER_SHARED=1
            return 0
        fi
        unset ATTN_PYWORKER ATTN_PYWORKER_PID ATTN_PYTHON_REAL
        return 1
    fi
    ATTN_PYWORKER=$T/.pyworker
    mkdir "$ATTN_PYWORKER" && mkfifo "$ATTN_PYWORKER/requests" "$ATTN_PYWORKER/ready" || return 1
    # Started from a subshell, so that it is not one of the suite's jobs
    # (`wait` and `jobs` do not see it); it leaves when the suite ($$) has.
    ATTN_PYWORKER_PID=$(
        "$PY" "$TESTS/lib/pyworker.py" "$ATTN_PYWORKER" $$ "$@" </dev/null >"$ATTN_PYWORKER/log" 2>&1 &
        echo $!
    )
    # "ready" once it has imported every module, "lacks NAME" else
    exec 9<>"$ATTN_PYWORKER/ready"
    read -r -t 120 -u 9 said
    exec 9<&-
    if [ "$said" != ready ]; then
        py_worker_stop
        ATTN_PYWORKER_PID=
        return 1
    fi
    ATTN_PYTHON_REAL=$PY
    PY=$TESTS/lib/pyclient
    export ATTN_PYWORKER ATTN_PYWORKER_PID ATTN_PYTHON_REAL
}
py_worker_stop() {
    [ -z "${ATTN_PYWORKER_SHARED:-}" ] && [ -n "${ATTN_PYWORKER_PID:-}" ] &&
        kill "$ATTN_PYWORKER_PID" 2>/dev/null
    return 0
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

# run ARGS...: attnrun ($ATTNRUN) with ARGS, standard input closed, killed
# after $TIME_LIMIT seconds (60 unless the suite sets it); its status in
# rc, what it printed in $T/stdout and $T/stderr.  (Some suites run it
# their own way: their run replaces this one.)
run() {
    timeout -s KILL "${TIME_LIMIT:-60}" "$ATTNRUN" "$@" </dev/null >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

# runs NAME STATUS ARGS...: one run (above) ends with STATUS (and one line
# when it fails); ok NAME or FAIL NAME, and the status says which.
runs() {
    local name=$1 status=$2 why
    shift 2
    run "$@"
    why=$(run_problem "$rc" "$status" "$T/stderr")
    if [ -z "$why" ]; then ok "$name"; else bad "$name: $why"; fi
    [ -z "$why" ]
}

# refuse NAME STATUS WORDS ARGS...: a run (above) that fails with STATUS,
# one 'attnrun: ' line holding WORDS, nothing on standard output, and
# leaves the directory $E as it was (no file, no temporary).
refuse() {
    local name=$1 status=$2 words=$3 why before
    shift 3
    entries "$E"
    before=${ENTRIES[*]}
    run "$@"
    why=$(run_problem "$rc" "$status" "$T/stderr")
    file_text "$T/stderr"
    if [ -z "$why" ] && [[ $TEXT != *"$words"* ]]; then
        why="the message lacks '$words': ${TEXT:0:300}"
    fi
    file_text "$T/stdout"
    [ -z "$why" ] && [ -n "$TEXT" ] && why="printed ${TEXT:0:100}"
    entries "$E"
    if [ -z "$why" ] && [ "${ENTRIES[*]}" != "$before" ]; then
        why="left ${ENTRIES[*]##*/}"
    fi
    if [ -z "$why" ]; then ok "$name: exit $status"; else bad "$name: $why"; fi
}

# The helpers below run for every check: they start no process where a
# builtin will do (starting one costs 5-10 ms on a small virtual machine).

# entries DIR: the names in DIR, dot files too, into the array ENTRIES
# (paths, in the shell's order).
entries() {
    shopt -s nullglob dotglob
    ENTRIES=("$1"/*)
    shopt -u nullglob dotglob
}

# file_text FILE: the whole of FILE (up to a NUL byte) into TEXT; "" when
# it cannot be read.
file_text() {
    TEXT=""
    [ -r "$1" ] && IFS= read -r -d '' TEXT <"$1"
    return 0
}

run_problem() {
    local rc=$1 status=$2 stderr=$3 breaks
    file_text "$stderr"
    if [ "$rc" -eq 137 ]; then
        echo "no answer within the time limit (killed)"
    elif [ "$rc" -gt 128 ]; then
        echo "killed by signal $((rc - 128)): ${TEXT:0:300}"
    elif [ "$rc" -ne "$status" ]; then
        echo "exit $rc, expected $status: ${TEXT:0:300}"
    elif [ "$status" -ne 0 ]; then
        breaks=${TEXT//[!$'\n']/}
        if [ "${#breaks}" -ne 1 ] || [[ $TEXT != "attnrun: "* ]]; then
            echo "stderr is not one 'attnrun: ' line: ${TEXT:0:300}"
        fi
    fi
}

# The fault-injection build's sanitizer settings, for every allocation
# sweep: sanitizer findings get exit statuses of their own, apart from
# attnrun's 1; leaks are findings; malloc returns NULL rather than
# aborting; 5 frames recorded per allocation (the default 30 took a fifth
# of a sweep's time; a report still names the allocating function and its
# library, which tests/lib/lsan.supp matches).
FAULT_ASAN_OPTIONS=exitcode=86:detect_leaks=1:allocator_may_return_null=1:malloc_context_size=5

# alloc_sweep_first NAME N SOURCE ARGS...: alloc_sweep's check of the
# first N allocations only, each failing in turn (the quick tier).
alloc_sweep_first() {
    SWEEP_FIRST=1 alloc_sweep "$@"
}

# sweep_start ARGS...: the fault-injection build ($FAULT_ATTNRUN) started
# once on ARGS as the sweep's server (cmd/cli/fault_server.h): each
# sweep_run then forks a run of it, so that a sweep of hundreds of runs
# pays for one start (exec, libraries, sanitizer).  Uses $T/sweep.
sweep_start() {
    coproc SWEEP_SERVER {
        ATTN_FAIL_SERVE=1 ATTN_FAIL_STDERR=$T/sweep/stderr ASAN_OPTIONS=$FAULT_ASAN_OPTIONS \
            exec "$FAULT_ATTNRUN" "$@"
    }
    SWEEP_TO=${SWEEP_SERVER[1]} SWEEP_FROM=${SWEEP_SERVER[0]} SWEEP_PID=$SWEEP_SERVER_PID
}

# sweep_run N: one run of the server's ARGS with allocation N failing,
# standard input and output on /dev/null, standard error in
# $T/sweep/stderr; its status in rc (255 when the server is gone).
sweep_run() {
    rc=
    { printf '%s\n' "$1" >&"$SWEEP_TO" && IFS= read -r rc <&"$SWEEP_FROM"; } 2>/dev/null
    if [ -z "$rc" ]; then
        rc=255
        echo "attnrun: the sweep's server ended" >"$T/sweep/stderr"
    fi
}

# sweep_stop: the server told its input has ended, and waited for.
sweep_stop() {
    exec {SWEEP_TO}>&- {SWEEP_FROM}<&-
    wait "$SWEEP_PID" 2>/dev/null
}

# alloc_sweep NAME LIMIT SOURCE ARGS...: the fault-injection build
# ($FAULT_ATTNRUN) run on ARGS with its 1st, 2nd, ... allocation failing
# (ATTN_FAIL_ALLOC=N) until a run needs fewer than N (at most LIMIT).
# Each run is forked by one server (sweep_start) rather than started.
# Every failing run must end as documented for exit 1 (run_problem), not
# by the fatal-signal handler, leaving nothing beside OUT, no temporary
# beside IN and IN as it was; and a run with a later allocation failing
# must succeed too (else the last failure went unnoticed).  In ARGS, IN
# stands for a copy of SOURCE (restored after each run) and OUT for a name
# in an empty directory (write OUT.h5, OUT.png).  Uses $T.
alloc_sweep() {
    local name=$1 limit=$2 source=$3 input=$T/sweep/in.h5
    shift 3
    # the quick tier: the first 8 allocations only
    if [ -n "$QUICK" ] && [ "$limit" -gt 8 ]; then
        alloc_sweep_first "$name" 8 "$source" "$@"
        return
    fi
    mkdir -p "$T/sweep"
    cp "$source" "$T/sweep/pristine"
    cp "$source" "$input"
    local n rc why problems=0 later
    set -- "${@//IN/$input}"
    set -- "${@//OUT/$T/sweep/out/out}"
    # (Each step in as few processes as bash allows: a sweep runs hundreds.)
    local said left tmps globbing
    globbing=$(shopt -p nullglob)
    shopt -s nullglob
    mkdir "$T/sweep/out"
    sweep_start "$@"
    for ((n = 1; n <= limit; n++)); do
        sweep_run "$n"
        [ "$rc" -eq 0 ] && break       # fewer than n allocations: all of them failed once
        said=
        IFS= read -r -d '' said <"$T/sweep/stderr"
        left=("$T/sweep/out"/* "$T/sweep/out"/.[!.]*)
        tmps=("$T/sweep/"*attnrun-tmp* "$T/sweep/".*attnrun-tmp*)
        why=
        # run_problem's verdict, asked only when it could find one: exit 1
        # and exactly one line, starting "attnrun: "
        if [ "$rc" -ne 1 ] || [[ $said != "attnrun: "*$'\n' ]] || [[ ${said%$'\n'} == *$'\n'* ]]; then
            why=$(run_problem "$rc" 1 "$T/sweep/stderr")
        fi
        if [ -z "$why" ] && [[ $said == *"internal error"* ]]; then
            why="a crash, caught by the fatal-signal handler"
        elif [ -z "$why" ] && [ "${#left[@]}" -gt 0 ]; then
            why="left ${left[*]##*/}"
        elif [ -z "$why" ] && [ "${#tmps[@]}" -gt 0 ]; then
            why="left a temporary next to the input"
        elif [ -z "$why" ] && ! cmp -s "$input" "$T/sweep/pristine"; then
            why="the input changed"
        fi
        if [ -n "$why" ]; then
            bad "$name: allocation $n failing: $why: $(head -c 400 "$T/sweep/stderr")"
            problems=$((problems + 1))
            [ "$problems" -ge 3 ] && break
            cp "$T/sweep/pristine" "$input"
            rm -rf "$T/sweep/out" && mkdir "$T/sweep/out"
        fi
    done
    for later in $((n + 1)) $((n + 2)) $((n + 5)); do
        [ -n "${SWEEP_FIRST:-}" ] && [ "$n" -gt "$limit" ] && break
        cp "$T/sweep/pristine" "$input"
        rm -rf "$T/sweep/out"
        mkdir "$T/sweep/out"
        sweep_run "$later"
        if [ "$rc" -ne 0 ]; then
            bad "$name: allocation $n failing went unnoticed (the run succeeded, with $later failing it does not)"
            problems=$((problems + 1))
            break
        fi
    done
    sweep_stop
    rm -rf "$T/sweep"
    $globbing
    if [ "$n" -gt "$limit" ] && [ -n "${SWEEP_FIRST:-}" ] && [ "$problems" -eq 0 ]; then
        ok "$name: each of its first $limit allocations failing ends with exit 1 and one line"
    elif [ "$n" -gt "$limit" ]; then
        bad "$name: still failing after $limit allocations"
    elif [ "$n" -eq 1 ]; then
        bad "$name: the first failing allocation went unnoticed"
    elif [ "$problems" -eq 0 ]; then
        ok "$name: each of its $((n - 1)) allocations failing ends with exit 1 and one line"
    fi
}
