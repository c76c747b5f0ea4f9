#!/usr/bin/env bash
# tests/cli/test_h5files.sh - what attnrun's HDF5 files hold: outputs written
# into inputs of every libver bound, --in-place --force replacing only what
# attnrun wrote, long --group and dataset paths, float32 overflow,
# soft-link bombs, and external links to datasets larger than the linking
# file.  Each check's name starts with the number of the guarantee it
# checks in tests/README.md's table "Hostile surroundings".
#
#   ATTNRUN=build/attnrun bash tests/cli/test_h5files.sh     # from the repository root
#
# Environment:
#   ATTNRUN     the binary under test (default: build/attnrun)
#   PYTHON      a python with numpy, h5py, h5netcdf, xarray (default: /usr/bin/python3)
#   TIME_LIMIT  hang guard of one run in seconds (default 10; make memcheck
#               sets 120).  The link bombs of item 10 get half of it (5 s).
#
# Inputs are generated at test time in a temporary directory removed on
# exit; expected values come from a float64 numpy reference written below
# from the published formulas, never from attnrun's output.  Float32
# results must be within 1e-4 relative to the dataset's largest magnitude,
# float64 within 1e-12.  Each check prints "ok NAME", "FAIL NAME: WHY";
# the last line is "hdf5 files: N passed, M failed".
set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
PY=${PYTHON:-/usr/bin/python3}
TIME_LIMIT=${TIME_LIMIT:-10}
# item 10: "a 5 s limit", scaled with TIME_LIMIT (valgrind)
BOMB_LIMIT=$(( TIME_LIMIT / 2 > 5 ? TIME_LIMIT / 2 : 5 ))

SUITE="hdf5 files"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh, reference.py
. "$TESTS/lib/checks.sh"

suite_setup h5files numpy h5py h5netcdf xarray

# ---------------------------------------------------------------- helpers

# h.py: input generators, the float64 reference and the comparisons.
cat >"$T/h.py" <<'EOF'
import sys, argparse
import numpy as np
import h5py
import reference as attention_reference

OUTPUTS = attention_reference.OUTPUTS
AXES = attention_reference.LABELS

def fail(msg):
    print(msg)
    sys.exit(1)

def text(v):
    return v.decode() if isinstance(v, bytes) else v

def gen(f, B, n, d, H=2, seed=0, bias=False, x=None, xname="X"):
    """X (B, n, d) float32 (or (n, d) when B == 0), packed (d, d) weights."""
    rng = np.random.default_rng(seed)
    shape = (B, n, d) if B > 0 else (n, d)
    f[xname] = (rng.standard_normal(shape) if x is None else x).astype(np.float32)
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[w] = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    if bias:
        for b in ("b_Q", "b_K", "b_V", "b_O"):
            f[b] = (0.1 * rng.standard_normal(d)).astype(np.float32)

def reference(f, x="X", heads=2, scale=None, causal=False):
    """Every output in float64 (tests/ref/reference.py)."""
    return attention_reference.from_file(f, heads, x=x, scale=scale, causal=causal)

def compare(name, got, ref, f64):
    """'' when got matches ref: dtype, shape, within the tolerance."""
    want = np.float64 if f64 else np.float32
    if got.dtype != want:
        return "%s stored as %s, expected %s" % (name, got.dtype, np.dtype(want))
    if got.shape != ref.shape:
        return "%s has shape %s, expected %s" % (name, got.shape, ref.shape)
    g = got.astype(np.float64)
    fin = np.isfinite(ref)
    if not np.isfinite(g[fin]).all():
        return "%s has non-finite values where the reference is finite" % name
    if not np.array_equal(g[~fin], ref[~fin]):
        return "%s differs where the reference is infinite" % name
    big = float(np.abs(ref[fin]).max()) if fin.any() else 0.0
    tol = (1e-12 * max(big, 1.0)) if f64 else 1e-4 * big
    err = float(np.abs(g[fin] - ref[fin]).max()) if fin.any() else 0.0
    if err > tol or (big > 0 and not np.abs(g[fin]).max() > 0):
        return "%s: max error %.3g > %.3g (largest magnitude %.3g)" % (name, err, tol, big)
    return ""

