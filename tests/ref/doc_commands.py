"""tests/ref/doc_commands.py - runs every command the documentation shows, as
written there, for tests/cli/test_doc_commands.sh.

    python3 tests/ref/doc_commands.py run ROOT ATTNRUN TMPDIR [PAGE...]
    python3 tests/ref/doc_commands.py selftest ROOT ATTNRUN TMPDIR

PAGE is a Markdown file relative to ROOT; without one, every page of
PAGES below.  It prints "ok WHERE", "FAIL WHERE: WHY" or "skip WHERE: WHY"
per command (WHERE is page:line and the command) and exits 0; the verdicts
say how it went.

The convention the pages follow
-------------------------------
* Shell.  In a code block (indented, or fenced with ```), a line that
  starts with `$ ` is a command typed at a shell prompt; a command line
  ending in `\\` goes on with the next line.  The lines after it, up to the
  next `$ ` or `>>> ` line or the end of the block, are what it prints,
  standard output and error together.
* Python.  `>>> ` starts a statement and `... ` continues it; the lines
  after it are what it prints (Python's doctest format, tracebacks
  included).
* What is shown is compared with what the command printed, line by line,
  with runs of blanks alike: a line `...` stands for any number of lines,
  `...` within a line for any text, and a number printed with a decimal
  point may differ by one unit of its last digit (integers must be equal).
  A command shown with no output is not checked for output.
* Every command must exit 0, except one followed by the command
  `echo $?`: that one may fail, and the status `echo $?` shows is compared
  like any output.
* A line of a code block that looks like a command without its prompt
  fails (a program of PROGRAMS, then an option, a file or, for make, a
  target): commands are shown with `$ `, so that none escapes this
  runner.  Synopses with placeholders in capitals (`attnrun IN.h5 -o
  OUT.h5`) are not commands and pass.

How a page runs
---------------
The README's commands run first, in a directory made as the top of a
source tree (the runner copies fixtures/ and examples/ into it, so the
real tree is never written); the README itself then moves to a working
directory of its own and links those two there, as it tells a reader to.
Every other page runs after the README's commands, as a reader who
followed the README goes on in the same directory: in a copy of the
README's directory as its commands left it, from the directory its shell
ended in, the inputs it made (`layer3.h5`, the stand-ins of
`examples/stand-ins.py`) and its results (`toy.out.h5`, `out.h5`,
`results.h5`) there.  One bash (`bash --noprofile --norc`) runs a page's
shell commands in order, so that `cd`, variables and `export` carry from
one to the next as in a terminal; its Python sessions run in order in one
Python namespace per page, in the same directory.  HOME is the page's
directory, and PATH starts with a directory in which `attnrun` is ATTNRUN
(the build under test) and `python3` is this Python (one with numpy and
h5py), then the system's PATH.  That is what the README's setup makes:
`make install PREFIX=$HOME/.local` and `export PATH="$HOME/.local/bin:$PATH"`;
the install itself is skipped (SKIP), since it would install the
repository's build rather than the build under test.

SKIP lists the commands that cannot run here, each with its reason; a
skipped command still counts as shown.  An entry that matches no command
of any page fails the run, so the table cannot outlive what it excuses.
"""
import doctest
import io
import os
import re
import selectors
import shutil
import subprocess
import sys
import time

import numpy as np

# The pages whose commands run, relative to the repository's root.
PAGES_GLOB = ("README.md", "docs/*.md", "bench/README.md")

