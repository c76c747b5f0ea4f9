#!/usr/bin/env bash
# tests/cli/test_append.sh - one results file for a whole model: `-o results.h5
# --group G --append` (README, "Gathering layers: --append").
#
#   ATTNRUN=build/attnrun bash tests/cli/test_append.sh     # from the repository root
#
# Environment: ATTNRUN (default build/attnrun), PYTHON (a python with numpy,
# h5py, xarray and netCDF4; default /usr/bin/python3), TIME_LIMIT (hang
# guard of one run in seconds, default 20).
#
# What it checks:
#   - layers of a generated three-layer GPT-2 model (--preset gpt2) and two
#     fixtures appended to one index: every group equals a direct -o run of
#     the same layer bit for bit, the fixtures also their expected files
#     (fixtures/tolerances.tsv, computed by numpy, never by attnrun);
#   - xarray (default engine, netCDF4) and `ncdump -h` open every group with
#     its dimensions; h5py finds every dataset's dimension scales; earlier
#     parts are byte-identical after later appends; the index stays small;
#   - what a refusal, a rejected input, a dry run, a full file, SIGINT and
#     SIGTERM mid-run or while waiting for the lock, and a failure injected
#     after the part is in place (strace) leave: the index, every part and
#     the directory exactly as they were;
#   - --force replaces a group's part and removes the old one only;
#     concurrent appends; an index reached through a symbolic link; the
#     index's permission bits; a part left by a crash is replaced;
#   - the links are relative: the index opens from another directory and
#     after the whole directory is moved.
# Each check prints "ok NAME", "FAIL NAME: WHY" or "skip NAME: WHY"; the
# last line is "append: N passed, M failed"; the exit status is 1 when M > 0.
set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
PY=${PYTHON:-/usr/bin/python3}
TL=${TIME_LIMIT:-20}
FIX=$PWD/fixtures

SUITE="append"
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # checks.sh
. "$TESTS/lib/checks.sh"
skip() { echo "skip $*"; }

suite_setup append numpy h5py xarray netCDF4

# ---------------------------------------------------------------- helpers

cat >"$T/h.py" <<'EOF'
import os, sys, hashlib
import numpy as np
import h5py

OUTPUTS = ("scores", "weights", "heads", "output", "q", "k", "v")


def fail(msg):
    print(msg)
    sys.exit(1)


def model(path, layers, B=2, n=16, D=32, seed=7):
    """A GPT-2-style model: per layer its input /inputs/h.i (B, n, D) and
    /transformer/h.i/attn/c_attn.weight (D, 3D), c_attn.bias, c_proj.*."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for i in range(layers):
            f["inputs/h.%d" % i] = rng.standard_normal((B, n, D)).astype(np.float32)
            g = "transformer/h.%d/attn/" % i
            f[g + "c_attn.weight"] = (rng.standard_normal((D, 3 * D)) / np.sqrt(D)).astype(np.float32)
            f[g + "c_attn.bias"] = (0.1 * rng.standard_normal(3 * D)).astype(np.float32)
            f[g + "c_proj.weight"] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
            f[g + "c_proj.bias"] = (0.1 * rng.standard_normal(D)).astype(np.float32)


def gen(path, B, n, d, seed=0):
    """X (B, n, d) and packed (d, d) weights: a plain input."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f["X"] = rng.standard_normal((B, n, d)).astype(np.float32)
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)


def same_group(index, group, direct):
    """'' when index[group] holds the outputs of direct[group], bit for bit."""
    with h5py.File(index, "r") as a, h5py.File(direct, "r") as b:
        ga, gb = a[group], b[group]
        oa = sorted(k for k in OUTPUTS if k in ga)
        ob = sorted(k for k in OUTPUTS if k in gb)
        if oa != ob or not oa:
            return "outputs %s vs %s" % (oa, ob)
        for k in oa:
            x, y = ga[k][...], gb[k][...]
            if x.dtype != y.dtype or x.shape != y.shape:
                return "%s: %s%s vs %s%s" % (k, x.dtype, x.shape, y.dtype, y.shape)
            if not np.array_equal(x, y, equal_nan=True):
                return "%s differs" % k
    return ""