def verify(a):
    with h5py.File(a.input, "r") as fi:
        ref = reference(fi, a.x, a.heads, a.scale)
    save = a.save.split(",")
    notes = []
    with h5py.File(a.out, "r") as fo:
        if a.group not in fo:
            fail("no group %s in the output" % a.group[:60])
        g = fo[a.group]
        for name in save:
            if name not in g:
                fail("no dataset %s in %s" % (name, a.group[:60]))
            ds = g[name]
            if a.storage and not ds.id.get_storage_size() > 0:
                fail("%s stores 0 bytes (get_storage_size)" % name)
            why = compare(name, ds[...], ref[name], a.precision == "f64")
            if why:
                fail(why)
            if ds.chunks is not None:
                try:
                    notes.append("%s:%d" % (name, ds.id.get_num_chunks()))
                except Exception:
                    pass
        if a.dims:
            why = dims_resolve(g, save)
            if why:
                fail(why)
    print("%d datasets match%s" % (len(save), " (chunks " + " ".join(notes) + ")" if notes else ""))

def dims_resolve(g, names):
    """'' when every axis of every named output has its scale attached."""
    for name in names:
        ds = g[name]
        for i, axis in enumerate(AXES[name][-ds.ndim:]):
            try:
                sc = ds.dims[i][0]
            except Exception as e:
                return "%s axis %d (%s): the dimension scale does not resolve: %s" % (name, i, axis, e)
            if sc.name.rsplit("/", 1)[-1] != axis or sc.shape != (ds.shape[i],):
                return "%s axis %d: scale %s of shape %s, expected %s of (%d,)" % (
                    name, i, sc.name[-40:], sc.shape, axis, ds.shape[i])
    return ""

def open_xarray(path, group=None):
    import xarray
    return xarray.open_dataset(path, engine="h5netcdf", phony_dims="access", group=group)

if __name__ == "__main__" and sys.argv[1] == "verify":
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("out")
    p.add_argument("input")
    p.add_argument("--group", default="/")
    p.add_argument("--x", default="X")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--scale", type=float)
    p.add_argument("--save", default="scores,weights,heads,output")
    p.add_argument("--precision", default="f32")
    p.add_argument("--storage", action="store_true")
    p.add_argument("--dims", action="store_true")
    verify(p.parse_args())
EOF

# make.py DIR: every input of the suite, each check in its own directory.
cat >"$T/make.py" <<'EOF'
import os, sys
import numpy as np
import h5py
from h import gen

top = sys.argv[1]

def path(check, name="in.h5"):
    d = os.path.join(top, check)
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)

# 4: every libver bound; one chunk per output (B=2, n=4) and several
# (B=3, n=5 with --batch-slice 1), for -o and for --in-place
for lv in ("earliest", "v108", "v110", "latest"):
    for mode in ("o", "inplace"):
        with h5py.File(path("4_%s_%s_one" % (lv, mode)), "w", libver=lv) as f:
            gen(f, 2, 4, 8, seed=40)
        with h5py.File(path("4_%s_%s_multi" % (lv, mode)), "w", libver=lv) as f:
            gen(f, 3, 5, 8, seed=41, bias=True)

# 5a: user datasets named like the provenance attributes
with h5py.File(path("5a"), "w") as f:
    gen(f, 2, 4, 8, seed=50)
    f["scale"] = np.arange(3.0)
    f["precision"] = np.arange(2, dtype=np.int32)
with h5py.File(path("5a_heads"), "w") as f:
    gen(f, 2, 4, 8, seed=51)
    f["scale"] = np.arange(3.0)
    f["precision"] = np.arange(2, dtype=np.int32)
    f["heads"] = np.array([7, 8], dtype=np.int64)
for c in ("5b", "5g"):
    with h5py.File(path(c), "w") as f:
        gen(f, 2, 4, 8, seed=52)
# 5c: a user dataset named output
with h5py.File(path("5c"), "w") as f:
    gen(f, 2, 4, 8, seed=53)
    f["output"] = np.arange(5.0)
with h5py.File(path("5c_noforce"), "w") as f:
    gen(f, 2, 4, 8, seed=53)
    f["output"] = np.arange(5.0)
