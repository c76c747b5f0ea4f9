"""tests/ref/json_plan_check.py - the plan as JSON (`attnrun --dry-run --json`,
docs/outputs.md "Plans as JSON") against an independent account of each
case, for tests/cli/test_json.sh.  It runs attnrun itself and prints
"ok NAME" or "FAIL NAME: WHY" per check:

    python3 tests/ref/json_plan_check.py ATTNRUN TMPDIR FIXTURES docs/outputs.md TIME_LIMIT

  * docs/outputs.md's table lists exactly the keys and types of SCHEMA
    below;
  * each case's plan has every key of SCHEMA with its type and no other,
    and values from the input file (h5py), the FLOPs formula, the
    Datasets table of docs/outputs.md, the visible tiles of
    tests/ref/store_ref.py and the options; the plain --dry-run says the
    same, and a real run's file has the planned shapes, axes, types and
    chunks;
  * file, group and output names that need escaping come back intact
    (bytes that are not UTF-8 as U+FFFD);
  * --json without --dry-run and failed dry runs leave stdout empty.
"""
import json, math, os, re, shutil, subprocess, sys
import numpy as np
import h5py


import store_ref

# set by main() from the command line
attnrun = top = fixtures = outputs_md = None
limit = 60.0

# ------------------------------------------------------------ the schema
# Every key path and its type, as docs/outputs.md's table writes them.
INPUT_NAMES = ["x", "kv", "mask", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "wqkv", "bqkv",
               "q_norm", "k_norm", "alibi_slopes", "positions", "kv_positions", "attn_bias"]
SCHEMA = {
    "schema_version": "integer",
    "attnrun_version": "string",
    "input": "string",
    "output": "string or null",
    "in_place": "boolean",
    "group": "string",
    "weights_group": "string or null",
    "dims": "object",
    "dims.batch": "integer",
    "dims.batched": "boolean",
    "dims.n": "integer",
    "dims.m": "integer",
    "dims.d_model": "integer",
    "dims.heads": "integer",
    "dims.kv_heads": "integer",
    "dims.d_k": "integer",
    "dims.d_v": "integer",
    "inputs": "object",
    "inputs.<name>": "array of integers or null",
    "precision": "string",
    "store": "string",
    "compress": "integer",
    "flops": "number",
    "total_bytes": "integer",
    "save": "array of strings",
    "outputs": "array of objects",
    "outputs[].name": "string",
    "outputs[].shape": "array of integers",
    "outputs[].axes": "array of strings",
    "outputs[].dtype": "string",
    "outputs[].bytes": "integer",
    "outputs[].dense_bytes": "integer or null",
    "outputs[].chunk": "array of integers",
    "plan": "object",
    "plan.items_per_step": "integer",
    "plan.rows_per_block": "integer",
    "plan.row_blocks": "integer",
    "plan.slices": "integer",
    "plan.steps": "integer",
    "plan.step_bytes": "integer",
    "plan.memory_cap": "integer",
    "plan.held_bytes": "integer",
    "plan.least_step_bytes": "integer",
    "plan.least_step_rows": "integer",
    "plan.least_step_over_cap": "boolean",
    "plan.slide_keys": "integer",
    "plan.blocks_per_step": "integer",
    "plan.threads": "integer",
    "plan.online_softmax": "boolean",
    "variant": "object",
    "variant.scale": "number",
    "variant.scale_given": "boolean",
    "variant.causal": "boolean",
    "variant.window": "integer or null",
    "variant.softcap": "number or null",
    "variant.alibi": "boolean",
    "variant.rope": "object or null",
    "variant.rope.theta": "number",
    "variant.rope.dim": "integer",
    "variant.rope.style": "string",
    "variant.qk_norm": "boolean",
    "variant.norm_eps": "number",
    "variant.mask": "boolean",
    "variant.mask_invert": "boolean",
    "variant.attn_bias_rank": "integer",
    "variant.cross": "boolean",
    "variant.preset": "string or null",
    "variant.layout": "string",
    "variant.qkv_fused": "boolean",
    "variant.qkv_split": "string or null",
}


