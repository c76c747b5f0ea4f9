#!/usr/bin/env python3
"""make mutate: single mutations of lib/, one at a time, against the tests.

Each mutant changes one place of one file of lib/ (the kinds are in
KINDS below).  For each, in a scratch copy of the repository
(build/mutate/), the tool rebuilds, then runs the fast suites first --
every cmocka test, then the command-line suites that tests/mutate/suites
names for the file -- and stops at the first failure.  A mutant ends as:

  killed        a test failed, or ran past its time limit
  survived      every test it ran passed: a test is missing, or the
                mutant is equivalent and goes into tests/mutate/equivalent
  build-failed  it does not compile (warnings are errors, as in CI)
  same-object   its object file, without debug information, is the
                original's: the compiler proved it equivalent (a change in
                code that this build does not compile counts here too)

Mutants listed in tests/mutate/equivalent, with the reason, are not run.
The sample (--mutants N, --seed S) is drawn from the other ones.  The
table per file and the survivors are printed, and written with every
mutant's outcome to build/mutate/report.txt and report.json.  Exits 1
when a mutant survived, 2 on a usage error or a baseline that fails.
Only the Python standard library, make, cc and binutils' objcopy are used.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EQUIVALENT = os.path.join(HERE, "equivalent")
SUITES = os.path.join(HERE, "suites")

KINDS = {
    "relational": "< <=, > >=, == != flipped",
    "index": "+1 or -1 on an index expression",
    "term": "the right term of a + or - dropped",
    "swap": "two adjacent arguments of one declared type swapped",
    "constant": "0 <-> 1 and 2 -> 3",
    "status": "a status returned replaced by ATTN_OK",
}

# Suites that need what a mutant's build does not make (the fault-injection
# build, MPI, an installation): never run by this tool.
NOT_ALONE = {"test_alloc", "test_mpi", "test_install"}

# One cmocka binary: UNIT_LIMIT_FLOOR_S + UNIT_LIMIT_FACTOR times what it
# took unmutated (the baseline), so that a mutant that loops is killed in
# seconds where the whole set takes two or three; UNIT_LIMIT_S before the
# baseline has timed it.
UNIT_LIMIT_S = 60
UNIT_LIMIT_FLOOR_S = 10
UNIT_LIMIT_FACTOR = 5
SUITE_LIMIT_S = 900   # one command-line suite

# ---------------------------------------------------------------- tokens

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[uUlLfF]*|0[xX][0-9a-fA-F]+[uUlL]*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op>->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!=<>]=|\.\.\.|[][(){};,.?:~!<>=+\-*/%&|^#])
""", re.S | re.X)


class Tok:
    __slots__ = ("kind", "text", "start", "end")

    def __init__(self, kind, text, start, end):
        self.kind, self.text, self.start, self.end = kind, text, start, end


def tokenize(src):
    """The code's tokens, without comments and preprocessor lines (a
    directive's continuation lines included)."""
    toks, pos, line_start = [], 0, True
    while pos < len(src):
        if line_start:
            m = re.match(r"[ \t]*#", src[pos:pos + 200])
            if m:                                   # a directive: skip it
                end = pos
                while True:
                    nl = src.find("\n", end)
                    if nl < 0:
                        end = len(src)
                        break
                    if src[nl - 1] != "\\":
                        end = nl
                        break
                    end = nl + 1
                pos = end
                continue
        m = TOKEN.match(src, pos)
        if not m:
            raise ValueError(f"cannot read the code at offset {pos}")
        kind = m.lastgroup
        text = m.group()
        if kind == "space" or kind == "comment":
            if "\n" in text:
                line_start = True
            elif kind == "space" and not line_start:
                pass
            pos = m.end()
            continue
        toks.append(Tok(kind, text, m.start(), m.end()))
        line_start = False
        pos = m.end()
    return toks


def match_close(toks, i):
    """Index of the bracket closing toks[i] ( ( [ or { )."""
    pair = {"(": ")", "[": "]", "{": "}"}[toks[i].text]
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t == toks[i].text:
            depth += 1
        elif t == pair:
            depth -= 1
            if depth == 0:
                return j
    return None


def match_open(toks, j):
    """Index of the ( opening the ) at toks[j]; -1 when there is none."""
    depth = 0
    for k in range(j, -1, -1):
        if toks[k].text == ")":
            depth += 1
        elif toks[k].text == "(":
            depth -= 1
            if depth == 0:
                return k
    return -1


KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "else", "do",
            "case", "goto", "break", "continue", "default", "_Alignof",
            "_Static_assert", "static_assert", "defined"}
TYPE_WORDS = {"const", "static", "unsigned", "signed", "struct", "enum",
              "volatile", "register", "restrict", "inline", "long", "short"}
# Functions and macros whose arguments commute: a swap there is equivalent.
COMMUTATIVE = {"fmax", "fmin", "fmaxf", "fminf", "MAX", "MIN", "attn_max",
               "attn_min", "size_max", "size_min"}


def is_operand_end(t):
    return t.kind in ("name", "number", "string") and t.text not in KEYWORDS \
        or t.text in (")", "]")


def factor_end(toks, i):
    """End (exclusive) of the factor starting at toks[i]: unary operators
    and casts, a primary, its postfixes.  None when there is none."""
    n = len(toks)
    while i < n and toks[i].text in ("-", "+", "!", "~", "*", "&", "sizeof"):
        i += 1
    if i >= n:
        return None
    t = toks[i]
    if t.text == "(":
        j = match_close(toks, i)
        if j is None:
            return None
        i = j + 1
        if i < n and (toks[i].kind in ("name", "number") or toks[i].text == "("):
            return factor_end(toks, i)              # a cast
    elif t.kind in ("name", "number", "string"):
        if t.text in KEYWORDS and t.text != "sizeof":
            return None
        i += 1
    else:
        return None
    while i < n:
        t = toks[i]
        if t.text in ("[", "("):
            j = match_close(toks, i)
            if j is None:
                return None
            i = j + 1
        elif t.text in (".", "->") and i + 1 < n and toks[i + 1].kind == "name":
            i += 2
        elif t.text in ("++", "--"):
            i += 1
        else:
            break
    return i


def term_end(toks, i):
    """End (exclusive) of the multiplicative term starting at toks[i]."""
    j = factor_end(toks, i)
    while j is not None and j < len(toks) and toks[j].text in ("*", "/", "%"):
        k = factor_end(toks, j + 1)
        if k is None:
            return None
        j = k
    return j


# ------------------------------------------------------------- functions

def src_name(toks, name, paren):
    return "".join(t.text for t in toks[name:paren])


def functions(toks):
    """(name, open, close) of each function body: a { at file scope whose
    tokens before it end with 'name ( ... )'."""
    out, i, depth = [], 0, 0
    while i < len(toks):
        t = toks[i].text
        if t == "{":
            if depth == 0 and i > 0 and toks[i - 1].text == ")":
                j = match_open(toks, i - 1)
                close = match_close(toks, i)
                name = j - 1
                if name > 0 and toks[name].text == ")":     # KERNEL(name)(...)
                    name = match_open(toks, name) - 1
                if name >= 0 and toks[name].kind == "name" and close is not None and \
                        not (name > 0 and toks[name - 1].text in ("struct", "union", "enum")):
                    out.append((src_name(toks, name, j), name, i, close))
                    i = close + 1
                    continue
            depth += 1
        elif t == "}":
            depth -= 1
        i += 1
    return out


STATUS_RETURN = re.compile(r"\breturn\s+(status|ATTN_OK|attn_fail\b|ATTN_E[A-Z]+\b)")


def declared_types(toks, lo, hi):
    """name -> declared type text ('size_t', 'const double *') for the
    simple declarations among toks[lo:hi] (parameters and locals)."""
    types = {}
    i = lo
    while i < hi:
        # a declaration: [qualifiers] type-name {*} name followed by , ; = ) [
        j = i
        words = []
        while j < hi and toks[j].kind == "name" and (toks[j].text in TYPE_WORDS):
            words.append(toks[j].text)
            j += 1
        if j < hi and toks[j].kind == "name" and toks[j].text not in KEYWORDS:
            base = toks[j].text
            k = j + 1
            stars = 0
            while k < hi and toks[k].text == "*":
                stars += 1
                k += 1
            if k < hi and toks[k].kind == "name" and k + 1 < hi and \
                    toks[k + 1].text in (",", ";", "=", ")", "[") and \
                    (i == lo or toks[i - 1].text in ("(", ",", ";", "{", "}")):
                types.setdefault(toks[k].text, " ".join(words + [base]) + "*" * stars)
        i += 1
    return types