# 5d: a user dimension scale named query, attached to a user dataset
with h5py.File(path("5d"), "w") as f:
    gen(f, 2, 4, 8, seed=54)
    f["query"] = np.arange(4, dtype=np.int64)
    f["query"].make_scale("query")
    f["data"] = np.zeros(4)
    f["data"].dims[0].attach_scale(f["query"])
# 5e: X with n=8, X2 with n=6
with h5py.File(path("5e"), "w") as f:
    gen(f, 2, 8, 8, seed=55)
    f["X2"] = np.random.default_rng(56).standard_normal((2, 6, 8)).astype(np.float32)
# 5f: a user attribute scale on a group attnrun never wrote into
for c in ("5f", "5f_noforce"):
    with h5py.File(path(c), "w") as f:
        gen(f, 2, 4, 8, seed=57)
        f.attrs["scale"] = 5.0

# 6: a long --group path through an external link, a soft link, no link
G = "g" * 4200
d6 = os.path.dirname(path("6_external", "other.h5"))
with h5py.File(os.path.join(d6, "other.h5"), "w") as f:
    f.create_group("results")
with h5py.File(path("6_external"), "w") as f:
    gen(f, 2, 4, 8, seed=60)
    f["results"] = h5py.ExternalLink(os.path.join(d6, "other.h5"), "/results")
with h5py.File(path("6_soft"), "w") as f:
    gen(f, 2, 4, 8, seed=60)
    f.create_group("real")
    f["results"] = h5py.SoftLink("/real")
for c in ("6_long_o", "6_long_inplace"):
    with h5py.File(path(c), "w") as f:
        gen(f, 2, 4, 8, seed=61)

# 7: float32 overflow; X around 1e19 and 1e30 (finite float32), positive so
# that every score overflows float32 whatever the order of the products
with h5py.File(path("7_scale"), "w") as f:
    gen(f, 2, 4, 8, seed=70)
