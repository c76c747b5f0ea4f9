"""tests/ref/man_help_check.py - the manual page and --help agree on the
values an option takes, for tests/cli/test_docs.sh.

    python3 tests/ref/man_help_check.py BIN MAN ROOT TMPDIR

tests/ref/options_check.py checks that the manual page, --help and the
option tables name the same options; this checks what the options take.
For every option of `attnrun`, `attnrun plot`, `attnrun rollout`,
`attnrun flow`, `attnrun heads` and `attnrun view` that takes a value, it asks the program itself which words
it accepts: it tries a nonsense value (the option is a choice when the
program refuses it by quoting it) and then each word of the option's
--help text and of that refusal, and keeps those the program does not
refuse.  Those are the option's choices
(--precision f32 f64, --save scores ... result, --preset gpt2 ...).  Then:
  * --help names every choice in the option's lines (or in the list it
    points to: "Outputs (--save):", "Presets (--preset):");
  * the manual page names every choice in the option's entry;
  * docs/outputs.md's table of datasets names every --save choice;
  * at least the options known to take choices were found to, and those
    known to check their values refused the nonsense (so that a change in
    how refusals read, or a command line that never reaches the option,
    cannot empty the check).
An option that accepts fewer than two of those words (a number, a path)
has no named choices and is left out.
Prints "ok NAME" or "FAIL NAME: WHY" per check and exits 0.
"""
import os
import re
import subprocess
import sys

BOGUS = "zqx9"
COMMANDS = ("attnrun", "plot", "rollout", "flow", "heads", "view")
HELP_END = {"attnrun": "Examples:", "plot": "Colours:", "rollout": "OUT.h5 holds",
            "flow": "OUT.h5 holds", "heads": "Scores (p:", "view": "Examples:"}
# Each command's section of the manual page: from its heading to the next.
SECTIONS = {"attnrun": ("OPTIONS", "PLOT"), "plot": ("PLOT", "ROLLOUT"),
            "rollout": ("ROLLOUT", "FLOW"), "flow": ("FLOW", "HEADS"), "heads": ("HEADS", "VIEW"),
            "view": ("VIEW", "MPI")}
# Options that must come out as taking choices, at the least.
EXPECTED = {"attnrun": {"--precision", "--store", "--layout", "--qkv-split", "--rope-style",
                        "--preset", "--save"},
            "plot": {"--what"},
            "rollout": set(),             # numbers and paths only
            "flow": set(),
            "heads": set(),
            "view": set()}
# Options that must refuse the nonsense value, quoting it, at the least.
CHECKED = {"attnrun": EXPECTED["attnrun"] | {"--heads", "--memory"},
           "plot": EXPECTED["plot"] | {"--item"},
           "rollout": {"--groups", "--residual", "--memory"},
           "flow": {"--groups", "--residual", "--memory", "--threads", "--to"},
           "heads": {"--groups"},
           "view": {"--groups", "--items", "--max-size"}}
# The command line each option is tried on, before the option and its value:
# toy.h5 is an input, results.h5 a copy of it (no results file).
TRIED_ON = {"attnrun": ["toy.h5", "--heads", "1", "--dry-run"],
            "plot": ["plot", "results.h5", "-o", "picture.png"],
            "rollout": ["rollout", "results.h5", "-o", "rollout.h5"],
            "flow": ["flow", "results.h5", "-o", "flow.h5"],
            "heads": ["heads", "results.h5"],
            "view": ["view", "results.h5", "-o", "view.html"]}
WORD = re.compile(r"[a-z][a-z0-9_-]*")


def verdict(good, name, detail=""):
    print(("ok " if good else "FAIL ") + name + ("" if good or not detail else ": " + detail))