# (regular expression searched in the command, why it cannot run here)
SKIP = [
    (r"^make demo$",
     "runs make in the source tree itself (apt-get, a build); tests/cli/test_docs.sh runs "
     "scripts/demo.sh, which make demo ends with, and checks the file it leaves"),
    (r"^make test$", "runs every suite, this one included"),
    (r"^make install\b",
     "would install the source tree's build rather than the build under test; the page's "
     "PATH gives that one as attnrun (tests/cli/test_install.sh checks make install)"),
    (r"^make MPI=1",
     "builds or installs the MPI program (OpenMPI, parallel HDF5); tests/cli/test_mpi.sh "
     "runs it under make MPI=1 test"),
    (r"\bmpirun\b",
     "needs attnrun-mpi (make MPI=1) and OpenMPI; tests/cli/test_mpi.sh runs it under "
     "make MPI=1 test"),
    (r"^cc ",
     "needs libattn installed (make install); tests/cli/test_install.sh builds "
     "examples/forward.c against an installed tree, shared and static"),
    (r"^make bench", "times the benchmark for minutes; a measurement, not a check"),
]

# Names that start a command; a code line starting with one needs `$ `.
PROGRAMS = ("attnrun", "attnrun-mpi", "mpirun", "python3", "h5dump", "h5ls", "ncdump",
            "make", "cc", "man", "export", "for")
# A placeholder of a synopsis: IN.h5, OUT, [OPTIONS], FILE.png ...
# (not a variable: $HOME, PREFIX=...)
PLACEHOLDER = re.compile(r"(?<![$\w{])[A-Z][A-Z0-9_]+\b(?!=)")

COMMAND_LIMIT = 180          # seconds one command may take
verdicts = []
prefix = ""                  # the self-test's runs of planted pages: "  planted: "


def say(line):
    print(prefix + line, flush=True)


def ok(where):
    verdicts.append("ok " + where)
    say("ok " + where)


def fail(where, why):
    verdicts.append("FAIL %s: %s" % (where, why))
    say("FAIL %s: %s" % (where, why))


def skip(where, why):
    say("skip %s: %s" % (where, why))


# ------------------------------------------------------------ the pages