# ------------------------------------------------------------- mutations

class Mutant:
    def __init__(self, path, src, start, end, new, kind):
        self.path, self.start, self.end, self.new, self.kind = path, start, end, new, kind
        self.line = src.count("\n", 0, start) + 1
        ls = src.rfind("\n", 0, start) + 1
        le = src.find("\n", end)
        le = len(src) if le < 0 else le
        self.before = src[ls:le]
        self.after = src[ls:start] + new + src[end:le]
        self.key = None
        self.outcome = None
        self.detail = ""

    def describe(self):
        nth = f"\nnth: {self.key[3]}" if self.key and self.key[3] > 1 else ""
        return (f"file: {self.path}\nfrom: {one_line(self.before)}\nto: {one_line(self.after)}{nth}\n"
                f"(line {self.line}, {self.kind})")


FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
CONSTANT = re.compile(r"^([012])(\.0*)?([uUlLfF]*)$")


def mutants_of(path, src):
    toks = tokenize(src)
    found = []

    def add(a, b, new, kind):
        found.append(Mutant(path, src, toks[a].start if isinstance(a, int) else a,
                            toks[b].end if isinstance(b, int) else b, new, kind))

    bodies = functions(toks)
    in_body = [False] * len(toks)
    for _, _, o, c in bodies:
        for k in range(o, c + 1):
            in_body[k] = True

    for i, t in enumerate(toks):
        if not in_body[i]:
            continue
        # relational flips
        if t.text in FLIP:
            add(i, i, FLIP[t.text], "relational")
        # constants
        if t.kind == "number":
            m = CONSTANT.match(t.text)
            if m:
                digit, frac, suffix = m.group(1), m.group(2) or "", m.group(3)
                to = {"0": "1", "1": "0", "2": "3"}[digit]
                add(i, i, to + frac + suffix, "constant")
        # +1 / -1 on an index: a [ ] after an operand, holding a variable
        if t.text == "[" and i > 0 and (toks[i - 1].kind == "name" or toks[i - 1].text in (")", "]")):
            j = match_close(toks, i)
            if j is not None and j > i + 1 and any(
                    toks[k].kind == "name" and not toks[k].text.isupper() for k in range(i + 1, j)):
                inside = src[toks[i + 1].start:toks[j - 1].end]
                found.append(Mutant(path, src, toks[i + 1].start, toks[j - 1].end,
                                    inside + " + 1", "index"))
                found.append(Mutant(path, src, toks[i + 1].start, toks[j - 1].end,
                                    inside + " - 1", "index"))
        # the right term of a binary + or - dropped
        if t.text in ("+", "-") and i > 0 and is_operand_end(toks[i - 1]):
            e = term_end(toks, i + 1)
            if e is not None and e > i + 1:
                found.append(Mutant(path, src, toks[i - 1].end, toks[e - 1].end, "", "term"))

    # swapped adjacent arguments of one declared type
    for name, _, o, c in bodies:
        types = declared_types(toks, o, c)          # locals
        k = match_open(toks, o - 1)                 # parameters: between ( and )
        types.update({a: b for a, b in declared_types(toks, k + 1, o).items() if a not in types})
        for i in range(o, c):
            t = toks[i]
            if t.kind != "name" or t.text in KEYWORDS or t.text in COMMUTATIVE:
                continue
            if toks[i + 1].text != "(":
                continue
            close = match_close(toks, i + 1)
            if close is None:
                continue
            args, depth, first = [], 0, i + 2
            for k in range(i + 2, close + 1):
                x = toks[k].text
                if x in ("(", "[", "{"):
                    depth += 1
                elif x in (")", "]", "}") and k < close:
                    depth -= 1
                elif (x == "," and depth == 0) or k == close:
                    args.append((first, k - 1))
                    first = k + 1
            for (a0, a1), (b0, b1) in zip(args, args[1:]):
                if a0 != a1 or b0 != b1:
                    continue                        # simple names only
                na, nb = toks[a0].text, toks[b0].text
                if na == nb or types.get(na) is None or types.get(na) != types.get(nb):
                    continue
                found.append(Mutant(path, src, toks[a0].start, toks[b1].end,
                                    nb + src[toks[a1].end:toks[b0].start] + na, "swap"))

    # a status returned replaced by ATTN_OK, in functions that return one
    for name, _, o, c in bodies:
        body = src[toks[o].start:toks[c].end]
        if not STATUS_RETURN.search(body):
            continue
        for i in range(o, c):
            if toks[i].text != "return":
                continue
            j = i + 1
            while j < c and toks[j].text != ";":
                if toks[j].text in ("(", "[", "{"):
                    j = match_close(toks, j)
                j += 1
            expr = src[toks[i + 1].start:toks[j - 1].end] if j > i + 1 else ""
            if expr and expr != "ATTN_OK" and re.match(r"^(status|rc|ATTN_E[A-Z]+|[a-z_0-9]+\(.*)$", expr, re.S) \
                    and not re.match(r"^(true|false|NULL|0|1|-1)$", expr):
                found.append(Mutant(path, src, toks[i + 1].start, toks[j - 1].end, "ATTN_OK", "status"))
    return found


