"""tests/ref/subcommands.py - the command line of the check modules of tests/ref
built on it: `MODULE.py COMMAND ARGS...` calls the function the module
names COMMAND with ARGS (strings).

A check passes when its function returns; what it printed is the detail a
suite shows after the check's name.  It fails through fail(WHY): WHY on
stdout (a suite reports the last line) and exit status 1.  A command the
module does not have, or the wrong number of arguments, prints the module's
docstring and exits 2.
"""
import inspect
import sys


def fail(why):
    print(why)
    sys.exit(1)


def check(why):
    """Fails with why unless it is empty (the convention of the *_differ and
    *_problem helpers: '' when all is well, else the reason)."""
    if why:
        fail(why)


def run(commands, doc, argv=None):
    """Calls commands[argv[1]] (a dict of functions by command name) with argv[2:]."""
    argv = sys.argv if argv is None else argv
    fn = commands.get(argv[1]) if len(argv) > 1 else None
    try:
        inspect.signature(fn).bind(*argv[2:])
    except (TypeError, ValueError):
        sys.stderr.write(doc)
        sys.exit(2)
    fn(*argv[2:])