def code_blocks(text):
    """(first line number, lines) of every code block: fenced (```), or
    indented by four or more spaces after a blank line; the lines without
    the block's indentation."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)```", line)
        if fence:
            indent = len(fence.group(1))
            j = i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            blocks.append((i + 2, [l[indent:] if l[:indent].strip() == "" else l.lstrip()
                                   for l in lines[i + 1:j]]))
            i = j + 1
            continue
        if line.startswith("    ") and line.strip() and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith("    ")):
                j += 1
            while j > i and not lines[j - 1].strip():
                j -= 1
            body = lines[i:j]
            indent = min(len(l) - len(l.lstrip()) for l in body if l.strip())
            blocks.append((i + 1, [l[indent:] for l in body]))
            i = j
            continue
        i += 1
    return blocks


def items(page, text):
    """The page's commands in order: ("sh", line, command, shown) and
    ("py", line, doctest text); and ("lint", line, text) for a code line
    that looks like a command without its prompt."""
    found = []
    for first, lines in code_blocks(text):
        i = 0
        while i < len(lines):
            line, number = lines[i], first + i
            if line.startswith("$ "):
                command = [line[2:]]
                while command[-1].endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command.append(lines[i])
                shown = []
                while i + 1 < len(lines) and not lines[i + 1].startswith(("$ ", ">>> ")):
                    i += 1
                    shown.append(lines[i])
                while shown and not shown[-1].strip():
                    shown.pop()
                found.append(("sh", number, "\n".join(command), shown))
            elif line.startswith(">>> "):
                session = [line]
                while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
                    i += 1
                    session.append(lines[i])
                found.append(("py", number, "\n".join(session) + "\n"))
            elif looks_like_command(line):
                found.append(("lint", number, line))
            i += 1
    return found


def looks_like_command(line):
    """A program's name, then an option, a file or (make) a target; not a
    synopsis with placeholders, not a title such as "attnrun against ..."."""
    words = line.split()
    if line[:1].isspace() or len(words) < 2 or words[0] not in PROGRAMS or PLACEHOLDER.search(line):
        return False
    return words[0] == "make" or any(
        w.startswith("-") or re.search(r"\.(h5|py|png|svg|pdf|c)$", w) for w in words[1:])


def one_line(command):
    return re.sub(r"\s+", " ", command.replace("\\\n", " ")).strip()


def skip_reason(command):
    flat = one_line(command)
    for pattern, why in SKIP:
        if re.search(pattern, flat):
            return pattern, why
    return None, None


# ------------------------------------------------------------ comparing output

NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.]*\w)")
ANY_NUMBER = r"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)"


def line_pattern(expected):
    """A regular expression for one shown line, and the numbers it shows."""
    parts, numbers = [], []
    for k, piece in enumerate(expected.strip().split("...")):
        if k:
            parts.append(".*?")
        pos = 0
        for m in NUMBER.finditer(piece):
            parts.append(literal(piece[pos:m.start()]))
            parts.append(ANY_NUMBER)
            numbers.append(m.group(0))
            pos = m.end()
        parts.append(literal(piece[pos:]))
    return re.compile("".join(parts) + r"\Z", re.S), numbers


def literal(text):
    return r"\s*".join(re.escape(w) for w in re.split(r"\s+", text))


def close(shown, got):
    a, b = float(shown), float(got)
    if not re.search(r"[.eE]", shown):
        return a == b
    mantissa, _, exponent = shown.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    unit = 10.0 ** (int(exponent or 0) - decimals)
    return abs(a - b) <= unit * (1 + 1e-9)


def line_matches(expected, actual):
    pattern, numbers = line_pattern(expected)
    m = pattern.match(actual.strip())
    return bool(m) and all(close(s, g) for s, g in zip(numbers, m.groups()))


def output_matches(shown, got):
    """Whether the lines got are the lines shown (see the module's doc)."""
    got = [l.rstrip() for l in got]
    while got and not got[-1]:
        got.pop()
    memo = {}

    def match(i, j):
        if (i, j) not in memo:
            if i == len(shown):
                memo[i, j] = j == len(got)
            elif shown[i].strip() == "...":
                memo[i, j] = any(match(i + 1, k) for k in range(j, len(got) + 1))
            else:
                memo[i, j] = j < len(got) and line_matches(shown[i], got[j]) and match(i + 1, j + 1)
        return memo[i, j]

    return match(0, 0)


def first_difference(shown, got):
    for line in shown:
        if line.strip() != "..." and not any(line_matches(line, g) for g in got):
            return "shown %r, which is not in the output (%d lines: %s)" % (
                line.strip(), len(got), " | ".join(g.strip() for g in got if g.strip())[:300])
    for k, line in enumerate(shown):
        if line.strip() == "...":
            return "the output differs after shown line %d" % (k + 1)
        if k >= len(got) or not line_matches(line, got[k]):
            return "shown %r, printed %r" % (line.strip(), got[k].strip() if k < len(got) else "(nothing)")
    return "printed more lines than shown: %r" % got[len(shown):][:2]


class Checker(doctest.OutputChecker):
    def check_output(self, want, got, optionflags):
        return super().check_output(want, got, optionflags) or \
            output_matches(want.rstrip("\n").split("\n"), got.rstrip("\n").split("\n"))


class Runner(doctest.DocTestRunner):
    """Counts the failures of one session, with their lines."""

    def __init__(self):
        super().__init__(checker=Checker(), verbose=False,
                         optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        self.problems = []

    def report_failure(self, out, test, example, got):
        self.problems.append("line %d: %s shows %r, printed %r" % (
            test.lineno + example.lineno + 1, example.source.strip(), example.want.strip(),
            got.strip()))

    def report_unexpected_exception(self, out, test, example, exc_info):
        self.problems.append("line %d: %s raised %s: %s" % (
            test.lineno + example.lineno + 1, example.source.strip(), exc_info[0].__name__,
            str(exc_info[1])[:200]))


# ------------------------------------------------------------ the tree

def prepare(root, workdir):
    """workdir as the top of a source tree for the README: the parts of
    the tree its commands read."""
    os.makedirs(workdir)
    for tree in ("fixtures", "examples"):
        shutil.copytree(os.path.join(root, tree), os.path.join(workdir, tree))


def after_readme(readme, cwd, workdir):
    """workdir as the README's directory is once its commands have run (a
    copy, links kept as links); the directory its shell ended in, there."""
    shutil.copytree(readme, workdir, symlinks=True)
    return os.path.join(workdir, os.path.relpath(cwd, readme))


# ------------------------------------------------------------ one page

class Shell:
    """One bash for a page: commands in, their output into files."""

    def __init__(self, workdir, env, logdir):
        self.logdir = logdir
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=workdir, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(logdir, "bash.err"), "w"),
                                     start_new_session=True)
        self.buffer = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.send("__status() { return \"$1\"; }\n")

    def send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def run(self, n, command):
        """(status, output lines) of command n, or (None, why)."""
        syntax = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        if syntax.returncode != 0:
            return None, "not valid shell: " + syntax.stderr.strip()[:200]
        out = os.path.join(self.logdir, "%d.out" % n)
        self.send("{ %s\n} >'%s' 2>&1 </dev/null\n__rc=$?; printf '__done %d %%s\\n' \"$__rc\"; "
                  "__status \"$__rc\"\n" % (command, out, n))
        deadline = time.monotonic() + COMMAND_LIMIT
        marker = re.compile(rb"__done %d (\d+)\n" % n)
        while not marker.search(self.buffer):
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                self.close()
                return None, "no end within %d s" % COMMAND_LIMIT
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None, "the shell ended"
            self.buffer += chunk
        status = int(marker.search(self.buffer).group(1))
        self.buffer = b""
        with open(out, encoding="utf-8", errors="replace") as f:
            return status, f.read().split("\n")

    def cwd(self):
        """The shell's working directory now."""
        status, lines = self.run(10 ** 6, "pwd")
        return lines[0] if status == 0 else None

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait()