for e, c in ((19, "7_x19"), (30, "7_x30")):
    rng = np.random.default_rng(e)
    with h5py.File(path(c), "w") as f:
        f["X"] = (2.0 * 10.0 ** e * (1 + 0.1 * rng.random((2, 4, 8)))).astype(np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (np.abs(rng.standard_normal((8, 8))) / np.sqrt(8)).astype(np.float32)
        assert np.isfinite(f["X"][...]).all()

# 10: /g/a is a hard link to /g; soft links through 4 KB paths /g/a/a/.../a/NAME
P = "/g/" + "a/" * 2045
def bomb_base(f, seed):
    rng = np.random.default_rng(seed)
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[w] = (rng.standard_normal((8, 8)) / np.sqrt(8)).astype(np.float32)
    g = f.create_group("g")
    g["a"] = g
    return g, rng
with h5py.File(path("10_small"), "w") as f:      # X -> .../D, D -> .../D -> ...
    g, _ = bomb_base(f, 100)
    f["X"] = h5py.SoftLink(P + "D")
    g["D"] = h5py.SoftLink(P + "D")
with h5py.File(path("10_big"), "w", libver="latest") as f:  # 75 chained links
    g, rng = bomb_base(f, 101)
    g["real"] = rng.standard_normal((2, 4, 8)).astype(np.float32)
    f["X"] = h5py.SoftLink(P + "L0")
    N = 75
    for i in range(N):
        g["L%d" % i] = h5py.SoftLink(P + ("L%d" % (i + 1) if i + 1 < N else "real"))
with h5py.File(path("10_one"), "w") as f:         # one 4 KB link to a dataset
    g, rng = bomb_base(f, 102)
    g["real"] = rng.standard_normal((2, 4, 8)).astype(np.float32)
    f["X"] = h5py.SoftLink(P + "real")

# 19: X -> other.h5:/X, 64 KiB of values, in a linking file of ~4 KB
d19 = os.path.dirname(path("19", "other.h5"))
rng = np.random.default_rng(190)
with h5py.File(os.path.join(d19, "other.h5"), "w") as f:
    f["X"] = rng.standard_normal((4, 64, 64)).astype(np.float32)
with h5py.File(path("19"), "w") as f:
    f["X"] = h5py.ExternalLink(os.path.join(d19, "other.h5"), "/X")
    for w in ("W_Q", "W_K", "W_V"):
        f[w] = (rng.standard_normal((64, 2)) / 8).astype(np.float32)
    f["W_O"] = (rng.standard_normal((2, 64)) / 8).astype(np.float32)

# 20: X also inside two nested groups with 2500-character names
with h5py.File(path("20"), "w") as f:
    gen(f, 2, 4, 8, seed=200)
    f["/" + "p" * 2500 + "/" + "q" * 2500 + "/X"] = f["X"][...]

for c in ("10_small", "10_big", "10_one"):
    print("%s=%d" % (c, os.path.getsize(path(c))))
print("19_link=%d 19_other=%d" % (os.path.getsize(path("19")),
                                  os.path.getsize(os.path.join(d19, "other.h5"))))
EOF

if ! PYTHONPATH=$T:$TESTS/ref "$PY" "$T/make.py" "$T/c" >"$T/make.log" 2>&1; then
    bad "setup: generating the inputs failed: $(tail -n 3 "$T/make.log")"
    finish
fi
sizes=$(tr '\n' ' ' <"$T/make.log")

# verify NAME OUT IN [h.py verify options]: records NAME as ok when every
# saved output of OUT matches the float64 reference computed from IN.
verify() {
    local name=$1 out
    shift
    if out=$(PYTHONPATH=$T:$TESTS/ref "$PY" "$T/h.py" verify "$@" 2>&1); then
        ok "$name ($(printf '%s' "$out" | tail -n 1 | head -c 200))"
    else
        bad "$name: $(printf '%s' "$out" | tail -n 1 | head -c 300)"
    fi
}


# attn LIMIT ARGS...: attnrun -q ARGS under the hang guard; sets rc and
# leaves its output in $T/stdout and $T/stderr.
attn() {
    local limit=$1
    shift
    # (the braces keep bash's "Killed" notice of a guarded run off stderr)
    { timeout -s KILL "$limit" "$ATTNRUN" -q "$@" </dev/null >"$T/stdout" 2>"$T/stderr"; } 2>/dev/null
    rc=$?
}

err1() { head -c 200 "$T/stderr" | head -n 1; }

# snap DIR: the names in DIR and the sha256 of each regular file.
snap() {
    local f
    for f in "$1"/* "$1"/.[!.]*; do
        [ -e "$f" ] || [ -L "$f" ] || continue
        if [ -f "$f" ]; then
            echo "${f##*/} $(sha256sum <"$f" | cut -d ' ' -f 1)"
        else
            echo "${f##*/}"
        fi
    done
}

# temps DIR: attnrun's temporaries in DIR.
temps() { find "$1" -maxdepth 1 -name '.*attnrun-tmp*' -printf '%f ' ; }

# refused NAME STATUS PATTERN DIR LIMIT ARGS...: attnrun ARGS must exit
# STATUS in time, not by a signal, with one "attnrun: " stderr line that
# contains PATTERN (when not empty), and leave DIR (which holds IN and
# OUT's place) exactly as it was: IN's bytes, no OUT, no temporary.
# Whatever a wrong run added to DIR is removed afterwards.
refused() {
    local name=$1 status=$2 pattern=$3 dir=$4 limit=$5 before after f problem
    shift 5
    before=$(snap "$dir")
    attn "$limit" "$@"
    after=$(snap "$dir")
    for f in "$dir"/* "$dir"/.[!.]*; do
        [ -e "$f" ] || [ -L "$f" ] || continue
        printf '%s\n' "$before" | cut -d ' ' -f 1 | grep -qxF -e "${f##*/}" || rm -rf "$f"
    done
    problem=$(run_problem "$rc" "$status" "$T/stderr")
    if [ -n "$problem" ]; then
        bad "$name: $problem"
    elif [ -n "$pattern" ] && ! grep -qF -e "$pattern" "$T/stderr"; then
        bad "$name: the message does not contain '$pattern': $(err1)"
    elif [ "$before" != "$after" ]; then
        bad "$name: $dir changed (IN's bytes, an OUT or a temporary): $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | cut -c 1-80 | tr '\n' ' ')"
    else
        ok "$name (exit $rc: $(err1))"
    fi
}

