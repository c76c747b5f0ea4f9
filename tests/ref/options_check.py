"""tests/ref/options_check.py - the options of a command, named alike in its
option table, its --help and the manual page, for tests/cli/test_options.sh.

    python3 tests/ref/options_check.py COMMAND BIN MAN ROOT

COMMAND is attnrun (the run) or a subcommand: plot, rollout, flow, heads,
view.

Collects each command's options four ways, independently of each other:
  table  the rows of its cli_option table in the source (SOURCES:
         cmd/attnrun/options.c, cmd/plot/plot.c, cmd/rollout/rollout.c,
         cmd/heads/heads.c, cmd/view/view.c): `{"name", 'x', ...` and the DATASET rows, read
         as text
  help   the option lines of `BIN [SUBCOMMAND] --help` (an option at the
         start of a line, before the text that follows the options:
         HELP_END)
  man    the tag lines of its section of the manual page, rendered by man
         (SECTIONS: OPTIONS up to PLOT for attnrun, PLOT up to ROLLOUT,
         ROLLOUT up to FLOW, FLOW up to HEADS, HEADS up to VIEW, VIEW up to
         MPI)
  getopt BIN itself: every option of the table is accepted (the program
         never says "unknown option" of it)
and prints an ok/FAIL line for each agreement, long names and short
letters alike.  Exit 0 (the verdicts say how it went).
"""
import os
import re
import subprocess
import sys

SOURCES = {"attnrun": "cmd/attnrun/options.c", "plot": "cmd/plot/plot.c",
           "rollout": "cmd/rollout/rollout.c", "flow": "cmd/rollout/rollout.c",
           "heads": "cmd/heads/heads.c", "view": "cmd/view/view.c"}
# Where a table's rows are in its source: (start, end) spans of text, by
# default its `options` table; rollout and flow share the rows of two
# macros, each table adding its own.
WHOLE_MODEL = ("#define WHOLE_MODEL_OPTIONS", "/* The options of attnrun rollout. */")
SPANS = {"rollout": [WHOLE_MODEL, ("static const cli_option rollout_options[] = {", "};")],
         "flow": [WHOLE_MODEL, ("static const cli_option flow_options[] = {", "};")]}
TABLE = [("static const cli_option options[] = {", "{NULL}")]
# Each command's section of the manual page: from its heading to the next.
SECTIONS = {"attnrun": ("OPTIONS", "PLOT"), "plot": ("PLOT", "ROLLOUT"),
            "rollout": ("ROLLOUT", "FLOW"), "flow": ("FLOW", "HEADS"), "heads": ("HEADS", "VIEW"),
            "view": ("VIEW", "MPI")}
# The first words of --help after the options.
HELP_END = {"attnrun": "Outputs (--save):", "plot": "Colours:", "rollout": "OUT.h5 holds",
            "flow": "OUT.h5 holds", "heads": "Scores (p:", "view": "Examples:"}
# The fewest option names (long and short) each table has: a table read
# wrong comes out short.
AT_LEAST = {"attnrun": 40, "plot": 6, "rollout": 10, "flow": 12, "heads": 8, "view": 10}


def command_line(binary, command):
    """BIN, or BIN SUBCOMMAND."""
    return [binary] + ([] if command == "attnrun" else [command])


def verdict(ok, name, detail=""):
    print(("ok " if ok else "FAIL ") + name + (": " + detail if detail and not ok else ""))


def from_table(root, command):
    """{'--name', '-x', ...} of the table's rows."""
    text = open(os.path.join(root, SOURCES[command])).read()
    body = ""
    for start, end in SPANS.get(command, TABLE):
        span = text[text.index(start):]
        body += span[:span.index(end)]
    names = set()
    for m in re.finditer(r'^\s*\{"([a-z][a-z-]*)",\s*(?:\'(.)\'|0)', body, re.M):
        names.add("--" + m.group(1))
        if m.group(2):
            names.add("-" + m.group(2))
    names.update("--" + m for m in re.findall(r'^\s*DATASET\("([a-z][a-z-]*)"', body, re.M))
    return names


def from_help(binary, command):
    argv = command_line(binary, command) + ["--help"]
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    out = out[:out.index(HELP_END[command])]
    names = set()
    for line in out.splitlines():
        m = re.match(r"^  (?:-(\w), |    )--([a-z][a-z-]*)", line)
        if m:
            names.add("--" + m.group(2))
            if m.group(1):
                names.add("-" + m.group(1))
    return names


def from_man(man, command):
    env = dict(os.environ, MANWIDTH="80")
    text = subprocess.run(["man", "-E", "UTF-8", "-l", man], capture_output=True, text=True,
                          env=env).stdout
    first, last = SECTIONS[command]
    lines = text.splitlines()
    start = lines.index(first)
    end = lines.index(last, start + 1)
    names = set()
    for line in lines[start:end]:
        if re.match(r"^ {7}-", line):
            tag = re.split(r"\s{2,}|\s(?=[A-Z][a-z])", line.strip())[0]
            names.update(re.findall(r"(?:^|[ ,])(--?[a-zA-Z][a-z-]*)", tag))
    return {n.strip(" ,") for n in names}


def unknown_to_getopt(binary, command, names):
    """The names BIN says are unknown options."""
    bad = []
    for name in sorted(names):
        argv = command_line(binary, command) + [name]
        err = subprocess.run(argv, capture_output=True, text=True, timeout=30).stderr
        if "unknown option" in err:
            bad.append(name)
    return bad


def main(argv):
    command, binary, man, root = argv[1:5]
    table = from_table(root, command)
    helped = from_help(binary, command)
    manned = from_man(man, command)
    verdict(len(table) >= AT_LEAST[command],
            "%s: the table has %d option names" % (command, len(table)))
    verdict(table == helped, "%s: --help lists exactly the table's %d options" % (command, len(table)),
            "only in the table %s, only in --help %s" % (sorted(table - helped), sorted(helped - table)))
    verdict(table == manned, "%s: the manual page has exactly the table's options" % command,
            "only in the table %s, only in the manual %s" % (sorted(table - manned), sorted(manned - table)))
    bad = unknown_to_getopt(binary, command, table)
    verdict(not bad, "%s: the program accepts every option of its table" % command,
            "unknown to it: %s" % bad)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