def run_page(page, text, workdir, env, label=None):
    """Runs the commands of one page (text) in workdir, which is ready; a
    verdict each.  Returns the items and the directory its shell ended in."""
    label = label or page
    logdir = workdir + ".log"
    os.makedirs(logdir)
    shell = Shell(workdir, env, logdir)
    ended = workdir
    namespace = {"__name__": "__docs__"}
    found = items(page, text)
    here = os.getcwd()
    saved_env = dict(os.environ)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(env)
    try:
        for k, item in enumerate(found):
            if item[0] == "lint":
                fail("%s:%d" % (label, item[1]),
                     "a command without its prompt `$ `: %r (the runner would not run it)" % item[2])
            elif item[0] == "sh":
                run_shell(shell, k, item, found[k + 1] if k + 1 < len(found) else None, label)
            else:
                if shell.proc.poll() is None:       # Python runs where the shell is
                    os.chdir(shell.cwd() or workdir)
                run_python(item, namespace, label)
        if shell.proc.poll() is None:
            ended = shell.cwd() or workdir
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved_env)
        shell.close()
        namespace.clear()
    return found, ended


def run_shell(shell, k, item, following, label):
    _, line, command, shown = item
    where = "%s:%d $ %s" % (label, line, one_line(command)[:100])
    pattern, why = skip_reason(command)
    if pattern:
        skip(where, why)
        return
    if shell.proc.poll() is not None:
        fail(where, "the page's shell has ended")
        return
    status, got = shell.run(k, command)
    may_fail = following is not None and following[0] == "sh" and following[2].strip() == "echo $?"
    if status is None:
        fail(where, got)
    elif status != 0 and not may_fail:
        fail(where, "exit %d: %s" % (status, " | ".join(l for l in got if l.strip())[-300:]))
    elif shown and not output_matches(shown, got):
        fail(where, first_difference(shown, got))
    else:
        ok(where)


