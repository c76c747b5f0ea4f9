#!/usr/bin/env bash
# tests/cli/test_tokens.sh - --tokens and --kv-tokens (README, Tokens):
#   * sources: string datasets (n) and (B, n), variable and fixed length,
#     null- and space-padded, ASCII and UTF-8 ("Ġthe", "日本", emoji), in
#     groups, and string-array attributes (OBJECT@ATTR, @ATTR for the
#     root); looked up from the root, not under --weights-group;
#   * the output: query_token and key_token, variable-length UTF-8,
#     attached to the dimension scales (batch, query / key), named in the
#     `coordinates` of every result along their axes; read back with h5py,
#     xarray (engines netcdf4 and h5netcdf) and ncdump -h;
#   * cross-attention: tokens label the queries only, unless --kv-tokens;
#   * more tokens than one read takes (4096): whole rows and parts of one
#     row, variable and fixed length; --batch-slice and --memory runs give
#     the same token datasets; --in-place, and --force over attnrun's own;
#   * every refusal: exit 3 (2 for usage), one line naming the problem, no
#     output file, the input unchanged; checked before any output exists
#     (--dry-run refuses too);
#   * with FAULT_ATTNRUN: every allocation of a tokens run failing in turn
#     ends with exit 1 and one line, nothing left, no sanitizer report.
# Expected tokens are the strings the fixtures were written with.  About
# 60 runs (plus the allocation sweep), ~15 s on two cores.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_tokens.sh     # from the repository root
#
# Environment:
#   ATTNRUN        the binary under test (default: build/attnrun)
#   FAULT_ATTNRUN  the fault-injection build (make builds build/fault/attnrun);
#                  the allocation sweep is skipped without it
#   PYTHON         a python with numpy, h5py, xarray, h5netcdf and netCDF4
#                  (default /usr/bin/python3)
#   NCDUMP         default ncdump (Debian: netcdf-bin)
#   TIME_LIMIT     hang guard of one run in seconds (default 30)
# Each check prints "ok NAME" or "FAIL NAME: WHY"; the last line is
# "tokens: N passed, M failed"; the exit status is 1 when M > 0.
set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
FAULT_ATTNRUN=${FAULT_ATTNRUN:-}
PY=${PYTHON:-/usr/bin/python3}
NCDUMP=${NCDUMP:-ncdump}
TIME_LIMIT=${TIME_LIMIT:-30}

SUITE="tokens"
TESTS=$(cd "$(dirname "$0")/.." && pwd)
. "$TESTS/lib/checks.sh"

suite_setup tokens numpy h5py xarray h5netcdf netCDF4
if ! command -v "$NCDUMP" >/dev/null 2>&1; then
    bad "setup: $NCDUMP not found (Debian: netcdf-bin)"
    finish
