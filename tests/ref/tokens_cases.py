"""tests/ref/tokens_cases.py - --tokens and --kv-tokens (docs/outputs.md,
"Tokens"), for tests/cli/test_tokens.sh.  Expected tokens are the strings
the fixtures were written with.

    python3 tests/ref/tokens_cases.py make DIR
        the fixtures DIR/<fixture>.h5, DIR/runs.tsv ("name TAB fixture TAB
        o|inplace TAB status TAB phrase TAB attnrun options": the phrase the
        one stderr line of a refusal must hold, "-" for a success) and
        DIR/runs.json (what verify expects of each run that succeeds)
    python3 tests/ref/tokens_cases.py verify DIR DONE NCDUMP
        each finished run listed in DONE ("name TAB out"): query_token and
        key_token read back with h5py, xarray (netcdf4 and h5netcdf) and
        NCDUMP -h; prints "ok ..." / "FAIL ..."
"""
import json
import os
import subprocess
import sys

import numpy as np
import h5py
import xarray as xr

UTF8 = h5py.string_dtype("utf-8")
Q1 = ["a", "Ġthe", "日本", "😀", "x y"]


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


def make(top):
    rng = np.random.default_rng(20261211)
    runs, table = {}, []

    def layer(f, X, D, group="", Y=None):
        """X (and Y) and the four weights, under group ("/w") or at the root."""
        f[group + "/X"] = X.astype(np.float32)
        if Y is not None:
            f["Y"] = Y.astype(np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[group + "/" + w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)

    def run(name, fix, args, status=0, phrase="", mode="o", **expect):
        table.append("\t".join([name, fix, mode, str(status), phrase or "-", " ".join(args)]))
        if status == 0:
            runs[name] = expect

    # self: B = 2, n = 5 (self-attention)
    Q2 = [["The", "Ġcat", "Ġsat", "Ġdown", "."], ["日本", "語", "😀", "", "naïve"]]
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

    # heap: tokens in unfiltered chunks, checked from their chunks before
    # HDF5 reads them; the first string's object in the global heap is
    # given a length past its collection (its place does not hold it)
    path = os.path.join(top, "heap.h5")
    with h5py.File(path, "w") as f:
        layer(f, rng.standard_normal((2, 5, 8)), 8)
        f.create_dataset("tokc", data=np.array(Q2, dtype=UTF8), chunks=(1, 5))
    with open(path, "r+b") as f:
        raw = f.read()
        at = raw.index(b"GCOL") + 16            # the first object: index, count, 4, size
        f.seek(at + 8)
        f.write((1 << 40).to_bytes(8, "little"))

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
        ("heap_chunked", "heap", ["--tokens", "tokc"], 3,
         "of tokc is damaged (its place in the file's global heap does not hold it); not read"),
    ]
    for name, fix, args, status, phrase, *mode in REFUSE:
        run("refuse_" + name, fix, ["-H", "2"] + args, status=status, phrase=phrase,
            mode=mode[0] if mode else "o")
    run("dry_ok", "self", H2 + ["--dry-run", "--tokens", "tok"], status=0, phrase="", dry=True)

    with open(os.path.join(top, "runs.tsv"), "w") as out:
        out.write("\n".join(table) + "\n")
    with open(os.path.join(top, "runs.json"), "w") as f:
        json.dump(runs, f, indent=1)


# ------------------------------------------------------------------ verify

DONE = {}      # set by verify(): the finished runs, name -> file


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
    g = h5py.File(DONE[name], "r")[e.get("group", "/")]
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
    with xr.open_dataset(DONE[name], engine=engine, group=None if group == "/" else group) as ds:
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


def verify(top, done, ncdump):
    global DONE
    with open(os.path.join(top, "runs.json")) as f:
        runs = json.load(f)
    with open(done) as f:
        DONE = dict(line.rstrip("\n").split("\t") for line in f if line.strip())
    # the --in-place --force run over the "inplace" run's file
    runs["inplace_force"] = dict(runs["inplace"], q=Q1, qdims=["query"], k=Q1, kdims=["key"],
                                 coords={"heads": "query_token", "output": "query_token"})
    for name, e in runs.items():
        if name not in DONE:
            continue
        check("%s: query_token / key_token: values, UTF-8 strings, dimension scales, coordinates" % name,
              lambda: h5py_problems(name, e))
        for engine in ("netcdf4", "h5netcdf"):
            check("%s: xarray (%s) shows the tokens as coordinates of every result along their axes"
                  % (name, engine), lambda: xarray_problems(name, e, engine))
        def nc():
            r = subprocess.run([ncdump, "-h", DONE[name]], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                return "ncdump -h exit %d: %s" % (r.returncode, r.stderr.strip()[:200])
            if e.get("group", "/") == "/" and e["q"] is not None and "string query_token(" not in r.stdout:
                return "ncdump -h does not list query_token"
            return ""
        check("%s: ncdump -h opens the file" % name, nc)
        if "same_as" in e and e["same_as"] in DONE:
            def same():
                a, b = h5py.File(DONE[name], "r"), h5py.File(DONE[e["same_as"]], "r")
                for k in ("query_token", "key_token", "weights", "output"):
                    if not np.array_equal(a[k][...], b[k][...]):
                        return "%s differs from %s's" % (k, e["same_as"])
                return ""
            check("%s: tokens and results identical to %s's" % (name, e["same_as"]), same)


COMMANDS = {"make": (make, 1), "verify": (verify, 3)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS or len(sys.argv) - 2 != COMMANDS[sys.argv[1]][1]:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]][0](*sys.argv[2:])