# succeeded NAME DIR: the last attn run exited 0 and left no temporary in
# DIR; otherwise records the failure.  Status 0 when it did.
succeeded() {
    local name=$1 dir=$2 left problem
    problem=$(run_problem "$rc" 0 "$T/stderr")
    if [ -n "$problem" ]; then
        bad "$name: $problem"
    elif [ -s "$T/stderr" ]; then
        bad "$name: exit 0 but stderr says: $(err1)"
    elif left=$(temps "$dir") && [ -n "$left" ]; then
        bad "$name: temporaries left: $left"
    else
        return 0
    fi
    return 1
}

ALL=scores,weights,heads,output,q,k,v

# ---------------------------------------------------------------- 4. libver

# Inputs written with every libver bound h5py offers; every output, for -o
# and for --in-place, holds the reference values and stores its bytes.
for lv in earliest v108 v110 latest; do
    for shape in one multi; do
        extra=()
        what="one chunk"
        if [ $shape = multi ]; then
            extra=(--batch-slice 1)
            what="several chunks"
        fi
        d=$T/c/4_${lv}_o_$shape
        name="4 libver $lv, -o, $what: every output holds the reference values"
        attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --save $ALL "${extra[@]}"
        succeeded "$name" "$d" &&
            verify "$name" "$d/out.h5" "$d/in.h5" --save $ALL --storage

        d=$T/c/4_${lv}_inplace_$shape
        cp "$d/in.h5" "$d/orig.h5"
        name="4 libver $lv, --in-place, $what: every output holds the reference values"
        attn "$TIME_LIMIT" "$d/in.h5" --in-place --group /attn --heads 2 --save $ALL "${extra[@]}"
        succeeded "$name" "$d" &&
            verify "$name" "$d/in.h5" "$d/orig.h5" --group /attn --save $ALL --storage
    done
done

# ---------------------------------------------------------------- 5. --force

# a. Datasets named scale, precision (and heads) do not clash with the
# group attributes of those names: links and attributes are two namespaces.
d=$T/c/5a
name="5a user datasets /scale, /precision: --in-place without --force succeeds, both kept"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2
if succeeded "$name" "$d"; then
    expect_py "$name" "$d/in.h5" <<'EOF'
import sys, numpy as np, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    if not np.array_equal(f["scale"][...], np.arange(3.0)):
        h.fail("the user dataset /scale changed: %r" % f["scale"][...])
    if not np.array_equal(f["precision"][...], np.arange(2)):
        h.fail("the user dataset /precision changed: %r" % f["precision"][...])
    for a in ("scale", "precision"):
        if a not in f.attrs:
            h.fail("no group attribute %s" % a)
    if abs(float(f.attrs["scale"]) - 0.5) > 1e-12 or h.text(f.attrs["precision"]) != "f32":
        h.fail("attributes scale=%r precision=%r" % (f.attrs["scale"], f.attrs["precision"]))
    ref = h.reference(f)
    why = h.compare("output", f["output"][...], ref["output"], False)
    if why:
        h.fail(why)
print("user datasets kept, attributes scale and precision written")
EOF
fi

d=$T/c/5a_heads
name="5a user datasets /scale, /precision, /heads: --in-place --save scores,weights,output without --force succeeds"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --save scores,weights,output
if succeeded "$name" "$d"; then
    expect_py "$name" "$d/in.h5" <<'EOF'
import sys, numpy as np, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    if not np.array_equal(f["heads"][...], [7, 8]):
        h.fail("the user dataset /heads changed: %r" % f["heads"][...])
    if not np.array_equal(f["scale"][...], np.arange(3.0)):
        h.fail("the user dataset /scale changed")
    for a in ("scale", "precision", "heads"):
        if a not in f.attrs:
            h.fail("no group attribute %s" % a)
    if int(f.attrs["heads"]) != 2:
        h.fail("attribute heads = %r" % f.attrs["heads"])
    ref = h.reference(f)
    for k in ("scores", "weights", "output"):
        why = h.compare(k, f[k][...], ref[k], False)
        if why:
            h.fail(why)
EOF
fi