def one_line(text):
    return " ".join(text.split())


def mutant_key(m):
    return (m.path, one_line(m.before), one_line(m.after))


def generate(files):
    """Every mutant of the files, each with a key (file, line before, line
    after, and which of equal keys it is) that survives edits elsewhere."""
    allm = []
    for path in files:
        with open(os.path.join(ROOT, path)) as f:
            src = f.read()
        ms = mutants_of(path, src)
        ms.sort(key=lambda m: (m.start, m.end, m.new))
        seen = {}
        for m in ms:
            k = mutant_key(m)
            seen[k] = seen.get(k, 0) + 1
            m.key = k + (seen[k],)
        # a mutation that leaves the text as it was is no mutant
        allm.extend(m for m in ms if m.before != m.after)
    return allm


# ------------------------------------------------------------ equivalents

def read_equivalents():
    """tests/mutate/equivalent: blocks of 'file:', 'line:', 'from:', 'to:',
    'why:' lines (see the file's head).  Returns {key: why}."""
    out = {}
    if not os.path.exists(EQUIVALENT):
        return out
    block = {}

    def flush(lineno):
        if not block:
            return
        for field in ("file", "from", "to", "why"):
            if field not in block:
                sys.exit(f"mutate: {EQUIVALENT}: the entry ending at line {lineno} has no '{field}:'")
        nth = int(block.get("nth", "1"))
        out[(block["file"], block["from"], block["to"], nth)] = block["why"]
        block.clear()

    with open(EQUIVALENT) as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            flush(n)
            continue
        m = re.match(r"^(file|from|to|why|nth):\s?(.*)$", line)
        if not m:
            sys.exit(f"mutate: {EQUIVALENT}:{n}: expected 'file:', 'from:', 'to:', 'why:' or 'nth:'")
        field, value = m.groups()
        if field == "why" and "why" in block:
            block["why"] += " " + value.strip()
        else:
            block[field] = value.strip()
    flush(len(lines))
    return out


def read_suites(path=SUITES):
    """tests/mutate/suites: 'PREFIX SUITE...' lines; the longest prefix of
    a file's path names its command-line suites, in order."""
    table = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            for s in line[1:]:
                if s in NOT_ALONE:
                    sys.exit(f"mutate: {SUITES}:{n}: {s} cannot judge a mutant (see the file's head)")
                if not os.path.exists(os.path.join(ROOT, "tests", "cli", s + ".sh")):
                    sys.exit(f"mutate: {SUITES}:{n}: no suite tests/cli/{s}.sh")
            table.append((line[0], line[1:]))
    return table


def suites_for(path, table):
    best = None
    for prefix, suites in table:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, suites)
    return best[1] if best else []


# ------------------------------------------------------------- the runner

# The process groups of the commands running now (each runs in its own
# session, so a test's children are in its group): ended on a timeout, and
# when the tool stops, so that no test of a stopped run goes on.
running_groups = set()
running_lock = threading.Lock()
stopping = False


def end_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def end_running_groups():
    global stopping
    with running_lock:
        stopping = True
        for pid in running_groups:
            end_group(pid)
        running_groups.clear()