def has_word(text, word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def help_entries(binary, command):
    """option -> its --help text (the lines of its entry, and a list such as
    "Outputs (--save):" that names it); the options that take a value."""
    argv = [binary] + ([] if command == "attnrun" else [command]) + ["--help"]
    text = subprocess.run(argv, capture_output=True, text=True).stdout
    text = text[:text.index(HELP_END[command])]
    entries, valued, current = {}, set(), None
    for line in text.splitlines():
        m = re.match(r"^  (?:-(\w), |    )(--[a-z][a-z-]*)(?: ([A-Z][A-Z]*))?(.*)$", line)
        if m:
            current = m.group(2)
            entries[current] = m.group(4)
            if m.group(3):
                valued.add(current)
        elif current and re.match(r"^ {10,}\S", line):
            entries[current] += " " + line.strip()
        else:
            current = None
    for title, body in re.findall(r"^\S.*\((--[a-z-]+)\):\n((?:  .*\n)+)", text, re.M):
        entries[title] = entries.get(title, "") + " " + body
    return entries, valued


def man_entries(man, command):
    """option -> the text of its entry in the manual page's section."""
    env = dict(os.environ, MANWIDTH="400")
    text = subprocess.run(["man", "-E", "UTF-8", "-l", man], capture_output=True, text=True,
                          env=env).stdout
    lines = text.splitlines()
    first, last = SECTIONS[command]
    lines = lines[lines.index(first):lines.index(last, lines.index(first) + 1)]
    entries, names = {}, []
    for line in lines:
        if re.match(r"^ {7}-", line):
            tag = re.split(r"\s{2,}|\s(?=[A-Z][a-z])", line.strip())[0]
            names = [n.strip(" ,") for n in re.findall(r"(?:^|[ ,])(--?[a-zA-Z][a-z-]*)", tag)]
            for n in names:
                entries[n] = line.strip()[len(tag):]
        elif names and re.match(r"^ {8,}\S", line):
            for n in names:
                entries[n] += " " + line.strip()
        elif line.strip():
            names = []
    return entries


def refused(binary, command, option, value, workdir):
    """Whether the program refuses value for option, quoting it."""
    argv = [binary] + TRIED_ON[command] + [option, value]
    err = subprocess.run(argv, capture_output=True, text=True, cwd=workdir, timeout=30).stderr
    return "'%s'" % value in err, err


def choices(binary, command, option, help_text, workdir):
    """The words option takes (none for a number or a path), or None when
    it takes any value."""
    is_refused, err = refused(binary, command, option, BOGUS, workdir)
    if not is_refused:
        return None
    words = {w for w in WORD.findall(help_text + " " + err.replace(BOGUS, "")) if len(w) <= 16}
    return sorted(w for w in words if not refused(binary, command, option, w, workdir)[0])


def main(argv):
    binary, man, root, workdir = (os.path.abspath(a) for a in argv[1:5])
    os.makedirs(workdir, exist_ok=True)
    # An input to read (the toy example) and a results file that is not one.
    import shutil
    shutil.copyfile(os.path.join(root, "fixtures", "toy.h5"), os.path.join(workdir, "toy.h5"))
    shutil.copyfile(os.path.join(root, "fixtures", "toy.h5"), os.path.join(workdir, "results.h5"))
    with open(os.path.join(root, "docs", "outputs.md"), encoding="utf-8") as f:
        outputs = f.read()
    datasets = set(re.findall(r"^\| `([a-z_]+)` \| \(", outputs, re.M))
    for command in COMMANDS:
        helped, valued = help_entries(binary, command)
        manned = man_entries(man, command)
        found, checked = {}, set()
        for option in sorted(valued):
            c = choices(binary, command, option, helped.get(option, ""), workdir)
            if c is not None:
                checked.add(option)
            if c is None or len(c) < 2:
                continue                  # any value, or numbers, paths: no named choices
            found[option] = c
            missing = [w for w in c if not has_word(helped.get(option, ""), w)]
            verdict(not missing, "%s %s: --help names its %d choices (%s)" % (
                command, option, len(c), " ".join(c)), "not %s" % missing)
            missing = [w for w in c if not has_word(manned.get(option, ""), w)]
            verdict(option in manned and not missing,
                    "%s %s: the manual page names its %d choices" % (command, option, len(c)),
                    "no entry" if option not in manned else "not %s" % missing)
            if option == "--save":
                verdict(set(c) <= datasets, "attnrun --save: docs/outputs.md's table of datasets "
                        "lists every choice", "missing %s" % sorted(set(c) - datasets))
        missing = EXPECTED[command] - set(found)
        if EXPECTED[command]:
            verdict(not missing, "%s: the options known to take choices were found to (%d in all)"
                    % (command, len(found)), "not found: %s" % sorted(missing))
        missing = CHECKED[command] - checked
        verdict(not missing, "%s: the options known to check their values refused '%s' "
                "(%d in all)" % (command, BOGUS, len(checked)), "not refused: %s" % sorted(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
