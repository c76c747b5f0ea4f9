"""tests/ref/docs_check.py - checks of the documentation for tests/cli/test_docs.sh.
It prints "ok NAME" or "FAIL NAME: WHY" per check and never calls attnrun.

    python3 tests/ref/docs_check.py links ROOT            citations and links
    python3 tests/ref/docs_check.py toy ROOT OUT.h5       the worked example's numbers
    python3 tests/ref/docs_check.py export LAYER.h5       the stand-in export's layout
    python3 tests/ref/docs_check.py walkthrough LAYER.h5 OUT.h5

Every expected number is computed here in float64 numpy from the formulas
of docs/contract.md §2 (or by tests/ref/models_ref.py), never read from
attnrun's output.
"""
import os
import re
import sys

import numpy as np

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)
import reference  # noqa: E402  (tests/ref/reference.py, the tree's one attention reference)
FLOAT = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|(?<![\w.])-?\d+(?![\w.])")


def ok(name):
    print("ok " + name)


def fail(name, why):
    print("FAIL %s: %s" % (name, why))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# ------------------------------------------------------- citations, links

def text_files(root):
    """(relative path, text) of every UTF-8 text file outside .git and build."""
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "build"))
        for name in sorted(files):
            path = os.path.join(top, name)
            try:
                text = read(path)
            except (UnicodeDecodeError, OSError):
                continue
            if "\0" not in text:
                yield os.path.relpath(path, root), text