def run_python(item, namespace, label):
    _, line, source = item
    first = source.split("\n", 1)[0][4:]
    where = "%s:%d >>> %s" % (label, line, first[:80])
    parser = doctest.DocTestParser()
    test = parser.get_doctest(source, namespace, label, label, line - 1)
    runner = Runner()
    runner.run(test, out=io.StringIO().write, clear_globs=False)
    namespace.update(test.globs)          # DocTest ran in a copy of the namespace
    if runner.problems:
        fail(where, "; ".join(runner.problems)[:600])
    else:
        ok(where + " (%d statements)" % len(test.examples))


# ------------------------------------------------------------ the whole set

def pages(root):
    import glob
    found = []
    for pattern in PAGES_GLOB:
        found += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern)))
    return found


def environment(attnrun, tmp, home):
    bindir = os.path.join(tmp, "bin")
    if not os.path.isdir(bindir):
        os.makedirs(bindir)
        os.symlink(os.path.abspath(attnrun), os.path.join(bindir, "attnrun"))
        os.symlink(sys.executable, os.path.join(bindir, "python3"))
    env = dict(os.environ)              # the sanitizers' settings among them
    env.update({"PATH": bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
                "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TMPDIR": tmp,
                "PYTHONDONTWRITEBYTECODE": "1"})
    env.pop("PYTHONPATH", None)
    return env


def check_skips(commands, table):
    """The entries of table that match none of commands."""
    return [pattern for pattern, _ in table
            if not any(re.search(pattern, one_line(c)) for c in commands)]


def run_all(root, attnrun, tmp, chosen):
    """The README's commands in a directory made as the top of a source
    tree, then each other page's after them: in a copy of that directory
    as the README left it, from where its shell ended (so a page must work
    after the README's commands, as a reader follows them)."""
    commands = []
    readme_dir = os.path.join(tmp, "README.md")
    prepare(root, readme_dir)
    for page in ["README.md"] + [p for p in chosen or pages(root) if p != "README.md"]:
        with open(os.path.join(root, page), encoding="utf-8") as f:
            text = f.read()
        if page == "README.md":
            workdir = start = readme_dir
        else:
            workdir = os.path.join(tmp, page.replace("/", "_"))
            start = after_readme(readme_dir, readme_ended, workdir)
        found, ended = run_page(page, text, start, environment(attnrun, tmp, workdir),
                                label=None if not chosen or page in chosen else "(setup) README.md")
        if page == "README.md":
            readme_ended = ended
        else:
            shutil.rmtree(workdir, ignore_errors=True)     # its logs stay beside it
        commands += [i[2] for i in found if i[0] == "sh"]
        shown = sum(1 for i in found if i[0] in ("sh", "py"))
        print("    %s: %d commands and sessions" % (page, shown), flush=True)
    if not chosen:
        stale = check_skips(commands, SKIP)
        if stale:
            fail("the skip table", "entries that match no command of any page: %s" % stale)
        else:
            ok("the skip table: each of its %d entries matches a command shown" % len(SKIP))


# ------------------------------------------------------------ the runner's own checks

PLANTED = """# planted

A page whose commands the self-test knows the verdicts of.

    $ echo 'one 0.2514 two'
    one 0.251 two
    $ printf 'a\\nb\\nc\\n'
    a
    ...
    $ echo 0.25
    0.27
    $ false
    $ false
    $ echo $?
    1
    $ echo $?
    0
    $ X=4; \\
      echo "x is $X"
    x is 4
    $ echo "$X"
    4

Python:

    >>> 2 + 2
    4
    >>> [0.1 * 3]
    [0.3...]

and

    >>> 1 / 8
    0.3

A command without its prompt, and a synopsis:

    attnrun in.h5 -o out.h5 --heads 2

    attnrun IN.h5 -o OUT.h5
"""
# line -> the verdict each command of PLANTED must get
PLANTED_VERDICTS = {5: "ok", 7: "ok", 10: "FAIL", 12: "FAIL", 13: "ok", 14: "ok", 16: "ok",
                    18: "ok", 21: "ok", 26: "ok", 33: "FAIL", 38: "FAIL"}