def within_expected(index, group, case, fixtures):
    """'' when index[group] matches fixtures/<case>.expected.h5 within the
    tolerances of fixtures/tolerances.tsv (numpy's, not attnrun's)."""
    tol = {}
    for line in open(os.path.join(fixtures, "tolerances.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        c, name, delta = line.rstrip("\n").split("\t")
        if c == case:
            tol[name.strip("/")] = float(delta)
    with h5py.File(index, "r") as a, h5py.File(os.path.join(fixtures, case + ".expected.h5"), "r") as b:
        for name, delta in tol.items():
            x, y = a[group][name][...].astype(np.float64), b[name][...].astype(np.float64)
            if x.shape != y.shape:
                return "%s: shape %s vs %s" % (name, x.shape, y.shape)
            inf = np.isinf(y)
            if not np.array_equal(x[inf], y[inf]):
                return "%s: -inf where the reference has none, or none where it has" % name
            err = np.max(np.abs(x[~inf] - y[~inf])) if (~inf).any() else 0.0
            if not err <= delta:
                return "%s: off by %g > %g" % (name, err, delta)
    return ""


def scales_ok(index, groups):
    """'' when every output of every group has, on each axis, an attached
    dimension scale named after the label, holding 0 .. len-1."""
    with h5py.File(index, "r") as f:
        for g in groups:
            for k in OUTPUTS:
                if k not in f[g]:
                    continue
                ds = f[g][k]
                for axis, dim in enumerate(ds.dims):
                    if len(dim) != 1:
                        return "%s/%s axis %d: %d scales" % (g, k, axis, len(dim))
                    scale = dim[0]
                    if scale.name != "%s/%s" % (g, dim.label) and \
                            scale.name != "/%s/%s" % (g.strip("/"), dim.label):
                        return "%s/%s axis %d: scale %s, label %s" % (g, k, axis, scale.name, dim.label)
                    if not np.array_equal(scale[...], np.arange(ds.shape[axis])):
                        return "%s/%s axis %d: scale values" % (g, k, axis)
    return ""


def xarray_ok(index, groups, direct=None):
    """'' when xarray's default engine (netCDF4) opens every group of the
    index with named dimensions; with direct, the values are direct's."""
    import xarray as xr
    for g in groups:
        with xr.open_dataset(index, group=g) as ds:
            if "weights" in ds and ds.weights.dims[-2:] != ("query", "key"):
                return "%s: weights dims %s" % (g, ds.weights.dims)
            if not ds.data_vars:
                return "%s: no variables" % g
            if direct is not None:
                with h5py.File(direct[g], "r") as f:
                    for k in ds.data_vars:
                        if not np.array_equal(ds[k].values, f[g][k][...], equal_nan=True):
                            return "%s/%s: xarray reads other values" % (g, k)
    return ""


def state(top):
    """Every file under top (hidden ones too) with its sha256, and every directory."""
    out = []
    for d, dirs, files in os.walk(top):
        rel = os.path.relpath(d, top)
        out.append("dir " + rel)
        for n in sorted(files):
            with open(os.path.join(d, n), "rb") as f:
                out.append("%s %s" % (os.path.join(rel, n), hashlib.sha256(f.read()).hexdigest()))
    return "\n".join(sorted(out))
EOF

run() {
    timeout -s KILL "$TL" "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
}
err1() { head -n 1 "$T/stderr"; }

# snapshot DIR: the state of everything under DIR (names and bytes).
snapshot() { PYTHONPATH=$T "$PY" -c 'import sys, h; print(h.state(sys.argv[1]))' "$1"; }

# unchanged NAME DIR BEFORE: ok when DIR's snapshot is still BEFORE.
unchanged() {
    local now
    now=$(snapshot "$2")
    if [ "$now" = "$3" ]; then
        ok "$1"
    else
        bad "$1: the directory changed: $(diff <(echo "$3") <(echo "$now") | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
    fi
}

# refused NAME STATUS TEXT DIR BEFORE: the last run ended with STATUS and
# one "attnrun: " line holding TEXT, and DIR is as it was.
refused() {
    local why
    why=$(run_problem "$rc" "$2" "$T/stderr")
    if [ -n "$why" ]; then
        bad "$1: $why"
    elif ! grep -q -- "$3" "$T/stderr"; then
        bad "$1: message lacks '$3': $(err1)"
    else
        unchanged "$1" "$4" "$5"
    fi
}

workdir() {
    local d=$T/$1
    rm -rf "$d"
    mkdir -p "$d"
    echo "$d"
}

LAYER_ARGS=(--preset gpt2 --heads 4)
# layer_args I: the options of layer I of the generated model.
layer_args() { echo "--weights-group /transformer/h.$1/attn --x /inputs/h.$1"; }

# ------------------------------------------------- 1. layers gathered in one file

D1=$(workdir gather)
RES=$D1/res
mkdir -p "$RES" "$D1/direct"
PYTHONPATH=$T "$PY" -c 'import sys, h; h.model(sys.argv[1], 3)' "$D1/model.h5"

check_gather() {
    local i name part0_before
    for i in 0 1 2; do
        name="layer $i appended"
        # shellcheck disable=SC2046
        run "$D1/model.h5" -o "$RES/results.h5" --append --group "/model/layer$i" \
            "${LAYER_ARGS[@]}" $(layer_args $i)
        [ $rc -eq 0 ] && ok "$name" || bad "$name: exit $rc: $(err1)"
        # shellcheck disable=SC2046
        run "$D1/model.h5" -o "$D1/direct/layer$i.h5" --group "/model/layer$i" \
            "${LAYER_ARGS[@]}" $(layer_args $i)
        [ $rc -eq 0 ] || bad "direct run of layer $i: exit $rc: $(err1)"
        [ $i -eq 0 ] && part0_before=$(sha256sum <"$RES/results.h5.parts/model+layer0.1.h5")
    done
    run "$FIX/gpt2.h5" -o "$RES/results.h5" --append --group /fixtures/gpt2 --heads 12
    [ $rc -eq 0 ] && ok "gpt2 fixture appended" || bad "gpt2 fixture appended: exit $rc: $(err1)"
    run "$FIX/toy.h5" -o "$RES/results.h5" --append --group /toy --heads 1
    [ $rc -eq 0 ] && ok "toy fixture appended" || bad "toy fixture appended: exit $rc: $(err1)"

    for i in 0 1 2; do
        expect_py "layer $i equals a direct run bit for bit" "$RES/results.h5" "$D1/direct/layer$i.h5" "$i" <<'EOF'
import sys, h
why = h.same_group(sys.argv[1], "/model/layer%s" % sys.argv[3], sys.argv[2])
why and h.fail(why)
EOF
    done
    expect_py "gpt2 fixture within fixtures/tolerances.tsv of its numpy reference" "$RES/results.h5" "$FIX" <<'EOF'
import sys, h
why = h.within_expected(sys.argv[1], "/fixtures/gpt2", "gpt2", sys.argv[2])
why and h.fail(why)
EOF
    expect_py "toy fixture within fixtures/tolerances.tsv of its numpy reference" "$RES/results.h5" "$FIX" <<'EOF'
import sys, h
why = h.within_expected(sys.argv[1], "/toy", "toy", sys.argv[2])
why and h.fail(why)
EOF
    local listing
    listing=$(cd "$RES" && find . | LC_ALL=C sort | tr '\n' ' ')
    if [ "$listing" = ". ./results.h5 ./results.h5.parts ./results.h5.parts/fixtures+gpt2.1.h5 ./results.h5.parts/model+layer0.1.h5 ./results.h5.parts/model+layer1.1.h5 ./results.h5.parts/model+layer2.1.h5 ./results.h5.parts/toy.1.h5 " ]; then
        ok "layout: the index and one part per group, nothing else"
    else
        bad "layout: $listing"
    fi
    if [ "$(sha256sum <"$RES/results.h5.parts/model+layer0.1.h5")" = "$part0_before" ]; then
        ok "layer 0's part is byte-identical after four later appends"
    else
        bad "layer 0's part changed after later appends"
    fi
    local size
    size=$(stat -c %s "$RES/results.h5")
    if [ "$size" -le 65536 ]; then
        ok "the index of 5 groups is small ($size bytes)"
    else
        bad "the index of 5 groups takes $size bytes"
    fi
    expect_py "h5py: every dataset's dimension scales attached and valid, first group too" "$RES/results.h5" <<'EOF'
import sys, h
why = h.scales_ok(sys.argv[1], ["/model/layer0", "/model/layer1", "/model/layer2", "/fixtures/gpt2", "/toy"])
why and h.fail(why)
EOF
    expect_py "xarray (default engine) opens every group with the direct runs' values" "$RES/results.h5" "$D1/direct" <<'EOF'
import sys, os, h
d = sys.argv[2]
direct = {"model/layer%d" % i: os.path.join(d, "layer%d.h5" % i) for i in range(3)}
why = h.xarray_ok(sys.argv[1], list(direct), direct) or h.xarray_ok(sys.argv[1], ["fixtures/gpt2", "toy"])
why and h.fail(why)
EOF
    check_ncdump "$RES/results.h5" "ncdump -h lists every group with its dimensions"
    expect_py "h5netcdf: the part file itself opens (the workaround README gives)" "$RES/results.h5.parts/model+layer1.1.h5" "$D1/direct/layer1.h5" <<'EOF'
import sys, numpy as np, h5py, xarray as xr
with xr.open_dataset(sys.argv[1], group="model/layer1", engine="h5netcdf") as ds, h5py.File(sys.argv[2]) as f:
    if ds.weights.dims != ("batch", "head", "query", "key"):
        print("dims", ds.weights.dims); sys.exit(1)
    if not np.array_equal(ds.weights.values, f["model/layer1/weights"][...]):
        print("values differ"); sys.exit(1)
EOF
}

# check_ncdump INDEX NAME: ncdump -h succeeds and shows, for each group,
# the dimensions of its part file (read with h5py).
check_ncdump() {
    if ! command -v ncdump >/dev/null; then
        skip "$2: ncdump is not installed (Debian package netcdf-bin)"
        return
    fi
    if ! ncdump -h "$1" >"$T/ncdump" 2>"$T/ncdump.err"; then
        bad "$2: ncdump failed: $(head -c 300 "$T/ncdump.err")"
        return
    fi
    expect_py "$2" "$1" "$T/ncdump" <<'EOF'
import sys, re, h5py
# The dimensions ncdump lists under each group, by group path.
found, path = {}, []
for line in open(sys.argv[2]):
    s = line.strip()
    m = re.match(r"group: (\S+) \{", s)
    if m:
        path.append(m.group(1)); continue
    if s == "dimensions:":
        continue
    m = re.match(r"(\w+) = (\d+) ;", s)
    if m and path:
        found.setdefault("/" + "/".join(path), {})[m.group(1)] = int(m.group(2)); continue
    if s.startswith("} // group") and path:
        path.pop()
expected = {}
def walk(f):
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.attrs.get("attnrun_role") in (b"axis", "axis"):
            g = "/" + name.rsplit("/", 1)[0]
            expected.setdefault(g, {})[name.rsplit("/", 1)[1]] = obj.shape[0]
    for top in f:
        f[top].visititems(lambda n, o: visit(top + "/" + n, o))
with h5py.File(sys.argv[1], "r") as f:
    walk(f)
if not expected:
    print("no groups found with h5py"); sys.exit(1)
for g, dims in expected.items():
    if found.get(g) != dims:
        print("%s: ncdump lists %s, the part holds %s" % (g, found.get(g), dims)); sys.exit(1)
print("%d groups" % len(expected))
EOF
}

# ------------------------------------------------- 2. refusals: exit status, nothing changed

check_refusals() {
    local before
    before=$(snapshot "$RES")
    run "$FIX/toy.h5" --heads 1 --group /x --append
    refused "--append without -o: exit 2" 2 "give it" "$RES" "$before"
    run "$FIX/toy.h5" --heads 1 --group /x --append --in-place
    refused "--append with --in-place: exit 2" 2 "not with --in-place" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append
    refused "--append without --group: exit 2" 2 "needs --group" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /
    refused "--append --group /: exit 2" 2 "needs --group" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /toy
    refused "existing group without --force: exit 2" 2 "already holds results at /toy" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /model --force
    refused "a group holding other results, even with --force: exit 2" 2 \
        "/model holds the results at /model/layer0" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /toy/inner --force
    refused "a group inside other results: exit 2" 2 "inside the results at /toy" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /toy --dry-run
    refused "--dry-run on an existing group: exit 2" 2 "already holds" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /new --dry-run
    if [ $rc -ne 0 ] || ! grep -q "outputs in group /new" "$T/stdout"; then
        bad "--append --dry-run: exit $rc: $(err1)"
    else
        unchanged "--append --dry-run: exit 0, the plan, nothing written" "$RES" "$before"
    fi
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 7 --append --group /new
    refused "input rejected (3 columns, 7 heads): exit 3" 3 "do not split into 7 heads" "$RES" "$before"
    run "$FIX/toy.h5" -o "$RES/results.h5" --heads 1 --append --group /new --x missing
    refused "missing dataset: exit 3" 3 "missing" "$RES" "$before"

    local d
    d=$(workdir notindex)
    cp "$FIX/toy.expected.h5" "$d/other.h5"
    printf 'not hdf5\n' >"$d/text.h5"
    mkdir "$d/dir.h5"
    before=$(snapshot "$d")
    run "$FIX/toy.h5" -o "$d/other.h5" --heads 1 --append --group /new
    refused "OUT an HDF5 file that is not an index: exit 2, why, not copied" 2 \
        "not a results index attnrun made (no attnrun_index attribute)" "$d" "$before"
    run "$FIX/toy.h5" -o "$d/text.h5" --heads 1 --append --group /new
    refused "OUT not an HDF5 file: exit 2" 2 "not a results index attnrun made (not an HDF5 file)" "$d" "$before"
    run "$FIX/toy.h5" -o "$d/dir.h5" --heads 1 --append --group /new
    refused "OUT a directory: exit 2" 2 "names a directory" "$d" "$before"
    run "$FIX/toy.h5" -o "$FIX/toy.h5" --heads 1 --append --group /new
    refused "OUT is IN: exit 2" 2 "the output is the input" "$d" "$before"

    # an index someone wrote into: a rewrite would lose what they added
    d=$(workdir foreign)
    run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /a
    "$PY" -c 'import sys, h5py; h5py.File(sys.argv[1], "a")["notes"] = [1, 2]' "$d/r.h5"
    before=$(snapshot "$d")
    run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /b
    refused "an index holding a user's dataset: exit 2, left as it is" 2 "/notes is a dataset" "$d" "$before"
    rm -f "$d/r.h5" && run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /a
    "$PY" -c 'import sys, h5py; h5py.File(sys.argv[1], "a").attrs["mine"] = 1' "$d/r.h5"
    before=$(snapshot "$d")
    run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /b --force
    refused "an index with a user's attribute: exit 2 even with --force" 2 "root attributes" "$d" "$before"

    # a copy of an index links into the original's parts: --force on the
    # copy must not remove them
    d=$(workdir copied)
    run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /l0
    cp "$d/r.h5" "$d/s.h5"
    before=$(snapshot "$d")
    run "$FIX/toy.h5" -o "$d/s.h5" --heads 1 --append --group /l0 --force
    refused "a copied index (links into another index's parts), --force: exit 2, the original's part kept" \
        2 "not into this index's own parts directory" "$d" "$before"

    # what would only fail after the computation is refused before it
    d=$(workdir early)
    printf 'mine\n' >"$d/r.h5.parts"
    before=$(snapshot "$d")
    run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /l0 --dry-run
    refused "OUT.parts a file, not a directory: exit 2 at the dry run" 2 "is not a directory" "$d" "$before"
    local long
    long=$(printf 'b%.0s' $(seq 1 250)).h5
    run "$FIX/toy.h5" -o "$d/$long" --heads 1 --append --group /l0 --dry-run
    refused "a parts directory name over the file system's limit: exit 2 at the dry run" 2 \
        "longer than the file system allows" "$d" "$before"

    # an index whose name starts with "." takes appends like any other
    d=$(workdir hidden)
    run "$FIX/toy.h5" -o "$d/.r.h5" --heads 1 --append --group /l0 &&
        run "$FIX/toy.h5" -o "$d/.r.h5" --heads 1 --append --group /l1
    if [ $rc -eq 0 ] && [ -f "$d/.r.h5.parts/l0.1.h5" ] && [ -f "$d/.r.h5.parts/l1.1.h5" ]; then
        ok "an index named .r.h5 takes a second append"
    else
        bad "an index named .r.h5: exit $rc: $(err1)"
    fi
}

# ------------------------------------------------- 3. --force

check_force() {
    local part1 others_before others_after
    part1=$RES/results.h5.parts/model+layer1.1.h5
    others_before=$(sha256sum "$RES"/results.h5.parts/model+layer0.1.h5 "$RES"/results.h5.parts/toy.1.h5)
    # /model/layer1 replaced by layer 2's results
    # shellcheck disable=SC2046
    run "$D1/model.h5" -o "$RES/results.h5" --append --group /model/layer1 --force \
        "${LAYER_ARGS[@]}" $(layer_args 2)
    if [ $rc -ne 0 ]; then
        bad "--force replaces a group: exit $rc: $(err1)"
        return
    fi
    # shellcheck disable=SC2046
    run "$D1/model.h5" -o "$D1/direct/layer1_as_2.h5" --group /model/layer1 "${LAYER_ARGS[@]}" $(layer_args 2)
    expect_py "--force: the group now holds the new results" "$RES/results.h5" "$D1/direct/layer1_as_2.h5" <<'EOF'
import sys, h
why = h.same_group(sys.argv[1], "/model/layer1", sys.argv[2])
why and h.fail(why)
EOF
    others_after=$(sha256sum "$RES"/results.h5.parts/model+layer0.1.h5 "$RES"/results.h5.parts/toy.1.h5)
    if [ -e "$part1" ]; then
        bad "--force: the replaced part is still there"
    elif [ ! -f "$RES/results.h5.parts/model+layer1.2.h5" ]; then
        bad "--force: no part model+layer1.2.h5: $(ls "$RES/results.h5.parts" | tr '\n' ' ')"
    elif [ "$others_before" != "$others_after" ]; then
        bad "--force: other parts changed"
    else
        ok "--force: the old part removed, the new one is generation 2, other parts untouched"
    fi
    # back to layer 1, for the checks after this one
    # shellcheck disable=SC2046
    run "$D1/model.h5" -o "$RES/results.h5" --append --group /model/layer1 --force \
        "${LAYER_ARGS[@]}" $(layer_args 1)
    expect_py "--force again: generation 3 holds layer 1" "$RES/results.h5" "$D1/direct/layer1.h5" \
        "$RES/results.h5.parts" <<'EOF'
import sys, os, h
why = h.same_group(sys.argv[1], "/model/layer1", sys.argv[2])
why and h.fail(why)
names = sorted(n for n in os.listdir(sys.argv[3]) if n.startswith("model+layer1."))
names == ["model+layer1.3.h5"] or h.fail("parts %s" % names)
EOF
    # a user's file in the parts directory that no link names is not attnrun's to delete,
    # unless it carries the very name a crash would leave
    local d
    d=$(workdir orphan)
    run "$FIX/toy.h5" -o "$d/r.h5" --heads 1 --append --group /a
    printf 'left by a crash\n' >"$d/r.h5.parts/b.1.h5"
    printf 'a note of the user\n' >"$d/r.h5.parts/notes.txt"
    run "$FIX/causal.h5" -o "$d/r.h5" --heads 2 --causal --append --group /b
    expect_py "a part left by a crash is replaced by the next append of its group; other files stay" \
        "$d/r.h5" "$FIX" "$d/r.h5.parts" <<'EOF'
import sys, os, h
why = h.within_expected(sys.argv[1], "/b", "causal", sys.argv[2])
why and h.fail(why)
open(os.path.join(sys.argv[3], "notes.txt")).read() == "a note of the user\n" or h.fail("notes.txt changed")
EOF
}

# ------------------------------------------------- 4. failures mid-run leave everything as it was

check_failures() {
    local d before
    d=$(workdir failures)
    PYTHONPATH=$T "$PY" -c 'import sys, h; h.gen(sys.argv[1], 3000, 256, 64)' "$d/big.h5"
    mkdir "$d/res"
    run "$FIX/toy.h5" -o "$d/res/results.h5" --heads 1 --append --group /layer0
    [ $rc -eq 0 ] || bad "setup of the failure checks: exit $rc: $(err1)"
    before=$(snapshot "$d/res")

    # a file size limit: the part cannot be written
    (ulimit -f 512; "$ATTNRUN" "$d/big.h5" -o "$d/res/results.h5" --heads 4 --save output \
        --append --group /layer1 >"$T/stdout" 2>"$T/stderr")
    rc=$?
    refused "ulimit -f: exit 1 'File too large', index and parts as they were" 1 "File too large" \
        "$d/res" "$before"

    local sig
    for sig in INT TERM; do
        "$ATTNRUN" "$d/big.h5" -o "$d/res/results.h5" --heads 4 --save output --threads 1 \
            --batch-slice 16 --append --group /layer1 >/dev/null 2>"$T/stderr" &
        local pid=$! seen=0
        for _ in $(seq 200); do    # until its temporary beside the index exists
            if [ -n "$(find "$d/res" -maxdepth 1 -name '.*attnrun-tmp-*')" ]; then seen=1; break; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.02
        done
        sleep 0.2
        if [ $seen -eq 0 ] || ! kill -s "$sig" "$pid" 2>/dev/null; then
            wait "$pid"
            bad "SIG$sig mid-run: attnrun ended (exit $?) before the signal"
            continue
        fi
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -s KILL "$pid" 2>/dev/null
        wait "$pid"
        rc=$?
        refused "SIG$sig mid-run: exit 1 'interrupted', no part, no temporary, index as it was" 1 \
            "interrupted by SIG$sig" "$d/res" "$before"
    done
}

# ------------------------------------------------- 5. the lock: waited for, and a signal while waiting

check_lock() {
    local d before
    d=$(workdir lock)
    mkdir "$d/res"
    run "$FIX/toy.h5" -o "$d/res/results.h5" --heads 1 --append --group /layer0
    before=$(snapshot "$d/res")
    cat >"$T/lock.py" <<'EOF'
import fcntl, os, signal, subprocess, sys, time
attnrun, fixture, d, mode = sys.argv[1:5]
NR = {"x86_64": 73, "aarch64": 32}.get(os.uname().machine)    # flock
def syscall(pid):
    try:
        return int(open("/proc/%d/syscall" % pid).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
held = os.open(d, os.O_RDONLY | os.O_DIRECTORY)     # another append's commit, in effect
fcntl.flock(held, fcntl.LOCK_EX)
err = open(os.path.join(d, "..", "stderr"), "wb")
p = subprocess.Popen([attnrun, fixture, "-o", os.path.join(d, "results.h5"), "--heads", "1",
                      "--append", "--group", "/layer1"], stdout=subprocess.DEVNULL, stderr=err)
end = time.monotonic() + 10
while syscall(p.pid) != NR:
    if p.poll() is not None:
        print("early: exit %d without waiting for the lock" % p.returncode); sys.exit(0)
    if time.monotonic() > end or NR is None:
        p.kill(); print("early: not seen waiting in flock"); sys.exit(0)
    time.sleep(0.005)
time.sleep(0.1)
if mode == "signal":
    p.send_signal(signal.SIGTERM)
else:
    os.close(held)
try:
    print(p.wait(10))
except subprocess.TimeoutExpired:
    p.kill(); print("137")
EOF
    local out
    out=$("$PY" "$T/lock.py" "$ATTNRUN" "$FIX/toy.h5" "$d/res" signal 2>&1)
    mv "$d/stderr" "$T/stderr" 2>/dev/null
    case $out in
        early:*) skip "SIGTERM while waiting for the index's lock: ${out#early: }" ;;
        *) rc=$out
           refused "SIGTERM while waiting for the index's lock: exit 1, nothing written" 1 \
               "interrupted by SIGTERM" "$d/res" "$before" ;;
    esac
    out=$("$PY" "$T/lock.py" "$ATTNRUN" "$FIX/toy.h5" "$d/res" release 2>&1)
    case $out in
        early:*) skip "an append waits for the lock: ${out#early: }" ;;
        0) if [ -f "$d/res/results.h5.parts/layer1.1.h5" ]; then
               ok "an append waits for another's commit, then completes"
           else
               bad "an append waits for the lock: exit 0 but no part"
           fi ;;
        *) bad "an append waits for the lock: exit $out: $(head -n 1 "$d/stderr")" ;;
    esac
}

