#!/usr/bin/python3
"""scripts/compare-builds.py - do two builds of attnrun write the same files?

    /usr/bin/python3 scripts/compare-builds.py OLD NEW [--work DIR] [--only SET,...]
                                                     [--gen GEN] [--keep]

Runs OLD and NEW (two attnrun programs, e.g. the last release's and this
tree's) on the same inputs with the same options, one thread each side
and the same --memory, and compares their output files with
tests/ref/same_file.py: every link, attribute (type and value), dataset
(shape, type, chunks, filters, fill, every byte) and dimension scale.
Only the attributes that differ between any two runs are left out:
created_utc, command_line, and attnrun_version (which a release changes).

The sets (all by default):
  fixtures  every case of fixtures/cases.tsv as listed, then with every
            output on the softmax path that keeps the maps and every
            output on the online one (no scores, weights or mean)
  presets   one input per --preset, its weights under their Hugging Face
            names (n = 300: past the 256-row blocks), on both paths
  variants  one input through each variant alone and some together
            (window, softcap, ALiBi, attention bias, positions, masks,
            --store, --compress, --precision f64, --kv, --tokens,
            --memory row blocks, --batch-slice), on both paths
  bench     every workload of make bench as it runs there, its input
            made by attnbench-gen (--gen, default build/bench/attnbench-gen),
            and the shapes of its own inputs on both paths with every output

Prints one line a comparison and a count; exit 0 when every pair is the
same, 1 when one differs or a run fails, 2 on a usage error.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
import same_file  # noqa: E402  (tests/ref/same_file.py)

IGNORED = ("created_utc", "command_line", "attnrun_version")
FULL = "scores,weights,heads,output,q,k,v,entropy,argmax,distance,mean,result,norms,value_norm"
ONLINE = "heads,output,q,k,v,entropy,argmax,distance,result,value_norm"
PATHS = (("full", FULL), ("online", ONLINE))
SETS = ("fixtures", "presets", "variants", "bench")
SAME = ["--threads", "1", "--memory", "256M", "-q"]


def run(program, args, out):
    """Runs program on args into out (replaced); its stderr, or None on success."""
    if os.path.exists(out):
        os.remove(out)
    done = subprocess.run([program] + SAME + args + ["-o", out], capture_output=True, text=True)
    return None if done.returncode == 0 else "exit %d: %s" % (done.returncode, done.stderr.strip())


def same_files(a, b):
    """None when the files are the same, else the first difference."""
    same_file.CHUNKS = True
    try:
        with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
            same_file.walk("/", fa, fb, IGNORED)
    except same_file.Differ as d:
        return str(d)
    return None


class Tally:
    def __init__(self):
        self.same = self.differ = 0

    def case(self, name, old, new, args, work):
        outs = []
        for tag, program in (("old", old), ("new", new)):
            out = os.path.join(work, "out_%s.h5" % tag)
            why = run(program, args, out)
            if why is not None:
                print("FAIL %s: %s %s" % (name, tag, why))
                self.differ += 1
                return
            outs.append(out)
        why = same_files(*outs)
        if why is None:
            print("same %s" % name)
            self.same += 1
        else:
            print("FAIL %s: %s" % (name, why))
            self.differ += 1


# ---- inputs ------------------------------------------------------------------

def rng_values(rng, shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def preset_inputs(path, B=2, n=300, D=32, H=4, G=2, dk=8):
    """{preset: (input file, options)}: each preset's weights in one file,
    under /<preset>/ by their Hugging Face names, X at the root."""
    rng = np.random.default_rng(19)
    f = h5py.File(path, "w")
    f["X"] = rng_values(rng, (B, n, D), 1.0)

    def put(group, names):
        for name, shape in names.items():
            f["%s/%s" % (group, name)] = rng_values(rng, shape)

    proj = {"q_proj.weight": (H * dk, D), "k_proj.weight": (G * dk, D),
            "v_proj.weight": (G * dk, D), "o_proj.weight": (D, H * dk)}
    fused = {"query_key_value.weight": (3 * H * dk, D), "query_key_value.bias": (3 * H * dk,),
             "dense.weight": (D, H * dk), "dense.bias": (D,)}
    layers = {
        "gpt2": {"c_attn.weight": (D, 3 * D), "c_attn.bias": (3 * D,),
                 "c_proj.weight": (D, D), "c_proj.bias": (D,)},
        "torch-mha": {"in_proj_weight": (3 * D, D), "in_proj_bias": (3 * D,),
                      "out_proj.weight": (D, D), "out_proj.bias": (D,)},
        "llama": proj, "mistral": proj, "gemma2": proj,
        "qwen2": dict(proj, **{"q_proj.bias": (H * dk,), "k_proj.bias": (G * dk,),
                               "v_proj.bias": (G * dk,)}),
        "qwen3": dict(proj, **{"q_norm.weight": (dk,), "k_norm.weight": (dk,)}),
        "neox": fused, "bloom": fused,
        "gptj": {"q_proj.weight": (H * dk, D), "k_proj.weight": (H * dk, D),
                 "v_proj.weight": (H * dk, D), "out_proj.weight": (D, H * dk)},
        "bert": {"self.query.weight": (D, D), "self.query.bias": (D,),
                 "self.key.weight": (D, D), "self.key.bias": (D,),
                 "self.value.weight": (D, D), "self.value.bias": (D,),
                 "output.dense.weight": (D, D), "output.dense.bias": (D,)},
    }
    rotary = {"llama", "mistral", "gemma2", "qwen2", "qwen3", "neox", "gptj"}
    cases = {}
    for preset, names in layers.items():
        put("/" + preset, names)
        args = [path, "--preset", preset, "--weights-group", "/" + preset, "--heads", str(H)]
        cases[preset] = args + (["--rope", "10000"] if preset in rotary else [])
    f.close()
    return cases


def variant_input(path, B=3, n=300, m=270, D=32):
    """A generic layer (H = 4) with every optional input a variant reads."""
    rng = np.random.default_rng(20)
    with h5py.File(path, "w") as f:
        f["X"] = rng_values(rng, (B, n, D), 1.0)
        f["KV"] = rng_values(rng, (B, m, D), 1.0)
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            f[name] = rng_values(rng, (D, D))
        for name in ("b_Q", "b_K", "b_V", "b_O"):
            f[name] = rng_values(rng, (D,))
        f["mask"] = (rng.random((B, n)) > 0.2).astype(np.int8)
        f["kv_mask"] = (rng.random((B, m)) > 0.2).astype(np.int8)
        f["bias"] = rng_values(rng, (4, n, n))
        f["positions"] = np.cumsum(rng.integers(1, 3, (B, n)), axis=1).astype(np.int64)
        f["slopes"] = np.linspace(0.1, 0.8, 4)
        f["norm"] = rng_values(rng, (8,), 1.0) + 1
        words = np.array([["t%d_%d" % (b, i) for i in range(n)] for b in range(B)], dtype=object)
        f.create_dataset("tokens", data=words, dtype=h5py.string_dtype())


def variant_cases(path):
    base = [path, "--heads", "4"]
    return {
        "plain": base,
        "causal window 64": base + ["--causal", "--window", "64"],
        "softcap 2": base + ["--softcap", "2"],
        "alibi": base + ["--causal", "--alibi"],
        "alibi slopes": base + ["--alibi-slopes", "slopes"],
        "attention bias (H, n, m)": base + ["--attn-bias", "bias"],
        "rope 500 positions": base + ["--rope", "500", "--positions", "positions"],
        "rope gptj dim 4": base + ["--rope", "10000", "--rope-dim", "4", "--rope-style", "gptj"],
        "qk norm and rope": base + ["--q-norm", "norm", "--k-norm", "norm", "--rope", "10000"],
        "mask inverted": base + ["--mask", "mask", "--mask-invert"],
        "kv cross mask": base + ["--kv", "KV", "--mask", "kv_mask"],
        "scale 0.2 causal": base + ["--scale", "0.2", "--causal"],
        "store f16": base + ["--store", "f16", "--causal"],
        "store bf16 compress 3": base + ["--store", "bf16", "--compress", "3"],
        "precision f64": base + ["--precision", "f64", "--causal"],
        "tokens": base + ["--tokens", "tokens"],
        "row blocks (--memory 1M)": base + ["--causal", "--memory", "1M"],
        "batch slice 2": base + ["--batch-slice", "2"],
        "everything": base + ["--causal", "--window", "100", "--softcap", "5", "--alibi",
                              "--attn-bias", "bias", "--rope", "1000", "--positions", "positions",
                              "--mask", "mask", "--store", "bf16"],
    }


def bench_cases(gen, work):
    """{workload: options} as make bench runs them, and their inputs made."""
    listing = subprocess.run([gen, "--list"], capture_output=True, text=True, check=True).stdout
    cases, made = {}, {}
    for line in listing.splitlines()[1:]:
        name = line.split()[0]
        options = re.search(r"(--heads .*?)(\s\s\(|$)", line).group(1).split()
        source = re.search(r"reads (\S+)'s input", line)
        owner = source.group(1) if source else name
        path = os.path.join(work, "bench_%s.h5" % owner)
        if owner not in made:
            subprocess.run([gen, owner, path], check=True, capture_output=True)
            made[owner] = path
        cases[name] = [path] + options
    return cases


def without_save(args):
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--save":
            skip = True
        else:
            out.append(a)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--work", help="where inputs and outputs go (default: a temporary directory)")
    p.add_argument("--only", default=",".join(SETS))
    p.add_argument("--gen", default=os.path.join(ROOT, "build", "bench", "attnbench-gen"))
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    a = p.parse_args()
    sets = set(a.only.split(","))
    for program in (a.old, a.new):
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            p.error("%s is not an executable file: give the path of an attnrun" % program)
    unknown = sorted(sets - set(SETS))
    if unknown:
        p.error("--only %s: no set %s (choose from %s)" % (a.only, unknown[0], ",".join(SETS)))
    work = a.work or tempfile.mkdtemp(prefix="attnrun-compare.")
    os.makedirs(work, exist_ok=True)
    t = Tally()
    try:
        if "fixtures" in sets:
            for line in open(os.path.join(ROOT, "fixtures", "cases.tsv")):
                if line.startswith("#") or not line.strip():
                    continue
                case, _, options = line.rstrip("\n").partition("\t")
                args = [os.path.join(ROOT, "fixtures", case + ".h5")] + options.split()
                t.case("fixture %s as listed" % case, a.old, a.new, args, work)
                for path, save in PATHS:
                    t.case("fixture %s, %s" % (case, path), a.old, a.new,
                           without_save(args) + ["--save", save], work)
        if "presets" in sets:
            for preset, args in preset_inputs(os.path.join(work, "presets.h5")).items():
                for path, save in PATHS:
                    t.case("preset %s, %s" % (preset, path), a.old, a.new,
                           args + ["--save", save], work)
        if "variants" in sets:
            path = os.path.join(work, "variants.h5")
            variant_input(path)
            for name, args in variant_cases(path).items():
                for kind, save in PATHS:
                    t.case("variant %s, %s" % (name, kind), a.old, a.new,
                           args + ["--save", save], work)
        if "bench" in sets:
            bench = bench_cases(a.gen, work)
            for name, args in bench.items():
                t.case("bench %s as run" % name, a.old, a.new, args, work)
            for name in ("gpt2", "long", "many", "xl", "llama"):
                args = without_save(bench[name])
                for path, save in PATHS:
                    t.case("bench %s, %s" % (name, path), a.old, a.new,
                           args + ["--save", save], work)
    finally:
        if not a.keep and not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print("%d comparisons: %d the same, %d not" % (t.same + t.differ, t.same, t.differ))
    return 1 if t.differ else 0


if __name__ == "__main__":
    sys.exit(main())