fi
case $FAULT_ATTNRUN in
    ""|/*) ;;
    *) FAULT_ATTNRUN=$PWD/$FAULT_ATTNRUN ;;
esac

# ------------------------------------------------------------- the inputs

# mk.py DIR: the fixtures DIR/<fixture>.h5, DIR/runs.tsv ("name TAB fixture
# TAB o|inplace TAB status TAB phrase TAB attnrun options": the phrase the
# one stderr line of a refusal must hold, "-" for a success) and
# DIR/runs.json (what verify.py expects of each run that succeeds).
cat >"$T/mk.py" <<'EOF'
import json, os, sys
import numpy as np
import h5py

top = sys.argv[1]
UTF8 = h5py.string_dtype("utf-8")
rng = np.random.default_rng(20261211)
runs, table = {}, []


def layer(f, X, D, group="", Y=None):
    """X (and Y) and the four weights, under group ("/w") or at the root."""
    f[group + "/X"] = X.astype(np.float32)
    if Y is not None:
        f["Y"] = Y.astype(np.float32)
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[group + "/" + w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)


def fixed(f, name, values, size, pad=None):
    """A fixed-length string dataset of `size` bytes (null-padded, as numpy
    writes 'S', or with the strpad given), ASCII character set."""
    t = h5py.h5t.C_S1.copy()
    t.set_size(size)
    if pad is not None:
        t.set_strpad(pad)
    fill = b" " if pad == h5py.h5t.STR_SPACEPAD else b"\0"
    data = np.array([(v if isinstance(v, bytes) else v.encode()).ljust(size, fill)
                     for v in np.ravel(values)], dtype="S%d" % size).reshape(np.shape(values))
    space = h5py.h5s.create_simple(data.shape)
    d = h5py.h5d.create(f.id, name.encode(), t, space)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=t)


def run(name, fix, args, status=0, phrase="", mode="o", **expect):
    table.append("\t".join([name, fix, mode, str(status), phrase or "-", " ".join(args)]))
    if status == 0:
        runs[name] = expect


# self: B = 2, n = 5 (self-attention)
Q2 = [["The", "Ġcat", "Ġsat", "Ġdown", "."], ["日本", "語", "😀", "", "naïve"]]
Q1 = ["a", "Ġthe", "日本", "😀", "x y"]
FIX = ["ab", "Ġt", "日本", "c", ""]
SPACE = ["a b", "cc", "d", "e f", "g"]
with h5py.File(os.path.join(top, "self.h5"), "w") as f:
    layer(f, rng.standard_normal((2, 5, 8)), 8)
    layer(f, rng.standard_normal((2, 5, 8)), 8, group="/w")   # --weights-group
    f["tok"] = np.array(Q2, dtype=UTF8)
    f["tok1"] = np.array(Q1, dtype=UTF8)
    f["ascii"] = np.array(["a", "b", "c", "d", "e"], dtype=h5py.string_dtype("ascii"))
    fixed(f, "fixed", FIX, 8)
    fixed(f, "fixed2", [FIX, FIX[::-1]], 8)
    fixed(f, "space", SPACE, 6, h5py.h5t.STR_SPACEPAD)
    f["text/tok"] = np.array(["t%d" % i for i in range(5)], dtype=UTF8)
    f["text"].attrs["tok"] = np.array(["g%d" % i for i in range(5)], dtype=UTF8)
    f["X"].attrs["tokens"] = np.array(["x%d" % i for i in range(5)], dtype=UTF8)
    f.attrs["tokens"] = np.array([["r%d%d" % (b, i) for i in range(5)] for b in range(2)], dtype=UTF8)
    f["w/tok"] = np.array(["wrong"] * 5, dtype=UTF8)
    f["user/query_token"] = np.array(Q1, dtype=UTF8)         # not attnrun's
    # refused
    f["short"] = np.array(Q1[:4], dtype=UTF8)
    f["long6"] = np.array(Q1 + ["z"], dtype=UTF8)
    f["rank3"] = np.array([[[q] for q in Q1]] * 2, dtype=UTF8)
    f["batch3"] = np.array([Q1] * 3, dtype=UTF8)
    f["ints"] = np.arange(5, dtype=np.int32)
    f["floats"] = np.linspace(0, 1, 5)
    f["pairs"] = np.zeros(5, dtype=[("a", "i4"), ("b", "f4")])
    fixed(f, "bad_utf8", [b"a", b"\xff", b"c", b"d", b"e"], 4)
    fixed(f, "overlong", [b"a", b"b", b"\xc0\xaf", b"d", b"e"], 4)
    fixed(f, "surrogate", [b"a", b"b", b"c", b"\xed\xa0\x80", b"e"], 4)
    fixed(f, "nul", [b"a", b"b\x00c", b"c", b"d", b"e"], 4)
    fixed(f, "huge_type", Q1, 5000)
    f["cut"] = np.array([b"a", b"b", b"c", b"d", b"\xe6\x97"], dtype=h5py.string_dtype("ascii"))
    f["bad2"] = np.array([[q.encode() for q in Q1], [b"a", b"b", b"c", b"\xe6\x97x", b"e"]],
                         dtype=h5py.string_dtype("ascii"))
    f["too_long"] = np.array(Q1[:4] + ["x" * 5000], dtype=UTF8)
    f.create_dataset("unwritten", (5,), dtype=UTF8)
    f["X"].attrs["one"] = "a b c d e"
    f["X"].attrs["ints"] = np.arange(5)

# rank2: X (n, D), no batch axis
with h5py.File(os.path.join(top, "rank2.h5"), "w") as f:
    layer(f, rng.standard_normal((4, 8)), 8)
    f["tok"] = np.array(["w", "x", "y", "z"], dtype=UTF8)
    f["tok_b1"] = np.array([["w", "x", "y", "z"]], dtype=UTF8)

# cross: X (2, 3, D), Y (2, 4, D)
QT = ["q0", "q1", "Ġq2"]
KT = [["k0", "k1", "k2", "k3"], ["l0", "日", "l2", "😀"]]
with h5py.File(os.path.join(top, "cross.h5"), "w") as f:
    layer(f, rng.standard_normal((2, 3, 8)), 8, Y=rng.standard_normal((2, 4, 8)))
    f["qt"] = np.array(QT, dtype=UTF8)
    f["kt"] = np.array(KT, dtype=UTF8)
    f["Y"].attrs["tokens"] = np.array(KT[1], dtype=UTF8)
    f["kt_bad"] = np.array(["a"] * 5, dtype=UTF8)

# big: 3 x 2000 tokens, more than one read holds (whole rows per read)
BIG = [["%d·%d" % (b, i) for i in range(2000)] for b in range(3)]
with h5py.File(os.path.join(top, "big.h5"), "w") as f:
    layer(f, rng.standard_normal((3, 2000, 4)), 4)
    f["tok"] = np.array(BIG, dtype=UTF8)
    fixed(f, "fixed", [("w%d" % i).ljust(250, "-") for i in range(2000)], 300)
# long: one row of 5000 tokens, split across reads
LONG = ["t%d" % i for i in range(5000)]
with h5py.File(os.path.join(top, "long.h5"), "w") as f:
    layer(f, rng.standard_normal((1, 5000, 4)), 4)
    f["tok"] = np.array([LONG], dtype=UTF8)
    fixed(f, "fixed", LONG, 8)

H2 = ["-H", "2"]
ALL = ["--save", "scores,weights,heads,output,q,k,v"]
BOTH, QUERY, KEY = "query_token key_token", "query_token", "key_token"
SELF = {"scores": BOTH, "weights": BOTH, "heads": QUERY, "output": QUERY, "q": QUERY,
        "k": KEY, "v": KEY}


run("vlen2", "self", H2 + ALL + ["--tokens", "tok"], q=Q2, qdims=["batch", "query"],
    k=Q2, kdims=["batch", "key"], coords=SELF, source="tok")
run("vlen1", "self", H2 + ["--tokens", "tok1"], q=Q1, qdims=["query"], k=Q1, kdims=["key"],
    coords={"scores": BOTH, "weights": BOTH, "heads": QUERY, "output": QUERY})
run("ascii", "self", H2 + ["--tokens", "ascii", "--save", "output"], q=list("abcde"),
    qdims=["query"], k=list("abcde"), kdims=["key"], coords={"output": QUERY})
run("fixed", "self", H2 + ["--tokens", "fixed"], q=FIX, qdims=["query"], k=FIX, kdims=["key"])
run("fixed2", "self", H2 + ["--tokens", "fixed2"], q=[FIX, FIX[::-1]], qdims=["batch", "query"],
    k=[FIX, FIX[::-1]], kdims=["batch", "key"])
run("space", "self", H2 + ["--tokens", "space"], q=SPACE, qdims=["query"], k=SPACE, kdims=["key"])
run("group", "self", H2 + ["--tokens", "/text/tok"], q=["t%d" % i for i in range(5)],
    qdims=["query"], k=["t%d" % i for i in range(5)], kdims=["key"])
run("relative", "self", H2 + ["--tokens", "text/tok", "--save", "weights"],
    q=["t%d" % i for i in range(5)], qdims=["query"], k=["t%d" % i for i in range(5)], kdims=["key"])
run("attr_x", "self", H2 + ["--tokens", "X@tokens"], q=["x%d" % i for i in range(5)],
    qdims=["query"], k=["x%d" % i for i in range(5)], kdims=["key"], source="X@tokens")
run("attr_group", "self", H2 + ["--tokens", "/text@tok"], q=["g%d" % i for i in range(5)],
    qdims=["query"], k=["g%d" % i for i in range(5)], kdims=["key"])
R = [["r%d%d" % (b, i) for i in range(5)] for b in range(2)]
run("attr_root", "self", H2 + ["--tokens", "@tokens", "--group", "/res/a"], q=R,
    qdims=["batch", "query"], k=R, kdims=["batch", "key"], group="/res/a")
run("weights_group", "self", H2 + ["--weights-group", "/w", "--x", "/w/X", "--tokens", "tok"],
    q=Q2, qdims=["batch", "query"], k=Q2, kdims=["batch", "key"])
run("slice1", "self", H2 + ALL + ["--tokens", "tok", "--batch-slice", "1"], q=Q2,
    qdims=["batch", "query"], k=Q2, kdims=["batch", "key"], same_as="vlen2")
run("memory", "self", H2 + ALL + ["--tokens", "tok", "--memory", "1K", "--threads", "1"], q=Q2,
    qdims=["batch", "query"], k=Q2, kdims=["batch", "key"], same_as="vlen2")
run("rank2", "rank2", ["-H", "2", "--tokens", "tok"], q=list("wxyz"), qdims=["query"],
    k=list("wxyz"), kdims=["key"], coords={"scores": BOTH, "weights": BOTH, "heads": QUERY,
                                           "output": QUERY})
CROSS_ALL = ["--kv", "Y", "--save", "weights,heads,output,k,v"]
run("cross_q", "cross", H2 + CROSS_ALL + ["--tokens", "qt"], q=QT, qdims=["query"], k=None,
    coords={"weights": QUERY, "heads": QUERY, "output": QUERY, "k": None, "v": None})
run("cross_qk", "cross", H2 + CROSS_ALL + ["--tokens", "qt", "--kv-tokens", "kt"], q=QT,
    qdims=["query"], k=KT, kdims=["batch", "key"],
    coords={"weights": BOTH, "heads": QUERY, "output": QUERY, "k": KEY, "v": KEY})
run("cross_k", "cross", H2 + ["--kv", "Y", "--kv-tokens", "Y@tokens"], q=None, k=KT[1],
    kdims=["key"], coords={"scores": KEY, "weights": KEY, "heads": None, "output": None})
run("big", "big", ["-H", "1", "--save", "output", "--tokens", "tok"], q=BIG,
    qdims=["batch", "query"], k=BIG, kdims=["batch", "key"], coords={"output": QUERY})
FB = [("w%d" % i).ljust(250, "-") for i in range(2000)]
run("big_fixed", "big", ["-H", "1", "--save", "output", "--tokens", "fixed"], q=FB,
    qdims=["query"], k=FB, kdims=["key"])
run("long", "long", ["-H", "1", "--save", "output", "--tokens", "tok"], q=[LONG],
    qdims=["batch", "query"], k=[LONG], kdims=["batch", "key"])
run("long_fixed", "long", ["-H", "1", "--save", "output", "--tokens", "fixed"], q=LONG,
    qdims=["query"], k=LONG, kdims=["key"])
run("inplace", "self", H2 + ["--group", "/r", "--tokens", "tok", "--save", "output"],
    mode="inplace", q=Q2, qdims=["batch", "query"], k=Q2, kdims=["batch", "key"], group="/r",
    coords={"output": QUERY})

# refusals: (name, fixture, options, status, phrase)
REFUSE = [
    ("short", "self", ["--tokens", "short"], 3,
     "the tokens dataset short has shape (4,); expected (5,) or (2, 5): one token per query of X"),
    ("long6", "self", ["--tokens", "long6"], 3, "has shape (6,); expected (5,) or (2, 5)"),
    ("rank3", "self", ["--tokens", "rank3"], 3, "has shape (2, 5, 1); expected"),
    ("batch3", "self", ["--tokens", "batch3"], 3, "has shape (3, 5); expected (5,) or (2, 5)"),
    ("ints", "self", ["--tokens", "ints"], 3, "the tokens dataset ints has integer elements; strings expected"),
    ("floats", "self", ["--tokens", "floats"], 3, "floating-point elements; strings expected"),
    ("pairs", "self", ["--tokens", "pairs"], 3, "compound elements; strings expected"),
    ("bad_utf8", "self", ["--tokens", "bad_utf8"], 3, "token [1] is not valid UTF-8 (1 bytes; byte 0 is 0xff)"),
    ("overlong", "self", ["--tokens", "overlong"], 3, "token [2] is not valid UTF-8 (2 bytes; byte 0 is 0xc0)"),
    ("surrogate", "self", ["--tokens", "surrogate"], 3, "token [3] is not valid UTF-8 (3 bytes; byte 1 is 0xa0)"),
    ("cut", "self", ["--tokens", "cut"], 3, "token [4] is not valid UTF-8 (2 bytes; it ends inside a character)"),
    ("bad2", "self", ["--tokens", "bad2"], 3,
     "the tokens dataset bad2: token [1, 3] is not valid UTF-8 (3 bytes; byte 2 is 0x78)"),
    ("nul", "self", ["--tokens", "nul"], 3, "token [1] holds a NUL byte (3 bytes; byte 1 is 0x00)"),
    ("too_long", "self", ["--tokens", "too_long"], 3, "token [4] is too long (5000 bytes; at most 4096 per token)"),
    ("unwritten", "self", ["--tokens", "unwritten"], 3, "unwritten stores 0 bytes for"),
    ("huge_type", "self", ["--tokens", "huge_type"], 3, "fixed-length strings of 5000 bytes; at most 4096"),
    ("attr_one", "self", ["--tokens", "X@one"], 3,
     "the tokens attribute one of X has shape () (one string, not an array); expected (5,) or (2, 5)"),
    ("attr_ints", "self", ["--tokens", "X@ints"], 3, "integer elements; strings expected"),
    ("missing", "self", ["--tokens", "nope"], 3, "the tokens dataset nope does not exist"),
    ("missing_attr", "self", ["--tokens", "X@nope"], 3, "the tokens attribute nope of X does not exist"),
    ("missing_object", "self", ["--tokens", "nope@tokens"], 3, "there is no object nope"),
    ("not_in_weights_group", "self", ["--weights-group", "/w", "--tokens", "text@tok2"], 3,
     "the tokens attribute tok2 of text does not exist"),
    ("rank2_batch", "rank2", ["--tokens", "tok_b1"], 3, "has shape (1, 4); expected (4,): one token per query of X"),
    ("cross_bad", "cross", ["--kv", "Y", "--tokens", "qt", "--kv-tokens", "kt_bad"], 3,
     "the key tokens dataset kt_bad has shape (5,); expected (4,) or (2, 4): one token per key of Y"),
    ("cross_swapped", "cross", ["--kv", "Y", "--tokens", "kt"], 3,
     "has shape (2, 4); expected (3,) or (2, 3): one token per query of X"),
    ("kv_tokens_self", "self", ["--kv-tokens", "tok"], 2, "--kv-tokens labels the keys of --kv"),
    ("empty", "self", ["--tokens", ""], 2, "--tokens '': expected a dataset name"),
    ("no_attribute", "self", ["--tokens", "X@"], 2, "--tokens 'X@': no attribute name after '@'"),
    ("inplace_bad", "self", ["--group", "/r", "--tokens", "nul"], 3, "holds a NUL byte", "inplace"),
    ("inplace_user", "self", ["--group", "/user", "--force", "--tokens", "tok"], 2,
     "group /user has an object named 'query_token' that attnrun did not write", "inplace"),
    ("dry_bad", "self", ["--dry-run", "--tokens", "bad_utf8"], 3, "is not valid UTF-8"),
]
for name, fix, args, status, phrase, *mode in REFUSE:
    run("refuse_" + name, fix, ["-H", "2"] + args, status=status, phrase=phrase,
        mode=mode[0] if mode else "o")
run("dry_ok", "self", H2 + ["--dry-run", "--tokens", "tok"], status=0, phrase="", dry=True)

with open(os.path.join(top, "runs.tsv"), "w") as out:
    out.write("\n".join(table) + "\n")
json.dump(runs, open(os.path.join(top, "runs.json"), "w"), indent=1)
EOF

mkdir -p "$T/c" "$T/o"
if ! "$PY" "$T/mk.py" "$T/c" >"$T/mk.log" 2>&1; then
    bad "setup: generating the inputs failed: $(tail -n 3 "$T/mk.log")"
    finish
fi
ok "fixtures generated ($(wc -l <"$T/c/runs.tsv") runs)"

# ------------------------------------------------------------ the runs

# Each run writes into an empty directory of its own; a refusal must leave
# it empty (no output, no temporary) and an --in-place input unchanged.
: >"$T/done.tsv"
while IFS=$'\t' read -r -u 3 name fix mode status phrase args; do
    read -r -a argv <<<"$args"
    dir=$T/o/$name
    mkdir -p "$dir"
    if [ "$mode" = inplace ]; then
        out=$T/o/$name.in.h5
        cp "$T/c/$fix.h5" "$out"
        before=$(sha256sum <"$out")
        where=("$out" --in-place)
    else
        out=$dir/out.h5
        where=("$T/c/$fix.h5" -o "$out")
        [[ " $args " = *" --dry-run "* ]] && where=("$T/c/$fix.h5")
    fi
    # an empty value ("--tokens ''") does not survive the word split
    [ "$name" = refuse_empty ] && argv+=("")
    timeout -s KILL "$TIME_LIMIT" "$ATTNRUN" -q "${where[@]}" "${argv[@]}" \
        </dev/null >"$dir.stdout" 2>"$dir.stderr"
    rc=$?
    problem=$(run_problem "$rc" "$status" "$dir.stderr")
    if [ -n "$problem" ]; then
        bad "run $name: attnrun $fix.h5 ${where[*]:1} $args: $problem"
    elif [ "$status" -ne 0 ]; then
        if ! grep -qF -- "$phrase" "$dir.stderr"; then
            bad "run $name: the message does not say '$phrase': $(head -c 300 "$dir.stderr")"
        elif [ -n "$(ls -A "$dir")" ]; then
            bad "run $name: refused, but left $(ls -A "$dir" | tr '\n' ' ')"
        elif [ "$mode" = inplace ] && [ "$(sha256sum <"$out")" != "$before" ]; then
            bad "run $name: refused, but the --in-place input changed"
        elif [ "$mode" = inplace ] && [ -n "$(find "$T/o" -maxdepth 1 -name '*attnrun-tmp*')" ]; then
            bad "run $name: refused, but left a temporary next to the input"
        else
            ok "run $name: exit $status, '$(head -c 120 "$dir.stderr" | sed 's/^attnrun: [^:]*: //')'"
        fi
    elif [[ " $args " = *" --dry-run "* ]]; then
        [ -z "$(ls -A "$dir")" ] && ok "run $name: --dry-run with tokens exits 0 and writes nothing" ||
            bad "run $name: --dry-run wrote $(ls -A "$dir")"
    else
        printf '%s\t%s\n' "$name" "$out" >>"$T/done.tsv"
    fi
done 3<"$T/c/runs.tsv"

# --in-place twice: a second run adding other results must not replace the
# first one's tokens without --force; with it, it does (and the input of
# the refused run stays as it was).
ip=$T/o/inplace.in.h5
if [ -f "$ip" ]; then
    cp "$ip" "$T/o/twice.in.h5"
    before=$(sha256sum <"$T/o/twice.in.h5")
    "$ATTNRUN" -q "$T/o/twice.in.h5" --in-place -H 2 --group /r --tokens tok1 --save heads \
        </dev/null >/dev/null 2>"$T/o/twice.stderr"
    rc=$?
    problem=$(run_problem "$rc" 2 "$T/o/twice.stderr")
    if [ -n "$problem" ]; then
        bad "--in-place over earlier tokens without --force: $problem"
    elif ! grep -qF "already has an object named 'query_token'; use --force" "$T/o/twice.stderr"; then
        bad "--in-place over earlier tokens without --force: $(head -c 300 "$T/o/twice.stderr")"
    elif [ "$(sha256sum <"$T/o/twice.in.h5")" != "$before" ]; then
        bad "--in-place over earlier tokens without --force: the input changed"
    else
        ok "--in-place over earlier tokens without --force: exit 2, input unchanged"
    fi
    if "$ATTNRUN" -q "$T/o/twice.in.h5" --in-place -H 2 --group /r --tokens tok1 --save heads \
        --force </dev/null >/dev/null 2>"$T/o/twice.stderr"; then
        printf '%s\t%s\n' inplace_force "$T/o/twice.in.h5" >>"$T/done.tsv"
    else
        bad "--in-place --force over earlier tokens: $(head -c 300 "$T/o/twice.stderr")"
    fi
fi

# ------------------------------------------------------------ the checks

cat >"$T/verify.py" <<'EOF'
import json, os, subprocess, sys
import numpy as np
import h5py
import xarray as xr

runs = json.load(open(os.path.join(sys.argv[1], "runs.json")))
done = dict(line.rstrip("\n").split("\t") for line in open(sys.argv[2]) if line.strip())
ncdump = sys.argv[3]
Q1 = ["a", "Ġthe", "日本", "😀", "x y"]
runs["inplace_force"] = dict(runs["inplace"], q=Q1, qdims=["query"], k=Q1, kdims=["key"],
                             coords={"heads": "query_token", "output": "query_token"})


def check(name, fn):
    try:
        problem = fn()
    except Exception as e:                      # a crash of the check is a failure
        problem = "%s: %s" % (type(e).__name__, e)
    print(("FAIL %s: %s" % (name, problem)) if problem else "ok " + name)


def tokens_of(ds):
    return [[v.decode() if isinstance(v, bytes) else v for v in row] for row in ds[...]] \
        if ds.ndim == 2 else [v.decode() if isinstance(v, bytes) else v for v in ds[...]]


def h5py_problems(name, e):
    p = []
    g = h5py.File(done[name], "r")[e.get("group", "/")]
    for which, dims in (("query_token", e.get("qdims")), ("key_token", e.get("kdims"))):
        want = e["q"] if which == "query_token" else e["k"]
        if want is None:
            if which in g:
                p.append("%s present, expected none" % which)
            continue
        if which not in g:
            p.append("no %s" % which)
            continue
        ds = g[which]
        info = h5py.check_string_dtype(ds.dtype)
        if info is None or info.encoding != "utf-8" or info.length is not None:
            p.append("%s has dtype %s, expected variable-length UTF-8" % (which, ds.dtype))
        if ds.id.get_type().get_cset() != h5py.h5t.CSET_UTF8:
            p.append("%s: character set is not UTF-8" % which)
        if tokens_of(ds) != want:
            got = tokens_of(ds)
            p.append("%s holds %s, expected %s" % (which, str(got)[:200], str(want)[:200]))
        if [d.label for d in ds.dims] != dims:
            p.append("%s labels %s, expected %s" % (which, [d.label for d in ds.dims], dims))
        attached = [[os.path.basename(s.name) for s in d.values()] for d in ds.dims]
        if attached != [[d] for d in dims]:
            p.append("%s scales %s, expected %s" % (which, attached, dims))
        if ds.attrs.get("attnrun_role") != "result":
            p.append("%s attnrun_role %r" % (which, ds.attrs.get("attnrun_role")))
    for var, names in e.get("coords", {}).items():
        got = g[var].attrs.get("coordinates")
        if got != names:
            p.append("%s coordinates %r, expected %r" % (var, got, names))
    if "source" in e and g.attrs.get("tokens_source") != e["source"]:
        p.append("tokens_source %r, expected %r" % (g.attrs.get("tokens_source"), e["source"]))
    return "; ".join(p)


def xarray_problems(name, e, engine):
    p = []
    group = e.get("group", "/")
    with xr.open_dataset(done[name], engine=engine, group=None if group == "/" else group) as ds:
        for var in ds.data_vars:
            if var in ("query_token", "key_token"):
                continue
            for which, dims in (("query_token", e.get("qdims")), ("key_token", e.get("kdims"))):
                want = e["q"] if which == "query_token" else e["k"]
                axis = "query" if which == "query_token" else "key"
                along = want is not None and axis in ds[var].dims
                if along != (which in ds[var].coords):
                    p.append("%s: %s %s its coordinates" % (var, which, "missing from" if along else "among"))
                elif along:
                    c = ds[var].coords[which]
                    if list(c.dims) != dims or c.values.tolist() != want:
                        p.append("%s.coords[%s]: dims %s, values %s" % (var, which, c.dims, str(c.values.tolist())[:120]))
    return "; ".join(p)


for name, e in runs.items():
    if name not in done:
        continue
    check("%s: query_token / key_token: values, UTF-8 strings, dimension scales, coordinates" % name,
          lambda: h5py_problems(name, e))
    for engine in ("netcdf4", "h5netcdf"):
        check("%s: xarray (%s) shows the tokens as coordinates of every result along their axes"
              % (name, engine), lambda: xarray_problems(name, e, engine))
    def nc():
        r = subprocess.run([ncdump, "-h", done[name]], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            return "ncdump -h exit %d: %s" % (r.returncode, r.stderr.strip()[:200])
        if e.get("group", "/") == "/" and e["q"] is not None and "string query_token(" not in r.stdout:
            return "ncdump -h does not list query_token"
        return ""
    check("%s: ncdump -h opens the file" % name, nc)
    if "same_as" in e and e["same_as"] in done:
        def same():
            a, b = h5py.File(done[name], "r"), h5py.File(done[e["same_as"]], "r")
            for k in ("query_token", "key_token", "weights", "output"):
                if not np.array_equal(a[k][...], b[k][...]):
                    return "%s differs from %s's" % (k, e["same_as"])
            return ""
        check("%s: tokens and results identical to %s's" % (name, e["same_as"]), same)
EOF

"$PY" "$T/verify.py" "$T/c" "$T/done.tsv" "$NCDUMP" >"$T/verify.log" 2>&1
report_verdicts "$T/verify.log" $?

# ------------------------------------------------------------ allocation failures

# FAULT_ATTNRUN's Nth allocation fails (ATTN_FAIL_ALLOC=N), with ASan: every
# N until the run succeeds ends with exit 1 and one line, no file left.
# The run reads both kinds of source: a dataset and an attribute.
if [ -n "$FAULT_ATTNRUN" ] && [ -x "$FAULT_ATTNRUN" ]; then
    export ASAN_OPTIONS=exitcode=86:detect_leaks=1:allocator_may_return_null=1
    export UBSAN_OPTIONS=exitcode=87
    problems=0
    for ((n = 1; n <= 400; n++)); do
        rm -rf "$T/fault"
        mkdir "$T/fault"
        ATTN_FAIL_ALLOC=$n "$FAULT_ATTNRUN" -q "$T/c/cross.h5" -o "$T/fault/out.h5" -H 2 --kv Y \
            --tokens qt --kv-tokens Y@tokens --save weights </dev/null >/dev/null 2>"$T/fault.stderr"
        rc=$?
        [ "$rc" -eq 0 ] && break
        why=$(run_problem "$rc" 1 "$T/fault.stderr")
        [ -z "$why" ] && grep -q 'internal error' "$T/fault.stderr" && why="a crash"
        [ -z "$why" ] && [ -n "$(ls -A "$T/fault")" ] && why="left $(ls -A "$T/fault")"
        if [ -n "$why" ]; then
            bad "allocation $n failing in a tokens run: $why"
            problems=$((problems + 1))
            [ "$problems" -ge 3 ] && break
        fi
    done
    if [ "$n" -gt 400 ]; then
        bad "allocation failures: still failing after 400 allocations"
    elif [ "$problems" -eq 0 ]; then
        ok "each of the $((n - 1)) allocations of a tokens run failing ends with exit 1 and one line"
    fi
else
    echo "(no FAULT_ATTNRUN: the allocation sweep is skipped)"
fi

finish
