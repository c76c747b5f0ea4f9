"""tests/ref/install_strings_check.py - no string literal of the library
names a command-line option (the library's messages speak of its own
settings; attnrun adds the option), for tests/cli/test_install.sh.

    python3 tests/ref/install_strings_check.py FILE...
        every string literal of each C FILE (adjacent ones joined, comments
        skipped); prints "N string literals", or exits nonzero listing the
        literals that name an option such as --force or -o
"""
import re
import sys

FLAG = re.compile(r"--[a-z]|(?<![\w-])-[a-zA-Z](?=[ :'\"]|$)")

def literals(text):
    """(line, value) of each string literal, adjacent literals joined."""
    i, line, out, joined = 0, 1, [], None
    while i < len(text):
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2) + 2
            line += text.count("\n", i, end)
            i = end
        elif c == "'":
            i = text.index("'", i + 1 + (text[i + 1] == "\\") + 1) + 1
        elif c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            value = text[i + 1:j]
            if joined is not None:
                out[-1] = (out[-1][0], out[-1][1] + value)
            else:
                out.append((line, value))
            joined, i = True, j + 1
        else:
            if c == "\n":
                line += 1
            if not c.isspace():
                joined = None
            i += 1
    return out


def main(paths):
    found, count = [], 0
    for path in paths:
        for line, value in literals(open(path).read()):
            count += 1
            if FLAG.search(value):
                found.append("%s:%d: \"%s\"" % (path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1],
                                                line, value[:100]))
    # The scanner itself must see what it looks for.
    assert FLAG.search("use --force to replace it") and FLAG.search("-o '': expected")
    assert not FLAG.search("-inf may mask") and not FLAG.search("key/value-heads")
    assert literals('a = "x" /* c */ "y"; // "z"\n') == [(1, "xy")]
    if found:
        sys.exit("library strings naming options:\n" + "\n".join(found))
    print("%d string literals" % count)


if __name__ == "__main__":
    main(sys.argv[1:])