def is_type(value, name):
    """Whether value is of docs/outputs.md's type `name` ("integer or null" ...)."""
    def one(v, t):
        if t == "integer":
            return type(v) is int
        if t == "number":
            return type(v) in (int, float)
        if t == "string":
            return type(v) is str
        if t == "boolean":
            return type(v) is bool
        if t == "null":
            return v is None
        if t == "object":
            return type(v) is dict
        if t.startswith("array of "):
            item = {"integers": "integer", "strings": "string", "objects": "object"}[t[9:]]
            return type(v) is list and all(one(x, item) for x in v)
        raise ValueError("unknown type " + t)
    return any(one(value, t) for t in name.split(" or "))


def schema_problems(doc):
    """Keys missing, undocumented or of the wrong type, as messages."""
    problems, seen = [], set()

    def walk(v, path):
        if path:
            seen.add(path)
            if path not in SCHEMA:
                problems.append("undocumented key " + path)
                return
            if not is_type(v, SCHEMA[path]):
                problems.append("%s is %r, not %s" % (path, v, SCHEMA[path]))
                return
        if type(v) is dict:
            if path == "inputs":
                if sorted(v) != sorted(INPUT_NAMES):
                    problems.append("inputs has %s" % sorted(v))
                for k, x in v.items():
                    walk(x, "inputs.<name>")
                return
            for k, x in v.items():
                walk(x, path + "." + k if path else k)
        elif type(v) is list and SCHEMA.get(path) == "array of objects":
            for x in v:
                for k, member in x.items():
                    walk(member, path + "[]." + k)

    walk(doc, "")
    for path in SCHEMA:
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        # under a null object or an empty array a key cannot be there
        absent_ok = parent and (get(doc, parent) is None or get(doc, parent) == [])
        if path not in seen and not absent_ok:
            problems.append("missing key " + path)
    return problems


def get(doc, path):
    """The value at path ("a.b", "outputs[]" -> the list), None if absent."""
    v = doc
    for part in path.split("."):
        part = part.replace("[]", "")
        if type(v) is list:
            v = v[0] if v else []
        if type(v) is not dict or part not in v:
            return None
        v = v[part]
    return v


verdicts = []


def ok(name, detail=""):
    verdicts.append("ok %s%s" % (name, ": " + detail if detail else ""))


def bad(name, why):
    verdicts.append("FAIL %s: %s" % (name, why))


# ---------------------------------------- docs/outputs.md's table agrees

def outputs_md_table():
    text = open(outputs_md, encoding="utf-8").read()
    start = text.index("### Plans as JSON")
    end = text.index("\n#", start + 1)
    rows = {}
    for line in text[start:end].splitlines():
        m = re.match(r"\| `([^`]+)` \| ([^|]+) \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2).strip(), m.group(3))
    return rows


def check_outputs_md_table():
    rows = outputs_md_table()
    documented = {k: t for k, (t, _) in rows.items()}
    if documented == SCHEMA:
        names = re.findall(r"`([a-z_]+)`", rows["inputs"][1])
        if names == INPUT_NAMES:
            ok("docs/outputs.md table", "%d keys and types as the schema" % len(SCHEMA))
        else:
            bad("docs/outputs.md table", "inputs lists %s" % names)
    else:
        diff = sorted(set(documented.items()) ^ set(SCHEMA.items()))
        bad("docs/outputs.md table", "differs from the schema: %s" % diff[:6])


# ----------------------------------------------------- running attnrun

def run(args, cwd=None):
    """attnrun's exit status, stdout and stderr; 137 when it hangs."""
    try:
        p = subprocess.run([attnrun] + args, capture_output=True, timeout=limit, cwd=cwd)
    except subprocess.TimeoutExpired:
        return 137, b"", b"no answer within %g s" % limit
    return p.returncode, p.stdout, p.stderr


def plan(name, args, cwd=None):
    """The parsed plan of a dry run, or None (a FAIL recorded)."""
    rc, out, err = run(args + ["--dry-run", "--json"], cwd)
    if rc != 0:
        bad(name, "exit %d: %s" % (rc, err.decode(errors="replace")[:300]))
        return None
    if err:
        bad(name, "stderr not empty: %r" % err[:200])
        return None
    if not out.endswith(b"\n") or out.count(b"\n") != 1:
        bad(name, "stdout is not one line: %r" % out[:200])
        return None
    try:
        doc = json.loads(out.decode("utf-8"))      # the whole of stdout, strictly
    except (UnicodeDecodeError, ValueError) as e:
        bad(name, "not JSON (%s): %r" % (e, out[:200]))
        return None
    if type(doc) is not dict:
        bad(name, "not an object")
        return None
    return doc


# ------------------------------------------------------- what to expect

ELEM = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4}
STORE_DTYPE = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
OUTPUT_ORDER = ["scores", "weights", "heads", "output", "q", "k", "v",
                "entropy", "argmax", "distance", "mean", "result"]