def stopped(signum, _frame):
    """SIGINT, SIGTERM, SIGHUP: end every running test, then the tool (its
    journal holds every outcome judged; --resume carries them)."""
    end_running_groups()
    print(f"mutate: stopped by signal {signum}; tests ended", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def sh(cmd, cwd, limit=None, env=None):
    """(status, output); status None when it ran past limit seconds."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    with running_lock:
        running_groups.add(p.pid)
        if stopping:                     # started as the tool was stopped
            end_group(p.pid)
    try:
        out, _ = p.communicate(timeout=limit)
        status = p.returncode
    except subprocess.TimeoutExpired:
        end_group(p.pid)                 # its leader is not reaped yet
        out, _ = p.communicate()
        status = None
    finally:
        with running_lock:
            running_groups.discard(p.pid)
    return status, out.decode(errors="replace")


def object_of(path):
    """The object file a source of lib/ compiles into (an .inc into the .c
    that includes it)."""
    if path.endswith(".c"):
        return "build/" + path[:-2] + ".o"
    includer = {"lib/math/kernels.inc": "lib/math/math.c",
                "lib/math/summaries.inc": "lib/math/math.c"}
    return object_of(includer[path])


class Worker:
    """A scratch copy of the repository with its own build."""

    def __init__(self, n, files_to_copy, make_jobs, scratch):
        self.dir = os.path.join(scratch, f"tree{n}")
        self.make_jobs = make_jobs
        if os.path.isdir(self.dir):
            shutil.rmtree(self.dir)
        for rel in files_to_copy:
            dst = os.path.join(self.dir, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), dst)
        self.units = sorted("build/tests/" + f[:-2] for f in os.listdir(os.path.join(self.dir, "tests", "unit"))
                            if f.startswith("test_") and f.endswith(".c"))
        self.env = dict(os.environ, ATTNRUN="build/attnrun", ATTN_TEST_FAIL_FAST="1",
                        PYTHON=os.environ.get("PYTHON", "/usr/bin/python3"))
        self.env.pop("FAULT_ATTNRUN", None)
        self.env.pop("MAKEFLAGS", None)
        self.env.pop("MFLAGS", None)
        self.env.pop("MAKELEVEL", None)

    def make(self):
        return sh(["make", "--no-print-directory", "-s", f"-j{self.make_jobs}", "WERROR=1",
                   "build/attnrun"] + self.units, self.dir, env=self.env)

    def stripped(self, obj):
        out = os.path.join(self.dir, "build", "mutate-stripped.o")
        status, said = sh(["objcopy", "--strip-debug", obj, out], self.dir)
        if status != 0:
            raise RuntimeError(f"objcopy failed on {obj}: {said}")
        with open(out, "rb") as f:
            return f.read()

    def baseline(self, paths):
        status, said = self.make()
        if status != 0:
            return f"the unmutated build failed:\n{said[-2000:]}"
        self.saved = {}
        for p in set(object_of(p) for p in paths):
            full = os.path.join(self.dir, p)
            keep = full + ".baseline"
            shutil.copy2(full, keep)
            self.saved[p] = (keep, self.stripped(p))
        self.unit_limit = {}
        for u in self.units:
            began = time.monotonic()
            status, said = sh([u], self.dir, UNIT_LIMIT_S, self.env)
            if status != 0:
                return f"{u} fails unmutated:\n{said[-2000:]}"
            self.unit_limit[u] = UNIT_LIMIT_FLOOR_S + UNIT_LIMIT_FACTOR * (time.monotonic() - began)
        return None

    def run_suite(self, suite, tier="full"):
        return sh(["bash", f"tests/cli/{suite}.sh"], self.dir, SUITE_LIMIT_S,
                  dict(self.env, ATTN_TEST_TIER=tier))

    def judge(self, m, suites):
        src_path = os.path.join(self.dir, m.path)
        with open(src_path) as f:
            original = f.read()
        st = os.stat(src_path)
        obj = object_of(m.path)
        try:
            with open(src_path, "w") as f:
                f.write(original[:m.start] + m.new + original[m.end:])
            # make must see the source newer than the object
            os.utime(src_path, ns=(st.st_atime_ns, max(st.st_mtime_ns, time.time_ns()) + 1_000_000_000))
            status, said = self.make()
            if status != 0:
                errors = [l for l in said.splitlines() if ": error" in l]
                lines = errors or said.strip().splitlines() or ["make failed"]
                return "build-failed", lines[0]
            if self.stripped(obj) == self.saved[obj][1]:
                return "same-object", ""
            for u in self.units:
                limit = self.unit_limit[u]
                status, said = sh([u], self.dir, limit, self.env)
                if status is None:
                    return "killed", f"{os.path.basename(u)}: past {limit:.0f} s"
                if status != 0:
                    return "killed", f"{os.path.basename(u)}: {first_failure(said)}"
            # The quick tier first (the smoke suite and each judging suite's
            # first checks), then the judging suites whole.
            for tier, names in (("quick", ["test_smoke"] + suites), ("full", suites)):
                for s in names:
                    status, said = self.run_suite(s, tier)
                    if status is None:
                        return "killed", f"{s}: past {SUITE_LIMIT_S} s"
                    if status != 0:
                        return "killed", f"{s}{' (quick)' if tier == 'quick' else ''}: {first_failure(said)}"
            return "survived", " ".join(["cmocka", "test_smoke"] + suites)
        finally:
            with open(src_path, "w") as f:
                f.write(original)
            os.utime(src_path, ns=(st.st_atime_ns, st.st_mtime_ns))
            keep = self.saved[obj][0]
            shutil.copy2(keep, os.path.join(self.dir, obj))
            # Whatever was linked or compiled from the mutant goes: the
            # library, and every binary (test_nearest compiles
            # lib/core/names.c itself, so that the restored source, back at
            # its old time, would not rebuild it).
            for built in ["build/libattn.a", "build/attnrun"] + self.units:
                path = os.path.join(self.dir, built)
                if os.path.exists(path):
                    os.remove(path)


def first_failure(out):
    for line in out.splitlines():
        if line.startswith("FAIL") or "[  FAILED  ]" in line or "[  ERROR   ]" in line:
            return line.strip()[:200]
    lines = [l for l in out.splitlines() if l.strip()]
    return (lines[-1].strip() if lines else "ended nonzero")[:200]


def tracked_files():
    status, out = sh(["git", "ls-files", "-co", "--exclude-standard"], ROOT)
    if status == 0:
        return [f for f in out.splitlines() if f and os.path.isfile(os.path.join(ROOT, f))]
    keep = []
    for top in ("Makefile", "include", "lib", "cmd", "tests", "fixtures", "scripts", "docs",
                "man", "README.md", "bench"):
        p = os.path.join(ROOT, top)
        if os.path.isfile(p):
            keep.append(top)
        for d, _, fs in os.walk(p):
            keep += [os.path.relpath(os.path.join(d, f), ROOT) for f in fs]
    return keep


def lib_files():
    out = []
    for d, _, fs in os.walk(os.path.join(ROOT, "lib")):
        for f in fs:
            if f.endswith(".c") or f.endswith(".inc"):
                out.append(os.path.relpath(os.path.join(d, f), ROOT))
    return sorted(out)


# --------------------------------------------------------------- report

def table(mutants, listed_by_file, files):
    rows = []
    head = ("file", "mutants", "equivalent", "run", "same-object", "build-failed",
            "killed", "survived", "kill rate")
    tot = [0] * 7
    for f in files:
        ms = [m for m in mutants if m.path == f]
        listed = listed_by_file.get(f, 0)
        gen = len(ms) + listed
        run = [m for m in ms if m.outcome]
        if not gen:
            continue
        cnt = [gen, listed, len(run)] + [sum(1 for m in run if m.outcome == o)
                                         for o in ("same-object", "build-failed", "killed", "survived")]
        tot = [a + b for a, b in zip(tot, cnt)]
        rows.append((f,) + tuple(cnt) + (rate(cnt[5], cnt[6]),))
    rows.append(("all",) + tuple(tot) + (rate(tot[5], tot[6]),))
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    lines = ["  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [head] + rows]
    return "\n".join(lines)


def record(m):
    """A judged mutant as report.json and the journal hold it."""
    return {"file": m.path, "line": m.line, "kind": m.kind, "from": one_line(m.before),
            "to": one_line(m.after), "nth": m.key[3], "outcome": m.outcome, "detail": m.detail,
            "seconds": round(getattr(m, "seconds", 0), 1)}


def rate(killed, survived):
    return f"{100.0 * killed / (killed + survived):.1f} %" if killed + survived else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mutants", type=int, default=0, help="a sample of N mutants (0: all)")
    ap.add_argument("--seed", type=int, default=23, help="the sample's seed")
    ap.add_argument("--files", default="", help="only these files of lib/ (comma-separated prefixes)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants judged at once (one scratch tree each)")
    ap.add_argument("--baseline", choices=("full", "quick"), default="full",
                    help="the tiers the unmutated build must pass first: both (full), or the quick "
                    "one alone, where a run just before passed every suite's full tier on the "
                    "same sources and flags (CI's first stage)")
    ap.add_argument("--list", action="store_true", help="print the mutants drawn, run nothing")
    ap.add_argument("--confirm", action="store_true",
                    help="run every other suite on a survivor too, and say which one kills it")
    ap.add_argument("--scratch", default=os.path.join(ROOT, "build", "mutate"),
                    help="the folder of the scratch copies (one run at a time each)")
    ap.add_argument("--report", default=None,
                    help="where report.txt and report.json go, without the extension "
                         "(default: SCRATCH/report)")
    ap.add_argument("--suites", default=SUITES, help="the table of suites per file")
    ap.add_argument("--only", default="",
                    help="only the mutants at these FILE:LINE places (comma-separated)")
    ap.add_argument("--again", default="",
                    help="a report.json: judge again the mutants that survived there, the "
                         "others keep their outcome (the table after new tests)")
    ap.add_argument("--resume", default="",
                    help="a journal (REPORT.journal) of a run stopped early: its mutants keep "
                         "their outcome, the rest of the sample is judged")
    ap.add_argument("--tally", action="store_true",
                    help="with --resume: print the table of the outcomes judged so far, run nothing")
    args = ap.parse_args()
    if args.mutants < 0 or args.jobs < 1:
        ap.error("--mutants must be 0 or more, --jobs 1 or more")
    if args.tally and not args.resume:
        ap.error("--tally reads the outcomes of --resume JOURNAL")

    files = lib_files()
    if args.files:
        prefixes = [p for p in args.files.split(",") if p]
        files = [f for f in files if any(f.startswith(p) for p in prefixes)]
        if not files:
            ap.error(f"no file of lib/ starts with {args.files}")
    equivalents = read_equivalents()
    suite_table = read_suites(args.suites)
    every = generate(files)
    known = {m.key for m in every}
    stale = [k for k in equivalents if k[0] in files and k not in known]
    for k in stale:
        print(f"mutate: warning: {EQUIVALENT} lists a mutant no longer made: {k[0]}: {k[1]} => {k[2]}",
              file=sys.stderr)
    if args.report is None:
        args.report = os.path.join(args.scratch, "report")
    # The sample is drawn from every mutant, so that listing one as
    # equivalent leaves the rest of a seed's sample as it was.
    drawn = every if args.mutants == 0 or args.mutants >= len(every) else \
        random.Random(args.seed).sample(every, args.mutants)
    if args.only:
        places = set(args.only.split(","))
        drawn = [m for m in every if f"{m.path}:{m.line}" in places]
    kept = {}                                   # key -> outcome, detail of --again
    if args.again:
        with open(args.again) as f:
            earlier = json.load(f)
        by_key = {(e["file"], one_line(e["from"]), one_line(e["to"]), e["nth"]): e for e in earlier}
        drawn = [m for m in every if m.key in by_key]
        for m in drawn:
            e = by_key[m.key]
            if e["outcome"] != "survived":
                kept[m.key] = (e["outcome"], e["detail"])
        gone = len(by_key) - len(drawn)
        if gone:
            print(f"mutate: {gone} mutants of {args.again} are no longer made (their code changed)",
                  file=sys.stderr)
    if args.resume:
        with open(args.resume) as f:
            for line in f:
                e = json.loads(line)
                kept[(e["file"], one_line(e["from"]), one_line(e["to"]), e["nth"])] = \
                    (e["outcome"], e["detail"])
    listed_by_file = {}
    sample = []
    for m in drawn:
        if m.key in equivalents:
            listed_by_file[m.path] = listed_by_file.get(m.path, 0) + 1
        else:
            sample.append(m)
    for m in sample:
        if m.key in kept:
            m.outcome, m.detail = kept[m.key]
    carried = [m for m in sample if m.outcome]
    sample.sort(key=lambda m: (m.path, m.start, m.new))
    print(f"mutate: {len(every)} mutants of {len(files)} files ({len(equivalents)} listed as equivalent); "
          f"drew {len(drawn)}" +
          (f" with seed {args.seed}" if len(drawn) < len(every) and not (args.only or args.again) else "") +
          f", of which {len(drawn) - len(sample)} listed: running {len(sample) - len(carried)}"
          + (f" ({len(carried)} keep their outcome)" if carried else ""), flush=True)
    if args.list:
        for m in sample:
            print(m.describe())
        return 0
    if args.tally:
        print(table(sample, listed_by_file, files))
        print(f"{len(carried)} of the {len(sample)} mutants of the sample judged")
        return 0

    start = time.time()
    copy = tracked_files()
    jobs = min(args.jobs, max(1, len(sample) - len(carried)))
    workers = [Worker(n, copy, max(1, 2 // jobs), os.path.abspath(args.scratch)) for n in range(jobs)]
    for w in workers:
        problem = w.baseline(files)
        if problem:
            print(f"mutate: {problem}", file=sys.stderr)
            return 2
    needed = sorted({s for m in sample if not m.outcome for s in suites_for(m.path, suite_table)}
                    | {"test_smoke"})
    pending = list(needed)
    failures = []

    def check_suites(w):
        while True:
            with lock:
                if not pending:
                    return
                suite = pending.pop(0)
            # both tiers: a mutant is judged by the quick one first
            for tier in ("quick", "full") if args.baseline == "full" else ("quick",):
                status, said = w.run_suite(suite, tier)
                if status != 0:
                    with lock:
                        failures.append(f"{suite} fails unmutated ({tier} tier): {first_failure(said)}")
                    break

    lock = threading.Lock()
    threads = [threading.Thread(target=check_suites, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        print("mutate: " + "\nmutate: ".join(failures), file=sys.stderr)
        return 2
    print(f"mutate: the unmutated build passes its cmocka tests and {len(needed)} suites "
          f"({'both tiers' if args.baseline == 'full' else 'the quick tier'}, "
          f"{time.time() - start:.0f} s)", flush=True)

    # Judged in an order drawn with the seed, not file by file, so that the
    # mutants judged before a stop (the journal) are a sample of the sample.
    queue = [m for m in sample if not m.outcome]
    random.Random(args.seed).shuffle(queue)
    done = [0]
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    journal = open(args.report + ".journal", "a")

    def work(w):
        while True:
            with lock:
                if not queue:
                    return
                m = queue.pop(0)
            t0 = time.time()
            m.outcome, m.detail = w.judge(m, suites_for(m.path, suite_table))
            m.seconds = time.time() - t0
            with lock:
                done[0] += 1
                print(f"[{done[0]}/{len(sample) - len(carried)}] {m.outcome:12} {m.path}:{m.line} [{m.kind}] "
                      f"{m.after.strip()[:70]}  ({m.seconds:.0f} s) {m.detail[:90]}", flush=True)
                journal.write(json.dumps(record(m)) + "\n")
                journal.flush()

    threads = [threading.Thread(target=work, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    journal.close()

    if args.confirm:
        every_suite = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "tests", "cli"))
                             if f.startswith("test_") and f.endswith(".sh") and f[:-3] not in NOT_ALONE)
        for m in [m for m in sample if m.outcome == "survived"]:
            ran = suites_for(m.path, suite_table)
            outcome, detail = workers[0].judge(m, [s for s in every_suite if s not in ran])
            if outcome == "killed":
                m.detail = f"survived its own suites; killed by {detail}"
                print(f"confirm: {m.path}:{m.line} {m.detail}", flush=True)

    survivors = [m for m in sample if m.outcome == "survived"]
    text = [table(sample, listed_by_file, files), ""]
    text.append(f"{len(sample)} mutants in {time.time() - start:.0f} s; kinds: " +
                ", ".join(f"{k} {sum(1 for m in sample if m.kind == k)}" for k in KINDS))
    if survivors:
        text.append(f"\n{len(survivors)} survived (add a test that kills each, or list it in "
                    f"tests/mutate/equivalent with the reason):")
        for m in survivors:
            text.append(m.describe())
    report = "\n".join(text)
    print(report)
    os.makedirs(os.path.dirname(args.report), exist_ok=True)
    with open(args.report + ".txt", "w") as f:
        f.write(report + "\n")
    with open(args.report + ".json", "w") as f:
        json.dump([record(m) for m in sample], f, indent=1)
    return 1 if survivors else 0


if __name__ == "__main__":
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stopped)
    try:
        sys.exit(main())
    finally:
        end_running_groups()