# ------------------------------------------------- 6. a failure after the part is in place (strace)

# inject NAME SYSCALLS WHEN ARGS...: runs attnrun under strace, the
# WHEN-th call of SYSCALLS failing with EIO (LeakSanitizer, which cannot
# run under a tracer, off).
inject() {
    local name=$1 calls=$2 when=$3
    shift 3
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout -s KILL "$TL" strace -f -qq -o /dev/null -e trace="$calls" \
        -e inject="$calls":error=EIO:when="$when" "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

check_injected() {
    if ! command -v strace >/dev/null ||
        ! strace -f -qq -o /dev/null -e trace=rename -e inject=rename:error=EIO:when=2 true 2>/dev/null; then
        skip "failures after the part is in place: strace cannot inject faults here (Debian package strace)"
        return
    fi
    local d before renames=rename,renameat,renameat2
    d=$(workdir injected)
    # the first append: the new index's rename (renameat2, as it must not
    # replace a file) fails, after the part's
    inject "first" renameat2 1 "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /layer0
    refused "first append, the index cannot be renamed into place: exit 1, nothing left" 1 \
        "cannot rename the output into place" "$d" "dir ."
    inject "first" mkdir,mkdirat 1 "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /layer0
    refused "first append, the parts directory cannot be made: exit 1, nothing left" 1 \
        "cannot make the directory" "$d" "dir ."
    run "$FIX/toy.h5" -o "$d/results.h5" --heads 1 --append --group /layer0
    run "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append --group /layer1
    before=$(snapshot "$d")
    inject "new" "$renames" 2 "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append --group /layer2
    refused "a new group, the index cannot be renamed: exit 1, the new part removed, all as it was" 1 \
        "cannot rename the output into place" "$d" "$before"
    inject "force" "$renames" 2 "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append \
        --group /layer0 --force
    refused "--force, the index cannot be renamed: exit 1, the old part kept, all as it was" 1 \
        "cannot rename the output into place" "$d" "$before"
    expect_py "after the failed --force the index still reads the old results" "$d/results.h5" "$FIX" <<'EOF'
import sys, h
why = h.within_expected(sys.argv[1], "/layer0", "toy", sys.argv[2])
why and h.fail(why)
EOF
}

# ------------------------------------------------- 7. concurrency, links, modes

check_concurrent() {
    local d i pids=() failed=0
    d=$(workdir concurrent)
    for i in 0 1 2 3 4 5; do
        "$ATTNRUN" "$FIX/causal.h5" -o "$d/results.h5" --heads 2 --causal --append \
            --group "/layer$i" >/dev/null 2>"$T/stderr.$i" &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || failed=$((failed + 1))
    done
    if [ $failed -ne 0 ]; then
        bad "6 appends at once: $failed failed: $(cat "$T"/stderr.* | head -n 2 | tr '\n' ' ')"
        return
    fi
    expect_py "6 appends at once: all 6 groups in the index, each right" "$d/results.h5" "$FIX" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    sorted(f) == ["layer%d" % i for i in range(6)] or h.fail("groups %s" % sorted(f))
for i in range(6):
    why = h.within_expected(sys.argv[1], "/layer%d" % i, "causal", sys.argv[2])
    why and h.fail(why)
EOF
}

check_moves() {
    local d
    d=$(workdir moves)
    cp -r "$RES" "$d/res"
    expect_py "the index opens from another working directory" "$d/res/results.h5" "$D1/direct" <<'EOF'
import sys, os, h
os.chdir("/")
direct = {"model/layer%d" % i: os.path.join(sys.argv[2], "layer%d.h5" % i) for i in range(3)}
why = h.xarray_ok(sys.argv[1], list(direct), direct)
why and h.fail(why)
EOF
    mv "$d/res" "$d/moved"
    mkdir "$d/elsewhere"
    mv "$d/moved" "$d/elsewhere/"
    expect_py "the index opens after its directory is moved (xarray)" "$d/elsewhere/moved/results.h5" "$D1/direct" <<'EOF'
import sys, os, h
os.chdir("/")
direct = {"model/layer%d" % i: os.path.join(sys.argv[2], "layer%d.h5" % i) for i in range(3)}
why = h.xarray_ok(sys.argv[1], list(direct), direct)
why and h.fail(why)
EOF
    (cd / && check_ncdump "$d/elsewhere/moved/results.h5" "ncdump -h after the move, from /")
    # appending to the moved index works and leaves the other links right
    run "$FIX/toy.h5" -o "$d/elsewhere/moved/results.h5" --heads 1 --append --group /toy2
    expect_py "appending to the moved index" "$d/elsewhere/moved/results.h5" "$FIX" "$D1/direct" <<'EOF'
import sys, os, h
why = h.within_expected(sys.argv[1], "/toy2", "toy", sys.argv[2]) or \
      h.same_group(sys.argv[1], "/model/layer0", os.path.join(sys.argv[3], "layer0.h5"))
why and h.fail(why)
EOF
}

check_symlink_and_mode() {
    local d mode
    d=$(workdir symlink)
    mkdir "$d/real"
    run "$FIX/toy.h5" -o "$d/real/r.h5" --heads 1 --append --group /a
    ln -s real/r.h5 "$d/link.h5"
    chmod 640 "$d/real/r.h5"
    run "$FIX/causal.h5" -o "$d/link.h5" --heads 2 --causal --append --group /b
    mode=$(stat -c %a "$d/real/r.h5")
    if [ $rc -ne 0 ]; then
        bad "append through a symbolic link: exit $rc: $(err1)"
    elif [ ! -L "$d/link.h5" ] || [ -e "$d/link.h5.parts" ] || [ ! -f "$d/real/r.h5.parts/b.1.h5" ]; then
        bad "append through a symbolic link: the link replaced or parts beside it: $(ls -A "$d" | tr '\n' ' ')"
    elif [ "$mode" != 640 ]; then
        bad "append through a symbolic link: the index's mode became $mode, was 640"
    else
        expect_py "append through a symbolic link: the real index grows, keeps its mode 640" "$d/link.h5" "$FIX" <<'EOF'
import sys, h
why = h.within_expected(sys.argv[1], "/a", "toy", sys.argv[2]) or h.within_expected(sys.argv[1], "/b", "causal", sys.argv[2])
why and h.fail(why)
EOF
    fi
}

# ------------------------------------------------- 8. every allocation failing in turn

# With the fault-injection build (make builds build/fault/attnrun;
# tests/cli/test_alloc.sh): ATTN_FAIL_ALLOC=N fails attnrun's Nth allocation.
# Appending to an index of two groups, each N until the run needs fewer
# must end with exit 1 and one line, and leave the directory as it was.
check_alloc() {
    local fault=${FAULT_ATTNRUN:-}
    case $fault in
        "") skip "every allocation failing: no FAULT_ATTNRUN (make test passes build/fault/attnrun)"
            return ;;
        /*) ;;
        *) fault=$PWD/$fault ;;
    esac
    local d n before why problems=0
    d=$(workdir alloc)
    mkdir "$d/res"
    run "$FIX/toy.h5" -o "$d/res/r.h5" --heads 1 --append --group /model/a
    run "$FIX/toy.h5" -o "$d/res/r.h5" --heads 1 --append --group /b
    before=$(snapshot "$d/res")
    for ((n = 1; n <= 400; n++)); do
        ATTN_FAIL_ALLOC=$n ASAN_OPTIONS=exitcode=86:detect_leaks=1:allocator_may_return_null=1 \
            timeout -s KILL "$TL" "$fault" -q "$FIX/toy.h5" -o "$d/res/r.h5" --heads 1 --append \
            --group /model/c </dev/null >/dev/null 2>"$T/stderr"
        rc=$?
        [ $rc -eq 0 ] && break
        why=$(run_problem "$rc" 1 "$T/stderr")
        [ -z "$why" ] && grep -q 'internal error' "$T/stderr" && why="a crash: $(err1)"
        [ -z "$why" ] && [ "$(snapshot "$d/res")" != "$before" ] && why="the directory changed"
        if [ -n "$why" ]; then
            bad "append, allocation $n failing: $why"
            problems=$((problems + 1))
            [ $problems -ge 3 ] && return
        fi
    done
    if [ $rc -ne 0 ]; then
        bad "append: still failing after 400 allocations"
    elif [ $problems -eq 0 ]; then
        ok "append to an index of two groups: each of its $((n - 1)) allocations failing ends with exit 1, one line, nothing changed"
    fi
}

# ---------------------------------------------------------------- main

check_gather
check_refusals
check_force
check_failures
check_lock
check_injected
check_concurrent
check_moves
check_symlink_and_mode
check_alloc
finish