def slug(heading):
    """The anchor a Markdown heading gets (GitHub's rule)."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(text):
    body = re.sub(r"```.*?```", "", text, flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", body, re.M)}


def check_links(root):
    contract = read(os.path.join(root, "docs", "contract.md"))
    sections = {int(n) for n in re.findall(r"^## §(\d+) ", contract, re.M)}
    if sections >= set(range(1, 8)):
        ok("docs/contract.md has sections §1 to §7")
    else:
        fail("docs/contract.md sections", "has %s" % sorted(sections))
    bad = []
    for rel, text in text_files(root):
        for i, line in enumerate(text.splitlines(), 1):
            for n in re.findall(r"§\s?(\d+)", line):
                if int(n) not in sections:
                    bad.append("%s:%d cites §%s" % (rel, i, n))
    if bad:
        fail("every § cites a section of docs/contract.md", "; ".join(bad[:8]))
    else:
        ok("every § cites a section of docs/contract.md")

    docs = ["README.md", "HACKING.md", "bench/README.md", "tests/README.md"] + sorted(
        "docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    bad, count = [], 0
    for rel in docs:
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            bad.append("%s is missing" % rel)
            continue
        text = read(path)
        body = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", body):
            if re.match(r"[a-z]+:", target):
                continue                                    # http:, https:, mailto:
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not dest.startswith(os.path.abspath(root)):
                bad.append("%s: %s leaves the repository" % (rel, target))
            elif not os.path.exists(dest):
                bad.append("%s: %s does not exist" % (rel, target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(read(dest)):
                bad.append("%s: %s names no heading" % (rel, target))
    if bad:
        fail("relative links of the Markdown files", "; ".join(bad[:8]))
    elif count == 0:
        fail("relative links of the Markdown files", "none found (README should link docs/contract.md)")
    else:
        ok("relative links of the Markdown files (%d) lead to files and headings" % count)


# ------------------------------------------------------- the worked example

TOKENS = ["The", "cat", "sat", "down"]


def toy_reference():
    """The worked example in float64, from its definition."""
    X = np.array([[0.1, 0.8, 0.3, 0.5, 0.2, 0.9],
                  [0.9, 0.1, 0.7, 0.2, 0.8, 0.3],
                  [0.5, 0.5, 0.5, 0.5, 0.5, 0.5],
                  [0.3, 0.7, 0.2, 0.9, 0.1, 0.6]])
    rng = np.random.RandomState(42)                 # what np.random.seed(42) sets up
    W_Q, W_K, W_V = (rng.randn(6, 3) * 0.5 for _ in range(3))
    Q, K, V, scores, weights, heads = reference.walkthrough(X, W_Q, W_K, W_V)
    return {"X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V, "Q": Q, "K": K, "V": V,
            "scores": scores, "weights": weights, "heads": heads}


def section(text, start, stop):
    """text from the line starting `start` to the next line starting `stop`."""
    m = re.search(r"^" + re.escape(start) + r".*?(?=^" + re.escape(stop) + r"|\Z)", text, re.M | re.S)
    return m.group(0) if m else ""


def contract_blocks(text):
    """name -> rows of numbers, for each fenced block of §7 (its first line
    names it; the numbers of each later line form a row)."""
    blocks = {}
    for body in re.findall(r"^```\n(.*?)^```", text, re.M | re.S):
        lines = body.splitlines()
        rows = [[float(v) for v in FLOAT.findall(line)] for line in lines[1:]]
        blocks.setdefault(lines[0].split()[0], []).append([r for r in rows if r])
    return blocks


def check_printed(name, rows, ref, decimals):
    got = np.array(rows, dtype=float) if rows and len({len(r) for r in rows}) == 1 else None
    if got is None or got.shape != ref.shape:
        fail(name, "printed shape %s, expected %s" % (
            None if got is None else got.shape, ref.shape))
        return
    err = np.abs(got - ref).max()
    if err <= 0.5 * 10.0 ** -decimals + 1e-12:
        ok("%s (%d values, within the printed %d decimals)" % (name, got.size, decimals))
    else:
        fail(name, "printed values differ from numpy by up to %.3g" % err)


def check_toy(root, out_path):
    import h5py

    ref = toy_reference()
    contract = section(read(os.path.join(root, "docs", "contract.md")), "## §7", "## §")
    blocks = contract_blocks(contract)
    for name in ref:
        found = blocks.get(name, [])
        if len(found) != 1:
            fail("docs/contract.md §7 " + name, "%d blocks named %s" % (len(found), name))
        else:
            check_printed("docs/contract.md §7 " + name, found[0], ref[name], 4)
    m = re.search(r'"cat",\s+for\s+instance,\s+attends\s+most\s+to\s+"(\w+)"\s+\(([\d.]+)\)'
                  r'\s+and\s+least\s+to\s+itself\s+\(([\d.]+)\)', contract)
    w = ref["weights"][1]
    if m and TOKENS[int(np.argmax(w))] == m.group(1) and np.argmin(w) == 1 \
            and abs(float(m.group(2)) - w.max()) <= 5e-5 and abs(float(m.group(3)) - w.min()) <= 5e-5:
        ok("docs/contract.md §7 the sentence about \"cat\"")
    else:
        fail("docs/contract.md §7 the sentence about \"cat\"",
             "missing, or not argmax %s %.4f / argmin %s %.4f" % (
                 TOKENS[int(np.argmax(w))], w.max(), TOKENS[int(np.argmin(w))], w.min()))

    # README: the h5dump listings and the arrays h5py and xarray print.
    readme = section(read(os.path.join(root, "README.md")), "## The toy example", "## ")
    if not readme:
        fail("README toy section", "no section '## The toy example'")
        return
    output = np.hstack([ref["heads"], np.zeros((4, 3))])
    for what, pattern, expected in (
            ("weights", r"^\s*\(0,(\d+),0\): (.*)$", ref["weights"]),
            ("output", r"^\s*\((\d+),0\): (.*)$", output)):
        listing = section(readme, "    $ h5dump -d /%s" % what, "    $ ")
        rows = [(int(q), [float(v) for v in FLOAT.findall(vals)])
                for q, vals in re.findall(pattern, listing, re.M)]
        errs = [np.abs(np.array(vals) - expected[q, :len(vals)]).max() for q, vals in rows]
        if not rows or any(len(vals) != expected.shape[1] for _, vals in rows):
            fail("README h5dump " + what, "rows not found or of the wrong length: %s" % rows)
        elif max(errs) > 2e-6:
            fail("README h5dump " + what, "differs from numpy by up to %.3g" % max(errs))
        else:
            ok("README h5dump %s (%d rows, within h5dump's 6 digits)" % (what, len(rows)))
    arrays = [[float(v) for v in FLOAT.findall(a)] for a in re.findall(r"array\(\[([^\]]*)\]", readme)]
    if len(arrays) < 2 or any(len(a) != 4 for a in arrays):
        fail("README h5py/xarray rows", "expected two arrays of 4 values, found %s" % arrays)
    elif max(np.abs(np.array(a) - w).max() for a in arrays) > 1e-6:
        fail("README h5py/xarray rows", "differ from the weights of \"cat\": %s" % arrays)
    else:
        ok("README h5py/xarray rows (the weights of \"cat\")")

    # attnrun's output agrees with the same numbers.
    with h5py.File(out_path, "r") as f:
        got = {name: f[name][...] for name in ("scores", "weights", "heads", "output")}
    expect = {"scores": ref["scores"][None], "weights": ref["weights"][None],
              "heads": ref["heads"][None], "output": output}
    for name, e in expect.items():
        g = got[name]
        if g.shape != e.shape:
            fail("attnrun toy " + name, "shape %s, expected %s" % (g.shape, e.shape))
        elif np.abs(g - e).max() > 1e-5:
            fail("attnrun toy " + name, "differs from numpy by %.3g" % np.abs(g - e).max())
        else:
            ok("attnrun toy %s %s within 1e-5 of numpy" % (name, g.shape))
    if np.all(got["output"][:, 3:] == 0):
        ok("attnrun toy output: the last three columns are 0")
    else:
        fail("attnrun toy output", "the last three columns are not 0")


# ------------------------------------------------------- the walkthrough

PARAMS = {"c_attn.weight": (768, 2304), "c_attn.bias": (2304,),
          "c_proj.weight": (768, 768), "c_proj.bias": (768,)}


def check_export(path):
    import h5py

    with h5py.File(path, "r") as f:
        problems = []
        shapes = dict(PARAMS, X=(2, 12, 768), attention_mask=(2, 12), tokens=(2, 12))
        shapes.update({"reference/weights": (2, 12, 12, 12), "reference/output": (2, 12, 768)})
        for name, shape in shapes.items():
            if name not in f:
                problems.append("no " + name)
            elif f[name].shape != shape:
                problems.append("%s is %s, expected %s" % (name, f[name].shape, shape))
        if problems:
            fail("export: names and shapes", "; ".join(problems))
            return
        ok("export: the names and shapes of GPT-2 small's layer (the gpt2 preset's names)")
        floats = [n for n in list(PARAMS) + ["X"] if f[n].dtype != np.float32]
        if floats:
            fail("export: float32", ", ".join(floats))
        else:
            ok("export: X and the parameters are float32")
        mask = f["attention_mask"][...]
        expect = np.array([[1] * 12, [1] * 5 + [0] * 7])
        if f["attention_mask"].dtype.kind in "iu" and np.array_equal(mask, expect):
            ok("export: attention_mask is integer, the second sentence padded after 5 tokens")
        else:
            fail("export: attention_mask", "%s %s" % (f["attention_mask"].dtype, mask.tolist()))
        info = h5py.check_string_dtype(f["tokens"].dtype)
        tokens = f["tokens"].asstr()[...] if info else None
        if info is None or info.encoding != "utf-8" or info.length is not None:
            fail("export: tokens", "not variable-length UTF-8 strings: %s" % f["tokens"].dtype)
        elif list(tokens[0][:4]) != ["The", "\u0120cat", "\u0120sat", "\u0120down"] \
                or any((t == "<|endoftext|>") != (m == 0) for t, m in zip(tokens.ravel(), mask.ravel())):
            fail("export: tokens", "unexpected tokens %s" % tokens.tolist())
        else:
            ok("export: tokens are (2, 12) UTF-8 strings, padding where the mask is 0")


def check_walkthrough(layer_path, out_path):
    import h5py
    sys.path.insert(0, TESTS)
    import models_ref

    with h5py.File(layer_path, "r") as f:
        inputs = {name: f[name][...] for name in list(PARAMS) + ["X", "attention_mask"]}
        hf = {"weights": f["reference/weights"][...], "output": f["reference/output"][...]}
    ref = models_ref.gpt2(inputs["X"], inputs["c_attn.weight"], inputs["c_attn.bias"],
                          inputs["c_proj.weight"], inputs["c_proj.bias"], heads=12,
                          attention_mask=inputs["attention_mask"])
    with h5py.File(out_path, "r") as f:
        got = {name: f[name][...] for name in ("weights", "output")}
    for name, tol in (("weights", 1e-5), ("output", 1e-4 * np.abs(ref["output"]).max())):
        if got[name].shape != ref[name].shape:
            fail("walkthrough " + name, "shape %s, expected %s" % (got[name].shape, ref[name].shape))
            continue
        err = np.abs(got[name] - ref[name]).max()
        if err <= tol:
            ok("walkthrough: attnrun's %s %s within %.2g of models_ref.gpt2" % (name, got[name].shape, tol))
        else:
            fail("walkthrough " + name, "differs from models_ref.gpt2 by %.3g (> %.2g)" % (err, tol))
        err = np.abs(got[name] - hf[name]).max()
        if err <= tol:
            ok("walkthrough: attnrun's %s within %.2g of the export's /reference" % (name, tol))
        else:
            fail("walkthrough /reference " + name, "differs by %.3g (> %.2g)" % (err, tol))
        err = np.abs(hf[name] - ref[name]).max()
        if err <= 1e-6 * max(1.0, np.abs(ref[name]).max()):
            ok("walkthrough: the stand-in's /reference/%s is models_ref.gpt2's" % name)
        else:
            fail("walkthrough stand-in /reference/" + name, "differs from models_ref.gpt2 by %.3g" % err)


def main(argv):
    commands = {"links": (check_links, 1), "toy": (check_toy, 2),
                "export": (check_export, 1), "walkthrough": (check_walkthrough, 2)}
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        sys.exit(__doc__)
    args = argv[2:]
    if argv[1] in ("links", "toy"):
        args[0] = os.path.abspath(args[0])
    commands[argv[1]][0](*args)


if __name__ == "__main__":
    main(sys.argv)