MAPS = ("scores", "weights", "mean")


def sizes(f, c):
    """B, n, m, D, H, G, dk, dv from the file's shapes and the case."""
    X = f[c["x"]].shape
    batched = len(X) == 3
    B, n, D = (X if batched else (1,) + X)
    m = f[c["kv"]].shape[-2] if c.get("kv") else n
    H = c["H"]
    lin = c.get("linear", False)
    out = (lambda s: s[0]) if lin else (lambda s: s[-1])
    if c.get("wqkv"):                      # H dk + 2 G dk features, dv = dk
        F = out(f[c["wqkv"]].shape)
        G = c.get("G", H)
        dk = F // (H + 2 * G)
        dv = dk
    else:
        wq, wk, wv = (f[c[k]].shape for k in ("wq", "wk", "wv"))
        if len(wq) == 3:                   # (H, D, dk)
            dk, dv, G = wq[2], wv[2], wk[0]
        else:
            dk = out(wq) // H
            G = out(wk) // dk
            dv = out(wv) // G
    return dict(batch=B, batched=batched, n=n, m=m, d_model=D, heads=H, kv_heads=G, d_k=dk, d_v=dv)


def output_shape(name, d):
    """docs/outputs.md's Datasets table."""
    B, H, G, n, m = d["batch"], d["heads"], d["kv_heads"], d["n"], d["m"]
    kvh = "kv_head" if G != H else "head"
    table = {
        "scores": ((H, n, m), ("head", "query", "key")),
        "weights": ((H, n, m), ("head", "query", "key")),
        "heads": ((H, n, d["d_v"]), ("head", "query", "d_v")),
        "output": ((n, d["d_model"]), ("query", "d_model")),
        "q": ((H, n, d["d_k"]), ("head", "query", "d_k")),
        "k": ((G, m, d["d_k"]), (kvh, "key", "d_k")),
        "v": ((G, m, d["d_v"]), (kvh, "key", "d_v")),
        "entropy": ((H, n), ("head", "query")),
        "argmax": ((H, n), ("head", "query")),
        "distance": ((H, n), ("head", "query")),
        "mean": ((n, m), ("query", "key")),
        "result": ((n, H, d["d_model"]), ("query", "head", "d_model")),
    }
    shape, axes = table[name]
    if d["batched"]:
        shape, axes = (B,) + shape, ("batch",) + axes
    return list(shape), list(axes)


def visible_elements(n, m, tq, tk, causal, window):
    """Elements of the (tq, tk) tiles of an (n, m) map holding a pair some
    query sees (docs/outputs.md, "Chunks and masked tiles"), from the mask of
    store_ref.visible."""
    vis = store_ref.visible(n, m, causal, window)
    return sum(vis[r:r + tq, c0:c0 + tk].size
               for r in range(0, n, tq) for c0 in range(0, m, tk)
               if vis[r:r + tq, c0:c0 + tk].any())