# b. A second --force run that saves less keeps the axes the first run's
# datasets still use: d_k stays, q and k keep their scales.
d=$T/c/5b
name="5b --in-place --save q,k,v,output then --force --save output: d_k kept, q/k scales resolve, xarray opens"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --save q,k,v,output
if succeeded "$name (run 1)" "$d"; then
    attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --force --save output
    if succeeded "$name (run 2)" "$d"; then
        expect_py "$name" "$d/in.h5" <<'EOF'
import sys, numpy as np, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    if "d_k" not in f:
        h.fail("d_k was deleted: %s" % sorted(f))
    for name in ("q", "k"):
        try:
            sc = f[name].dims[3][0]
        except Exception as e:
            h.fail("%s.dims[3][0] does not resolve: %s" % (name, e))
        if sc.name != "/d_k":
            h.fail("%s.dims[3][0] is %s, not /d_k" % (name, sc.name))
    why = h.dims_resolve(f, ("q", "k", "v", "output"))
    if why:
        h.fail(why)
    ref = h.reference(f)
    for k in ("q", "k", "v", "output"):
        why = h.compare(k, f[k][...], ref[k], False)
        if why:
            h.fail(why)
try:
    ds = h.open_xarray(sys.argv[1])
    dims = ds["q"].dims
except Exception as e:
    h.fail("xarray cannot open the file: %r" % e)
if dims[-1] != "d_k":
    h.fail("xarray: q has dims %s" % (dims,))
print("xarray q dims %s" % (dims,))
EOF
    fi
fi

# c. A dataset named output that attnrun did not write is never replaced.
d=$T/c/5c
refused "5c user dataset 'output': --in-place --force is refused naming it" 2 output \
    "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --force
d=$T/c/5c_noforce
refused "5c user dataset 'output': --in-place without --force is refused naming it" 2 output \
    "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2

# d. A user dimension scale named query is not attnrun's either.
d=$T/c/5d
refused "5d user dimension scale 'query': --in-place --force is refused naming it" 2 query \
    "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --force

# e. attnrun's own query scale (n=8) still serves q, which run 2 keeps:
# replacing it by one of length 6 would break q.
d=$T/c/5e
name="5e --force --x X2 (n=6) over a run with n=8 whose q keeps 'query'"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group /r --save q,output
if succeeded "$name (run 1)" "$d"; then
    refused "$name: refused naming query" 2 query \
        "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group /r --force --save output --x X2
fi

# f. A user attribute scale on a group attnrun never wrote into.
d=$T/c/5f_noforce
refused "5f user attribute 'scale': --in-place without --force is refused" 2 scale \
    "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2
d=$T/c/5f
refused "5f user attribute 'scale': --in-place --force is refused naming it" 2 scale \
    "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --force

# g. The same --force command twice: both succeed, everything resolves.
d=$T/c/5g
name="5g the same --in-place --force --save all twice: reference values, scales resolve, attnrun_role marks, xarray opens"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --force --save $ALL
if succeeded "$name (run 1)" "$d"; then
    attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --force --save $ALL
    if succeeded "$name (run 2)" "$d"; then
        expect_py "$name" "$d/in.h5" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    ref = h.reference(f)
    for k in h.OUTPUTS:
        why = h.compare(k, f[k][...], ref[k], False)
        if why:
            h.fail(why)
    why = h.dims_resolve(f, h.OUTPUTS)
    if why:
        h.fail(why)
    roles = {k: "result" for k in h.OUTPUTS}
    roles.update({a: "axis" for a in ("batch", "head", "query", "key", "d_k", "d_v", "d_model")})
    for k, role in roles.items():
        got = h.text(f[k].attrs.get("attnrun_role"))
        if got != role:
            h.fail("%s: attnrun_role is %r, expected %r" % (k, got, role))
try:
    ds = h.open_xarray(sys.argv[1])
    got = {k: ds[k].dims for k in h.OUTPUTS}
except Exception as e:
    h.fail("xarray cannot open the file: %r" % e)
for k in h.OUTPUTS:
    if got[k] != h.AXES[k]:
        h.fail("xarray: %s has dims %s, expected %s" % (k, got[k], h.AXES[k]))
print("xarray dims as labelled")
EOF
    fi