def self_test(root, attnrun, tmp):
    """Runs pages with planted mistakes (their verdicts shown indented, as
    what they are: not this suite's) and checks the runner's verdicts."""
    global verdicts, prefix

    # The comparison of a line.
    for shown, printed, expect in (("0.251852, 0.192013", "0.251853, 0.192013", True),
                                   ("0.251852, 0.192013", "0.251854, 0.192013", False),
                                   ("213909504 bytes", "213909505 bytes", False),
                                   ("1.14131e+08 (0.114 GFLOP)", "1.14132e+08 (0.114 GFLOP)", True),
                                   ("float16", "float32", False),
                                   ("layer3.h5 ... Link", "layer3.h5  External Link", True)):
        if line_matches(shown, printed) != expect:
            fail("self-test: compare %r with %r" % (shown, printed), "not %s" % expect)
            return
    ok("self-test: lines compare to their printed digits, integers exactly, ... as any text")

    # A page of known verdicts.
    saved, verdicts, prefix = verdicts, [], "    planted: "
    workdir = os.path.join(tmp, "planted")
    prepare(root, workdir)
    run_page("planted.md", PLANTED, workdir, environment(attnrun, tmp, workdir))
    got = {int(re.match(r"\S+ planted\.md:(\d+)", v).group(1)): v.split()[0] for v in verdicts}
    verdicts, prefix = saved, ""
    if got == PLANTED_VERDICTS:
        ok("self-test: a planted page gets its %d verdicts (wrong output, failing command, "
           "echo $?, continuation, Python, a command without $)" % len(got))
    else:
        fail("self-test: the planted page", "verdicts %s, expected %s" % (
            sorted(got.items()), sorted(PLANTED_VERDICTS.items())))

    # A copy of README with one number of its output changed.
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        text = f.read()
    cut = text.find("\n## ", text.find("\n    $ h5dump"))
    m = re.search(r"^( +\(0,0,0\): )(\d\.\d+)", text, re.M)
    if cut < 0 or not m:
        fail("self-test: README copy", "no h5dump listing of (0,0,0) found to plant a wrong number in")
        return
    wrong = "%.6f" % (float(m.group(2)) + 0.01)
    planted = text[:m.start(2)] + wrong + text[m.end(2):cut]
    line = text[:m.start()].count("\n") + 1
    saved, verdicts, prefix = verdicts, [], "    planted: "
    workdir = os.path.join(tmp, "readme-planted")
    prepare(root, workdir)
    run_page("README.md", planted, workdir, environment(attnrun, tmp, workdir),
             label="README.md (planted)")
    failed = [v for v in verdicts if v.startswith("FAIL")]
    passed = [v for v in verdicts if v.startswith("ok")]
    verdicts, prefix = saved, ""
    if len(failed) == 1 and wrong in failed[0] and passed:
        ok("self-test: README's h5dump output with %s for %s (line %d) fails, and only it"
           % (wrong, m.group(2), line))
    else:
        fail("self-test: README planted", "failures %s" % failed)

    # A skip entry that excuses nothing.
    stale = check_skips(["make test", "attnrun x.h5"], [(r"^make test$", ""), (r"^nothing$", "")])
    if stale == [r"^nothing$"]:
        ok("self-test: a skip entry that matches no command is found")
    else:
        fail("self-test: stale skip entries", "found %s" % stale)


def main(argv):
    if len(argv) < 5 or argv[1] not in ("run", "selftest"):
        sys.exit(__doc__)
    root, attnrun, tmp = (os.path.abspath(a) for a in argv[2:5])
    if argv[1] == "run":
        run_all(root, attnrun, tmp, argv[5:])
    else:
        self_test(root, attnrun, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