def flops(d):
    B, n, m, D, H, G, dk, dv = (d[k] for k in ("batch", "n", "m", "d_model", "heads", "kv_heads", "d_k", "d_v"))
    return B * (2 * n * D * H * dk + 2 * m * D * G * (dk + dv) + 2 * H * n * m * dk + 2 * H * n * m * dv
                + 2 * n * H * dv * D)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def option(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def check_case(c):
    name = c["name"]
    args = c["args"]
    doc = plan(name, args, c.get("cwd"))
    if doc is None:
        return
    problems = schema_problems(doc)
    if problems:
        bad(name + " schema", "; ".join(problems[:4]))
    else:
        ok(name + " schema")
    fails = []

    def want(path, expected):
        # numbers by value (the schema checks integer or number), the rest by type too
        got = get(doc, path)
        numbers = all(type(x) in (int, float) for x in (got, expected))
        if got != expected or (type(got) is not type(expected) and not numbers):
            fails.append("%s = %r, expected %r" % (path, got, expected))

    path = os.path.join(c.get("cwd") or "", c["file"])
    with h5py.File(path, "r") as f:
        d = sizes(f, c)
        used = {k: list(f[v].shape) for k, v in c["inputs"].items()}
    want("schema_version", 1)
    want("input", c["file"])
    want("output", option(args, "-o"))
    want("in_place", "--in-place" in args)
    want("group", option(args, "--group", "/"))
    want("weights_group", option(args, "--weights-group"))
    want("dims", d)
    want("inputs", {k: used.get(k) for k in INPUT_NAMES})
    precision = option(args, "--precision", "f32")
    store = option(args, "--store", precision)
    want("precision", precision)
    want("store", store)
    want("compress", int(option(args, "--compress", "0")))
    want("flops", flops(d))
    save = option(args, "--save", "scores,weights,heads,output").split(",")
    save = [s for s in OUTPUT_ORDER if s in save]
    want("save", save)

    # the outputs
    v = c["variant"]
    outputs = doc["outputs"]
    if [o["name"] for o in outputs] != save:
        fails.append("outputs %r" % [o["name"] for o in outputs])
        outputs = []
    total = 0
    for o in outputs:
        shape, axes = output_shape(o["name"], d)
        is_map = o["name"] in MAPS
        dtype = "int32" if o["name"] == "argmax" else STORE_DTYPE[store if is_map else precision]
        dense = int(np.prod(shape)) * ELEM[dtype]
        stored = dense
        if is_map and (v["causal"] or v["window"]):
            tq, tk = o["chunk"][-2:]
            outer = int(np.prod(shape[:-2]))
            stored = outer * visible_elements(d["n"], d["m"], tq, tk, v["causal"], v["window"] or 0) * ELEM[dtype]
        expected = dict(name=o["name"], shape=shape, axes=axes, dtype=dtype, bytes=stored,
                        dense_bytes=dense, chunk=o["chunk"])
        if o != expected:
            fails.append("output %s: %r, expected %r" % (o["name"], o, expected))
        total += stored
    want("total_bytes", total)

    # the plan
    p = doc["plan"]
    items, rows = p["items_per_step"], p["rows_per_block"]
    if not (1 <= items <= max(d["batch"], 1) and 1 <= rows <= d["n"]):
        fails.append("plan %r out of range" % p)
    else:
        want("plan.row_blocks", -(-d["n"] // rows))
        want("plan.slices", -(-d["batch"] // items))
        want("plan.steps", -(-d["batch"] // items) * -(-d["n"] // rows))
    want("plan.online_softmax", not (set(MAPS) & set(save)))
    if "--batch-slice" in args:
        want("plan.items_per_step", int(option(args, "--batch-slice")))
    if "--memory" in args:
        want("plan.memory_cap", parse_size(option(args, "--memory")))
    if "--threads" in args:
        want("plan.threads", int(option(args, "--threads")))
    if c.get("row_blocks") and not rows < d["n"]:
        fails.append("rows_per_block %d: the item's rows are not cut" % rows)
    # the cap: what the steps hold stays under it, but for the least step
    # (one item, one tile of rows), which the plan then says it is over
    want("plan.least_step_rows", least_rows(d["n"], d["m"]))
    want("plan.least_step_over_cap", p["least_step_bytes"] > p["memory_cap"])
    if p["least_step_over_cap"]:
        if (items, min(rows, d["n"]), p["held_bytes"]) != (1, least_rows(d["n"], d["m"]),
                                                           p["least_step_bytes"]):
            fails.append("over the cap with a step of %d items, %d rows, %d bytes held"
                         % (items, rows, p["held_bytes"]))
    elif p["held_bytes"] > p["memory_cap"]:
        fails.append("held_bytes %d over the cap %d" % (p["held_bytes"], p["memory_cap"]))
    if not p["step_bytes"] <= p["held_bytes"] or not p["least_step_bytes"] <= p["held_bytes"]:
        fails.append("step_bytes %d, least_step_bytes %d, held_bytes %d"
                     % (p["step_bytes"], p["least_step_bytes"], p["held_bytes"]))
    if rows < d["n"] and rows % least_rows(d["n"], d["m"]):
        fails.append("rows_per_block %d: not whole tiles" % rows)
    # sliding keys (running.md, Steps): a causal window of self-attention in
    # blocks of rows, k and v not saved, finite inputs; then the block's
    # rows + the window + 254 keys
    window = int(option(args, "--window", 0))
    slides = (rows < d["n"] and window > 0 and "--causal" in args and "--kv" not in args and
              "k" not in save and "v" not in save and "--allow-nonfinite" not in args)
    want("plan.slide_keys", rows + window + 254 if slides else 0)

    # the variant
    scale = float(option(args, "--scale", 0)) or 1 / math.sqrt(d["d_k"])
    want("variant.scale", scale)
    want("variant.scale_given", "--scale" in args)
    for key, value in v.items():
        want("variant." + key, value)
    if fails:
        bad(name + " values", "; ".join(fails[:3]))
    else:
        ok(name + " values", "%d outputs, %s FLOPs, %d steps" % (len(outputs), doc["flops"], p["steps"]))
    check_text(c, doc)

    # the same shapes, axes, types and chunks in a real run's file
    if c.get("write"):
        check_written(c, doc)


def least_rows(n, m, T=256):
    """The fewest query rows of a step: one tile of the maps' chunks
    (docs/outputs.md, Chunks): T clipped to n, more when m < T (a tile of
    T*T elements), all n when a whole (n, m) map fits in a tile."""
    if n * m <= T * T:
        return n
    if m < T:
        p = 1
        while p * 2 <= T * T // m:
            p *= 2
        return min(n, p)
    return min(n, T)


def check_text(c, doc):
    """The plain --dry-run says the same of every output and of the plan."""
    name = c["name"] + " text"
    rc, out, err = run(c["args"] + ["--dry-run"], c.get("cwd"))
    text = out.decode("utf-8", errors="replace")
    fails = []
    for o in doc["outputs"]:
        m = re.search(r"^  %s +(\([0-9, ]+\)) +(\w+) +(\d+) bytes" % o["name"], text, re.M)
        shape = "(" + ", ".join(map(str, o["shape"])) + ")"
        if not m or m.groups() != (shape, o["dtype"], str(o["bytes"])):
            fails.append("%s: %s" % (o["name"], m.groups() if m else "no line"))
    p = doc["plan"]
    lines = {
        "slice": r"^slice +(\d+) batch items",
        "threads": r"^threads +(\d+)$",
        "rows": r"^rows +query rows in blocks of (\d+)",
        "total": r"^  total +(\d+) bytes",
    }
    got = {k: re.search(v, text, re.M) for k, v in lines.items()}
    got = {k: int(m.group(1)) if m else None for k, m in got.items()}
    want = dict(slice=p["items_per_step"], threads=p["threads"], total=doc["total_bytes"],
                rows=p["rows_per_block"] if p["rows_per_block"] < doc["dims"]["n"] else None)
    if got != want:
        fails.append("text %r, JSON %r" % (got, want))
    if rc != 0 or fails:
        bad(name, "exit %d; %s" % (rc, "; ".join(fails[:3])))
    else:
        ok(name, "outputs and plan as the plain --dry-run prints them")


def dtype_of(ds):
    t = ds.id.get_type()
    if t.get_class() == h5py.h5t.FLOAT and t.get_size() == 2:
        spos, epos, esize, mpos, msize = t.get_fields()
        return {(5, 10): "float16", (8, 7): "bfloat16"}.get((esize, msize), "?")
    return str(ds.dtype)


def check_written(c, doc):
    name = c["name"] + " file"
    out = os.path.join(top, c["name"] + ".out.h5")
    args = [a for a in c["args"]]
    if "-o" in args:
        args[args.index("-o") + 1] = out
    else:
        args += ["-o", out]
    rc, _, err = run(args, c.get("cwd"))
    if rc != 0:
        bad(name, "exit %d: %s" % (rc, err.decode(errors="replace")[:300]))
        return
    fails = []
    with h5py.File(out, "r") as f:
        g = f[option(args, "--group", "/")]
        for o in doc["outputs"]:
            ds = g[o["name"]]
            labels = [ds.dims[i].label for i in range(ds.ndim)]
            got = dict(shape=list(ds.shape), axes=labels, dtype=dtype_of(ds), chunk=list(ds.chunks))
            want = {k: o[k] for k in got}
            if got != want:
                fails.append("%s: file %r, plan %r" % (o["name"], got, want))
    if fails:
        bad(name, "; ".join(fails[:3]))
    else:
        ok(name, "shapes, axes, types and chunks as planned")


# ---------------------------------------------------------- the inputs

def weights(f, D, cols, rng, names=("W_Q", "W_K", "W_V", "W_O"), prefix=""):
    for w, k in zip(names, cols):
        f[prefix + w] = (rng.standard_normal(k) / np.sqrt(D)).astype(np.float32)


def make_inputs():
    """The generated inputs in top (the others are fixtures/)."""
    rng = np.random.default_rng(31)
    with h5py.File(os.path.join(top, "window.h5"), "w") as f:       # n = 600: 3 x 3 tiles
        f["X"] = rng.standard_normal((2, 600, 16)).astype(np.float32)
        weights(f, 16, [(16, 16)] * 4, rng)
    with h5py.File(os.path.join(top, "long.h5"), "w") as f:         # one item of 4096 queries
        f["X"] = rng.standard_normal((1, 4096, 16)).astype(np.float32)
        weights(f, 16, [(16, 16)] * 4, rng)
    with h5py.File(os.path.join(top, "gqa.h5"), "w") as f:          # H = 4, G = 2, dk = 8
        f["X"] = rng.standard_normal((3, 10, 32)).astype(np.float32)
        weights(f, 32, [(32, 32), (32, 16), (32, 16), (32, 32)], rng)
        f["pos"] = np.arange(5, 15, dtype=np.int64)
        f["bias"] = rng.standard_normal((4, 10, 10)).astype(np.float32)
    with h5py.File(os.path.join(top, "qwen3.h5"), "w") as f:        # linear, H = 4, G = 2, dk = 8
        f["X"] = rng.standard_normal((2, 12, 24)).astype(np.float32)
        weights(f, 24, [(32, 24), (16, 24), (16, 24), (24, 32)], rng,
                names=("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"),
                prefix="/layers.0/self_attn/")
        f["/layers.0/self_attn/q_norm.weight"] = np.ones(8, np.float32)
        f["/layers.0/self_attn/k_norm.weight"] = np.ones(8, np.float32)
    with h5py.File(os.path.join(top, "bloom.h5"), "w") as f:        # fused per head, H = 2, dk = 4
        f["X"] = rng.standard_normal((2, 7, 8)).astype(np.float32)
        f["query_key_value.weight"] = rng.standard_normal((24, 8)).astype(np.float32)
        f["query_key_value.bias"] = rng.standard_normal(24).astype(np.float32)
        f["dense.weight"] = rng.standard_normal((8, 8)).astype(np.float32)
        f["dense.bias"] = rng.standard_normal(8).astype(np.float32)


PLAIN = dict(window=None, softcap=None, alibi=False, rope=None, qk_norm=False, norm_eps=1e-6,
             mask=False, mask_invert=False, attn_bias_rank=0, cross=False, preset=None,
             layout="xw", qkv_fused=False, qkv_split=None)
W4 = dict(wq="W_Q", wk="W_K", wv="W_V", wo="W_O")
B4 = dict(bq="b_Q", bk="b_K", bv="b_V", bo="b_O")


def variant(**changes):
    v = dict(PLAIN, causal=False)
    v.update(changes)
    return v


def cases():
    """The cases: their files, options, sizes and the variant expected."""
    FIX = fixtures
    cases = [
        dict(name="gpt2", file=FIX + "/gpt2.h5", args=[FIX + "/gpt2.h5", "--heads", "12"], H=12,
             x="X", **W4, inputs=dict(x="X", **W4, **B4), variant=variant(), write=True),
        dict(name="causal window f16", file=os.path.join(top, "window.h5"),
             args=[os.path.join(top, "window.h5"), "--heads", "2", "--causal", "--window", "100",
                   "--softcap", "30", "--store", "f16", "--memory", "16M", "--threads", "1"],
             H=2, x="X", **W4, inputs=dict(x="X", **W4),
             variant=variant(causal=True, window=100, softcap=30), write=True),
        dict(name="window only, weights", file=os.path.join(top, "window.h5"),
             args=[os.path.join(top, "window.h5"), "--heads", "2", "--window", "256", "--save", "weights",
                   "--batch-slice", "1"],
             H=2, x="X", **W4, inputs=dict(x="X", **W4), variant=variant(window=256), write=True),
        dict(name="long rows", file=os.path.join(top, "long.h5"),
             args=[os.path.join(top, "long.h5"), "--heads", "2", "--causal", "--save", "weights,output",
                   "--memory", "16M"],
             H=2, x="X", **W4, inputs=dict(x="X", **W4), variant=variant(causal=True), row_blocks=True),
        dict(name="long rows, sliding keys", file=os.path.join(top, "long.h5"),
             args=[os.path.join(top, "long.h5"), "--heads", "2", "--causal", "--window", "300",
                   "--save", "weights,output", "--memory", "16M"],
             H=2, x="X", **W4, inputs=dict(x="X", **W4), variant=variant(causal=True, window=300),
             row_blocks=True),
        dict(name="gqa rope q k v", file=os.path.join(top, "gqa.h5"),
             args=[os.path.join(top, "gqa.h5"), "--heads", "4", "--rope", "10000", "--rope-dim", "4",
                   "--rope-style", "gptj", "--positions", "pos", "--attn-bias", "bias",
                   "--save", "q,k,v,output,entropy,argmax,distance,result", "--compress", "3",
                   "--scale", "0.1"],
             H=4, x="X", **W4, inputs=dict(x="X", **W4, positions="pos", attn_bias="bias"),
             variant=variant(rope=dict(theta=10000, dim=4, style="gptj"), attn_bias_rank=3), write=True),
        dict(name="cross mask f64 bf16", file=FIX + "/cross_mask.h5",
             args=[FIX + "/cross_mask.h5", "--heads", "2", "--kv", "KV", "--mask", "key_mask",
                   "--mask-invert", "--precision", "f64", "--store", "bf16", "--save", "weights,heads,k,mean,argmax",
                   "--alibi"],
             H=2, x="X", kv="KV", **W4, inputs=dict(x="X", kv="KV", mask="key_mask", **W4, **B4),
             variant=variant(cross=True, mask=True, mask_invert=True, alibi=True), write=True),
        dict(name="rank2 group", file=FIX + "/rank2.h5",
             args=[FIX + "/rank2.h5", "--heads", "2", "--group", "/results", "-o", "planned.h5"],
             H=2, x="X", **W4, inputs=dict(x="X", **W4), variant=variant(), write=True),
        dict(name="perhead3d", file=FIX + "/perhead3d.h5", args=[FIX + "/perhead3d.h5"], H=3, x="X",
             **W4, inputs=dict(x="X", **W4, bv="b_V"), variant=variant(), write=True),
        dict(name="qwen3 preset", file=os.path.join(top, "qwen3.h5"),
             args=[os.path.join(top, "qwen3.h5"), "--preset", "qwen3", "--weights-group", "/layers.0/self_attn",
                   "--heads", "4", "--rope", "1000000", "--norm-eps", "1e-5"],
             H=4, linear=True, x="X", wq="/layers.0/self_attn/q_proj.weight", wk="/layers.0/self_attn/k_proj.weight",
             wv="/layers.0/self_attn/v_proj.weight",
             inputs=dict(x="X", wq="/layers.0/self_attn/q_proj.weight", wk="/layers.0/self_attn/k_proj.weight",
                         wv="/layers.0/self_attn/v_proj.weight", wo="/layers.0/self_attn/o_proj.weight",
                         q_norm="/layers.0/self_attn/q_norm.weight", k_norm="/layers.0/self_attn/k_norm.weight"),
             variant=variant(causal=True, rope=dict(theta=1000000, dim=8, style="neox"), qk_norm=True,
                             norm_eps=1e-5, preset="qwen3", layout="linear"), write=True),
        dict(name="bloom preset", file=os.path.join(top, "bloom.h5"),
             args=[os.path.join(top, "bloom.h5"), "--preset", "bloom", "--heads", "2"],
             H=2, linear=True, x="X", wqkv="query_key_value.weight",
             inputs=dict(x="X", wqkv="query_key_value.weight", bqkv="query_key_value.bias",
                         wo="dense.weight", bo="dense.bias"),
             variant=variant(causal=True, alibi=True, preset="bloom", layout="linear", qkv_fused=True,
                             qkv_split="heads"), write=True),
    ]

    # --in-place: a copy of the fixture (a dry run writes nothing)
    shutil.copy(FIX + "/causal.h5", os.path.join(top, "inplace.h5"))
    cases.append(dict(name="in-place", file=os.path.join(top, "inplace.h5"),
                      args=[os.path.join(top, "inplace.h5"), "--heads", "2", "--in-place", "--group", "/r"],
                      H=2, x="X", **W4, inputs=dict(x="X", **W4), variant=variant()))
    return cases


# ------------------------------------------------- names that need escaping

def check_names():
    FIX = fixtures
    odd = os.path.join(top, "odd")
    os.mkdir(odd)
    names = {
        "quotes and backslashes": 'in "quoted" \\ back\\slash.h5',
        "control characters": "tab\there\nnewline\x01\x1f.h5",
        "UTF-8": "entrée-日本-🙂.h5",
    }
    for what, fname in names.items():
        shutil.copy(FIX + "/causal.h5", os.path.join(odd, fname))
        group = '/g "q" \\ é'
        doc = plan("name: " + what, [fname, "--heads", "2", "-o", fname + ".out", "--group", group], cwd=odd)
        if doc is None:
            continue
        got = (doc["input"], doc["output"], doc["group"])
        if got == (fname, fname + ".out", group):
            ok("name: " + what, "input, output and group intact")
        else:
            bad("name: " + what, "%r" % (got,))

    # bytes that are not UTF-8: each becomes U+FFFD, the rest intact
    raw = b"bad-\xff\xfe-\xc3(-\xed\xa0\x80.h5"
    shutil.copy(FIX + "/causal.h5", os.path.join(odd.encode(), raw))
    doc = plan("name: not UTF-8", [os.fsdecode(raw), "--heads", "2"], cwd=odd)
    if doc is not None:
        expected = "bad-\ufffd\ufffd-\ufffd(-\ufffd\ufffd\ufffd.h5"
        if doc["input"] == expected:
            ok("name: not UTF-8", "stray bytes as U+FFFD")
        else:
            bad("name: not UTF-8", "%r, expected %r" % (doc["input"], expected))


# ------------------------------------------------------------ refusals

def check_refusals():
    FIX = fixtures
    for what, args, status in [
        ("--json without --dry-run", [FIX + "/causal.h5", "--heads", "2", "-o", os.path.join(top, "x.h5"), "--json"], 2),
        ("a missing input", [os.path.join(top, "missing.h5"), "--heads", "2", "--dry-run", "--json"], 3),
        ("heads that do not divide", [FIX + "/causal.h5", "--heads", "3", "--dry-run", "--json"], 3),
    ]:
        rc, out, err = run(args)
        lines = err.decode(errors="replace").splitlines()
        if rc == status and out == b"" and len(lines) == 1 and lines[0].startswith("attnrun: ") \
                and not os.path.exists(os.path.join(top, "x.h5")):
            ok("refused: " + what, "exit %d, stdout empty" % rc)
        else:
            bad("refused: " + what, "exit %d, stdout %r, stderr %r" % (rc, out[:100], err[:200]))


def main(argv):
    global attnrun, top, fixtures, outputs_md, limit
    if len(argv) != 6:
        sys.exit(__doc__)
    attnrun, top, fixtures, outputs_md = argv[1:5]
    limit = float(argv[5])
    check_outputs_md_table()
    make_inputs()
    for c in cases():
        check_case(c)
    check_names()
    check_refusals()
    print("\n".join(verdicts))


if __name__ == "__main__":
    main(sys.argv)