fi

# ---------------------------------------------------------------- 6. long --group

G=/results/$(printf 'g%.0s' $(seq 4200))

d=$T/c/6_external
refused "6 --in-place --group of 4209 bytes through an external link: refused, both files unchanged" \
    2 "external link" "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group "$G"

d=$T/c/6_soft
refused "6 --in-place --group of 4209 bytes through a soft link: refused (README, Safety)" \
    2 "" "$d" "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group "$G"

d=$T/c/6_long_o
name="6 -o --group of 4209 bytes (no links): the results are at that path"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --group "$G"
succeeded "$name" "$d" && verify "$name" "$d/out.h5" "$d/in.h5" --group "$G"

d=$T/c/6_long_inplace
cp "$d/in.h5" "$d/orig.h5"
name="6 --in-place --group of 4209 bytes (no links): the results are at that path"
attn "$TIME_LIMIT" "$d/in.h5" --in-place --heads 2 --group "$G"
succeeded "$name" "$d" && verify "$name" "$d/in.h5" "$d/orig.h5" --group "$G"

# ---------------------------------------------------------------- 7. overflow

d=$T/c/7_scale
refused "7 --scale 1e39 does not fit float32: usage error" 2 float32 \
    "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --scale 1e39
refused "7 --scale 1e-50 is 0 in float32: usage error" 2 "" \
    "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --scale 1e-50

for e in 19 30; do
    d=$T/c/7_x$e
    refused "7 X around 1e$e, default outputs: float32 overflow refused" 3 "--precision f64" \
        "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
    refused "7 X around 1e$e, --save output: float32 overflow refused" 3 "--precision f64" \
        "$d" "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --save output
done

d=$T/c/7_x19
name="7 X around 1e19 with --precision f64: finite values matching the reference"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2 --precision f64 --save $ALL
succeeded "$name" "$d" &&
    verify "$name" "$d/out.h5" "$d/in.h5" --save $ALL --precision f64
rm -f "$d/out.h5"

# ---------------------------------------------------------------- 10. link bombs

d=$T/c/10_small
refused "10 soft link looping through a hard-link cycle (4 KB paths): refused within $BOMB_LIMIT s" \
    3 links "$d" "$BOMB_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
d=$T/c/10_big
refused "10 chain of 76 soft links of 4 KB paths: refused within $BOMB_LIMIT s" \
    3 links "$d" "$BOMB_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
d=$T/c/10_one
name="10 one soft link through a 4 KB path of hard-linked groups: resolves"
attn "$BOMB_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 2
succeeded "$name" "$d" && verify "$name" "$d/out.h5" "$d/in.h5"
echo "# item 10 and 19 input sizes (bytes): $sizes"

# ---------------------------------------------------------------- 19. external

d=$T/c/19
name="19 --allow-external: X links to 64 KiB of values in another file, more than the linking file"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/out.h5" --heads 1 --allow-external
succeeded "$name" "$d" && verify "$name" "$d/out.h5" "$d/in.h5" --heads 1

# ---------------------------------------------------------------- 20. long --x

d=$T/c/20
X20=/$(printf 'p%.0s' $(seq 2500))/$(printf 'q%.0s' $(seq 2500))/X
name="20 --x of 5008 bytes: the reference values, the same as for /X"
attn "$TIME_LIMIT" "$d/in.h5" -o "$d/long.h5" --heads 2 --x "$X20" --save $ALL
if succeeded "$name" "$d"; then
    attn "$TIME_LIMIT" "$d/in.h5" -o "$d/short.h5" --heads 2 --save $ALL
    if succeeded "$name (the run on /X)" "$d"; then
        expect_py "$name" "$d/long.h5" "$d/short.h5" "$d/in.h5" "$X20" <<'EOF'
import sys, numpy as np, h5py, h
with h5py.File(sys.argv[3], "r") as f:
    ref = h.reference(f, sys.argv[4])
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    for k in h.OUTPUTS:
        why = h.compare(k, a[k][...], ref[k], False)
        if why:
            h.fail(why)
        if not np.array_equal(a[k][...], b[k][...]):
            h.fail("%s differs from the run on /X" % k)
EOF
    fi
fi

finish
