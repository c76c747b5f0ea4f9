#!/usr/bin/env bash
# Command-line behaviour tests for attnrun that are not numeric comparisons
# (docs/contract.md §3, §4 and §5): axis labels, provenance, layout, filters,
# --save, --dry-run, atomic output, --in-place, streaming, memory, signals,
# progress, threads, non-finite input and on-disk types.
#
#   ATTNRUN=build/attnrun bash tests/cli/test_cli.sh     # from the repository root
#
# Environment:
#   ATTNRUN   the binary under test (default: build/attnrun)
#   PYTHON    a python with numpy and h5py (default: /usr/bin/python3)
#
# Inputs other than fixtures/ are generated at test time in a temporary
# directory that is removed on exit. Each check prints "ok NAME [detail]",
# "FAIL NAME: WHY" or "skip NAME: WHY"; the last line is
# "cli: N passed, M failed"; the exit status is 1 when M > 0.

set -u

ATTNRUN=${ATTNRUN:-build/attnrun}
PY=${PYTHON:-/usr/bin/python3}
FIX=$PWD/fixtures
TESTS=$(cd "$(dirname "$0")/.." && pwd)      # reference.py

# A relative path to the binary is taken from the directory we started in.
case $ATTNRUN in
    /*) ;;
    */*) ATTNRUN=$PWD/$ATTNRUN ;;
esac

T=$(mktemp -d "${TMPDIR:-/tmp}/attnrun-cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

pass=0 fail=0

ok()   { echo "ok $*"; pass=$((pass + 1)); }
bad()  { local name=$1; shift; echo "FAIL $name: $*"; fail=$((fail + 1)); }
skip() { local name=$1; shift; echo "skip $name: $*"; }

# ---------------------------------------------------------------- helpers

# Python helpers shared by the checks, imported as "h".
cat >"$T/h.py" <<'EOF'
import re, sys
import numpy as np
import h5py

from reference import AXES, LABELS, OUTPUTS      # tests/ref/reference.py

def fail(msg):
    print(msg)
    sys.exit(1)

def gen(path, B, n, d, seed=0, heads=None, fill=None, dtype=np.float32):
    """X (B, n, d) (or (n, d) when B == 0) and packed (d, d) weights."""
    rng = np.random.default_rng(seed)
    shape = (B, n, d) if B > 0 else (n, d)
    X = rng.standard_normal(shape).astype(dtype)
    if fill is not None:
        fill(X)
    with h5py.File(path, "w") as f:
        f["X"] = X
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            f[w] = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(dtype)

def outputs(group):
    """The output datasets present in an h5py group, by name."""
    return {k: group[k] for k in OUTPUTS if k in group}

def same_values(path_a, path_b, group="/"):
    """'' when both files hold the same outputs with equal values, else why."""
    with h5py.File(path_a, "r") as a, h5py.File(path_b, "r") as b:
        oa, ob = outputs(a[group]), outputs(b[group])
        if sorted(oa) != sorted(ob):
            return "different outputs: %s vs %s" % (sorted(oa), sorted(ob))
        if not oa:
            return "no outputs"
        for k in oa:
            x, y = oa[k][...], ob[k][...]
            if x.dtype != y.dtype or x.shape != y.shape:
                return "%s: %s%s vs %s%s" % (k, x.dtype, x.shape, y.dtype, y.shape)
            if not np.array_equal(x, y, equal_nan=True):
                i = np.argwhere(~((x == y) | (np.isnan(x) & np.isnan(y))))[0]
                return "%s differs first at %s: %r vs %r" % (k, tuple(int(j) for j in i),
                                                             x[tuple(i)], y[tuple(i)])
    return ""
EOF

# Both precision checks: every output stored as argv[2], attribute precision argv[3].
cat >"$T/precision.py" <<'EOF'
import sys, numpy as np, h5py, h
want, tag = np.dtype(sys.argv[2]), sys.argv[3]
with h5py.File(sys.argv[1], "r") as f:
    outs = h.outputs(f)
    if len(outs) != 7:
        h.fail("outputs %s" % sorted(outs))
    for name, ds in outs.items():
        if ds.dtype != want:
            h.fail("%s stored as %s, expected %s" % (name, ds.dtype, want))
    p = f.attrs.get("precision")
    p = p.decode() if isinstance(p, bytes) else p
    if p != tag:
        h.fail("precision attribute %r, expected %r" % (p, tag))
EOF

# Runs a Python check read from stdin with h.py importable; arguments go to
# sys.argv[1:]. Prints what the check printed; the status is the check's.
pycheck() {
    PYTHONPATH=$T:$TESTS/ref "$PY" - "$@" 2>&1
}

# Records NAME as ok when the Python check on stdin passes, else FAIL with
# its last line of output. Extra arguments go to the check.
expect_py() {
    local name=$1 out rc
    shift
    out=$(pycheck "$@")
    rc=$?
    if [ $rc -eq 0 ]; then
        ok "$name${out:+ ($out)}"
    else
        bad "$name" "$(printf '%s\n' "$out" | tail -n 1)"
    fi
}

# Generates an input: gen PATH B n d_model [seed].
gen() {
    PYTHONPATH=$T:$TESTS/ref "$PY" -c 'import sys, h; h.gen(sys.argv[1], *map(int, sys.argv[2:]))' "$@"
}

# Runs attnrun with stdout/stderr captured in $T/stdout, $T/stderr; sets $rc.
run() {
    "$ATTNRUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
}

# First line of the last run's stderr (for FAIL messages).
err1() { head -n 1 "$T/stderr"; }

# Prints the temporary files attnrun left in directory $1 (none: prints nothing).
temps_in() { find "$1" -maxdepth 1 -name '*attnrun-tmp*' -printf '%f\n'; }

sha() { sha256sum "$1" | cut -d ' ' -f 1; }

# A fresh work directory for one check.
workdir() {
    local d=$T/$1
    rm -rf "$d"
    mkdir -p "$d"
    echo "$d"
}

# ---------------------------------------------------------------- 1. labels

check_labels_and_scales() {
    local d out
    d=$(workdir labels)
    out=$d/out.h5
    run "$FIX/batch_bias.h5" -o "$out" --heads 4 --save scores,weights,heads,output,q,k,v
    if [ $rc -ne 0 ]; then
        bad axis_labels "exit $rc: $(err1)"
        return
    fi
    expect_py axis_labels "$out" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    outs = h.outputs(f)
    if sorted(outs) != sorted(h.OUTPUTS):
        h.fail("outputs %s, expected all of %s" % (sorted(outs), h.OUTPUTS))
    for name, ds in outs.items():
        got = tuple(ds.dims[i].label for i in range(ds.ndim))
        if got != h.LABELS[name]:
            h.fail("%s labels %s, expected %s" % (name, got, h.LABELS[name]))
EOF
    expect_py descriptions "$out" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    for name, ds in h.outputs(f).items():
        text = ds.attrs.get("description")
        if isinstance(text, bytes):
            text = text.decode()
        if not isinstance(text, str) or not text.strip():
            h.fail("%s: description is %r" % (name, text))
EOF
    expect_py dimension_scales "$out" <<'EOF'
import sys, numpy as np, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    w = f["weights"]
    if len(w.dims[0]) != 1:
        h.fail("weights.dims[0] has %d scales, expected 1" % len(w.dims[0]))
    B = w.shape[0]
    if not np.array_equal(w.dims[0][0][...], np.arange(B)):
        h.fail("batch scale holds %s, expected 0..%d" % (w.dims[0][0][...], B - 1))
    for name, ds in h.outputs(f).items():
        for i in range(ds.ndim):
            if len(ds.dims[i]) != 1:
                h.fail("%s.dims[%d] has %d scales" % (name, i, len(ds.dims[i])))
            s = ds.dims[i][0]
            if s.name.rsplit("/", 1)[-1] != h.LABELS[name][i]:
                h.fail("%s.dims[%d] scale is %s, expected %s" % (name, i, s.name, h.LABELS[name][i]))
            if not np.array_equal(s[...], np.arange(ds.shape[i])):
                h.fail("%s.dims[%d] scale %s is not 0..%d" % (name, i, s.name, ds.shape[i] - 1))
EOF
}

# ---------------------------------------------------------------- 2. provenance

check_provenance() {
    local d out
    d=$(workdir prov)
    out=$d/out.h5
    run "$FIX/batch_bias.h5" -o "$out" --heads 4
    if [ $rc -ne 0 ]; then
        bad provenance "exit $rc: $(err1)"
        return
    fi
    expect_py provenance "$out" "/" f32 0 <<'EOF'
import sys, re, math, datetime, h5py, h
path, group, precision, causal = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def s(v):
    return v.decode() if isinstance(v, bytes) else v
with h5py.File(path, "r") as f:
    a = f[group].attrs
    for key in ("attnrun_version", "command_line", "input_file", "heads", "d_k", "d_v",
                "scale", "causal", "precision", "created_utc"):
        if key not in a:
            h.fail("attribute %s missing on %s (has %s)" % (key, group, sorted(a)))
    if not s(a["attnrun_version"]):
        h.fail("attnrun_version is empty")
    cl = s(a["command_line"])
    if "batch_bias.h5" not in cl or "--heads" not in cl:
        h.fail("command_line %r lacks the input name or --heads" % cl)
    if not s(a["input_file"]).endswith("batch_bias.h5"):
        h.fail("input_file is %r" % s(a["input_file"]))
    if int(a["heads"]) != 4 or int(a["d_k"]) != 4 or int(a["d_v"]) != 4:
        h.fail("heads/d_k/d_v = %s/%s/%s, expected 4/4/4" % (a["heads"], a["d_k"], a["d_v"]))
    if abs(float(a["scale"]) - 1 / math.sqrt(4)) > 1e-12:
        h.fail("scale %r, expected %r" % (float(a["scale"]), 1 / math.sqrt(4)))
    if int(a["causal"]) != causal:
        h.fail("causal %s, expected %d" % (a["causal"], causal))
    if s(a["precision"]) != precision:
        h.fail("precision %r, expected %r" % (s(a["precision"]), precision))
    t = s(a["created_utc"])
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", t):
        h.fail("created_utc %r is not ISO-8601 UTC ending in Z" % t)
    when = datetime.datetime.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    if abs((now - when).total_seconds()) > 600:
        h.fail("created_utc %s is not now (%s UTC)" % (t, now.isoformat(timespec="seconds")))
EOF

    out=$d/group.h5
    run "$FIX/batch_bias.h5" -o "$out" --heads 4 --group /results/run1
    if [ $rc -ne 0 ]; then
        bad group_option "exit $rc: $(err1)"
        return
    fi
    expect_py group_option "$out" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    if "results/run1" not in f:
        h.fail("no group /results/run1 (file has %s)" % list(f))
    g = f["results/run1"]
    want = {"scores", "weights", "heads", "output"}
    if set(h.outputs(g)) != want:
        h.fail("/results/run1 holds outputs %s, expected %s" % (sorted(h.outputs(g)), sorted(want)))
    if h.outputs(f):
        h.fail("outputs at / as well: %s" % sorted(h.outputs(f)))
    for key in ("attnrun_version", "heads", "scale", "created_utc"):
        if key not in g.attrs:
            h.fail("attribute %s missing on /results/run1" % key)
    if "heads" in f.attrs:
        h.fail("provenance written on / instead of (or as well as) the group")
    if g["weights"].dims[0][0].parent.name != "/results/run1":
        h.fail("weights' batch scale lives at %s" % g["weights"].dims[0][0].name)
EOF
}

# ---------------------------------------------------------------- 3. rank 2

check_rank2() {
    local d out
    d=$(workdir rank2)
    out=$d/out.h5
    run "$FIX/rank2.h5" -o "$out" --heads 2
    if [ $rc -ne 0 ]; then
        bad rank2_drops_batch "exit $rc: $(err1)"
        return
    fi
    expect_py rank2_drops_batch "$out" "$FIX/rank2.h5" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[2], "r") as f:
    n = f["X"].shape[0]
with h5py.File(sys.argv[1], "r") as f:
    w = f["weights"]
    if w.shape != (2, n, n):
        h.fail("weights shape %s, expected %s" % (w.shape, (2, n, n)))
    labels = tuple(w.dims[i].label for i in range(w.ndim))
    if labels != ("head", "query", "key"):
        h.fail("weights labels %s, expected (head, query, key)" % (labels,))
    for name, ds in h.outputs(f).items():
        want = h.LABELS[name][1:]
        got = tuple(ds.dims[i].label for i in range(ds.ndim))
        if got != want:
            h.fail("%s labels %s, expected %s" % (name, got, want))
    if "batch" in f:
        h.fail("a batch scale was written for a rank-2 X")
EOF
}

# ---------------------------------------------------------------- 4. chunks

check_chunking() {
    local d out
    d=$(workdir chunks)
    out=$d/out.h5
    gen "$d/in.h5" 64 128 32
    run "$d/in.h5" -o "$out" --heads 2
    if [ $rc -ne 0 ]; then
        bad chunking "exit $rc: $(err1)"
        return
    fi
    expect_py chunking "$out" <<'EOF'
import sys, numpy as np, h5py, h
MiB = 1 << 20
sizes = []
with h5py.File(sys.argv[1], "r") as f:
    outs = h.outputs(f)
    if not outs:
        h.fail("no outputs")
    for name, ds in outs.items():
        if ds.chunks is None:
            h.fail("%s is not chunked" % name)
        cb = int(np.prod(ds.chunks)) * ds.dtype.itemsize
        total = int(np.prod(ds.shape)) * ds.dtype.itemsize
        if cb > MiB:
            h.fail("%s chunk %s is %d bytes > 1 MiB" % (name, ds.chunks, cb))
        if total >= MiB // 4 and cb < MiB // 4:
            h.fail("%s (%d bytes) chunk %s is only %d bytes < 256 KiB" % (name, total, ds.chunks, cb))
        sizes.append("%s %s" % (name, ds.chunks))
print(", ".join(sizes))
EOF
}

# ---------------------------------------------------------------- 5. compress

check_compress() {
    local d
    d=$(workdir compress)
    # Compressible: every query row of an item is the same, so each row of
    # scores/weights is constant-per-row and heads/output repeat row after row.
    PYTHONPATH=$T:$TESTS/ref "$PY" - "$d/in.h5" <<'EOF'
import sys, h
def same_rows(X):
    X[:, 1:, :] = X[:, :1, :]
h.gen(sys.argv[1], 16, 64, 32, fill=same_rows)
EOF
    run "$d/in.h5" -o "$d/plain.h5" --heads 2
    if [ $rc -ne 0 ]; then
        bad compress "plain run: exit $rc: $(err1)"
        return
    fi
    run "$d/in.h5" -o "$d/gz.h5" --heads 2 --compress 4
    if [ $rc -ne 0 ]; then
        bad compress "--compress 4: exit $rc: $(err1)"
        return
    fi
    expect_py compress_filters "$d/gz.h5" "$d/plain.h5" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[1], "r") as f, h5py.File(sys.argv[2], "r") as p:
    outs = h.outputs(f)
    if not outs:
        h.fail("no outputs")
    for name, ds in outs.items():
        if ds.compression != "gzip" or not ds.shuffle:
            h.fail("%s: compression=%r shuffle=%r, expected gzip + shuffle"
                   % (name, ds.compression, ds.shuffle))
        if ds.compression_opts != 4:
            h.fail("%s: deflate level %r, expected 4" % (name, ds.compression_opts))
    for name, ds in h.outputs(p).items():
        if ds.compression is not None or ds.shuffle:
            h.fail("%s: filters without --compress" % name)
EOF
    expect_py compress_same_values "$d/gz.h5" "$d/plain.h5" <<'EOF'
import sys, h
why = h.same_values(sys.argv[1], sys.argv[2])
if why:
    h.fail(why)
EOF
    local plain gz
    plain=$(stat -c %s "$d/plain.h5")
    gz=$(stat -c %s "$d/gz.h5")
    if [ "$gz" -lt "$plain" ]; then
        ok "compress_smaller ($gz < $plain bytes)"
    else
        bad compress_smaller "--compress 4 file is $gz bytes, uncompressed $plain"
    fi
}

# ---------------------------------------------------------------- 6. precision

check_precision() {
    local d
    d=$(workdir precision)
    run "$FIX/batch_bias.h5" -o "$d/f32.h5" --heads 4 --save scores,weights,heads,output,q,k,v
    local rc32=$rc
    run "$FIX/batch_bias.h5" -o "$d/f64.h5" --heads 4 --precision f64 \
        --save scores,weights,heads,output,q,k,v
    local rc64=$rc
    if [ $rc32 -ne 0 ] || [ $rc64 -ne 0 ]; then
        bad precision "exit $rc32 (default), $rc64 (--precision f64): $(err1)"
        return
    fi
    expect_py precision_default_f32 "$d/f32.h5" float32 f32 <"$T/precision.py"
    expect_py precision_f64 "$d/f64.h5" float64 f64 <"$T/precision.py"
}

# ---------------------------------------------------------------- 7. --save

check_save_subset() {
    local d out
    d=$(workdir save)
    out=$d/out.h5
    run "$FIX/batch_bias.h5" -o "$out" --heads 4 --save weights,output
    if [ $rc -ne 0 ]; then
        bad save_subset "exit $rc: $(err1)"
        return
    fi
    expect_py save_subset "$out" <<'EOF'
import sys, h5py, h
with h5py.File(sys.argv[1], "r") as f:
    names = set(f)
    if not {"weights", "output"} <= names:
        h.fail("weights or output missing: file holds %s" % sorted(names))
    extra = names - {"weights", "output"}
    stray = sorted(extra - set(h.AXES))
    if stray:
        h.fail("unexpected objects %s besides weights, output and axis scales" % stray)
    attached = {ds.dims[i][0].name.rsplit("/", 1)[-1]
                for ds in (f["weights"], f["output"]) for i in range(ds.ndim) if len(ds.dims[i])}
    unused = sorted(extra - attached)
    if unused:
        h.fail("scales %s are attached to no saved dataset" % unused)
EOF
}

# ---------------------------------------------------------------- 8. --dry-run

check_dry_run() {
    local d out
    d=$(workdir dry)
    out=$d/out.h5
    run "$FIX/batch_bias.h5" -o "$out" --heads 4 --dry-run --save scores,weights,heads,output,q,k,v
    if [ $rc -ne 0 ]; then
        bad dry_run "exit $rc: $(err1)"
        return
    fi
    if [ -e "$out" ]; then
        bad dry_run "wrote $out"
        return
    fi
    if [ -n "$(temps_in "$d")" ]; then
        bad dry_run "left $(temps_in "$d")"
        return
    fi
    # batch_bias: B=3, n=m=6, d_model=16, H=4, d_k=d_v=4.
    expect_py dry_run "$T/stdout" <<'EOF'
import sys, re, h
text = open(sys.argv[1]).read()
if "flop" not in text.lower():
    h.fail("no FLOPs in the dry-run report")
shapes = {"scores": (3, 4, 6, 6), "weights": (3, 4, 6, 6), "heads": (3, 4, 6, 4),
          "output": (3, 6, 16), "q": (3, 4, 6, 4), "k": (3, 4, 6, 4), "v": (3, 4, 6, 4)}
for name, shape in shapes.items():
    nbytes = 4
    for s in shape:
        nbytes *= s
    lines = [l for l in text.splitlines() if re.search(r"(^|\s)%s\b" % name, l)]
    if not lines:
        h.fail("%s not mentioned in the dry-run report" % name)
    if not any(re.search(r"(?<![\d.])%d(?![\d.])" % nbytes, l) for l in lines):
        h.fail("no line for %s shows %d bytes: %r" % (name, nbytes, lines))
    shape_text = ", ".join(map(str, shape))
    if not any(shape_text in l for l in lines):
        h.fail("no line for %s shows the shape (%s)" % (name, shape_text))
EOF
}

# ---------------------------------------------------------------- 9. atomic -o

check_atomic_output() {
    local d out before
    d=$(workdir atomic)
    out=$d/out.h5
    echo "not an attnrun output" >"$out"
    before=$(sha "$out")
    run "$FIX/batch_bias.h5" -o "$out" --heads 4
    if [ $rc -ne 2 ]; then
        bad atomic_refuse_existing "exit $rc, expected 2"
    elif [ "$(sha "$out")" != "$before" ]; then
        bad atomic_refuse_existing "the existing OUT was changed"
    elif [ -n "$(temps_in "$d")" ]; then
        bad atomic_refuse_existing "left $(temps_in "$d")"
    else
        ok atomic_refuse_existing
    fi

    run "$FIX/batch_bias.h5" -o "$out" --heads 4 --force
    if [ $rc -ne 0 ]; then
        bad atomic_force_replace "exit $rc: $(err1)"
    elif [ -n "$(temps_in "$d")" ]; then
        bad atomic_force_replace "left $(temps_in "$d")"
    else
        expect_py atomic_force_replace "$out" <<'EOF'
import sys, h5py, h
try:
    f = h5py.File(sys.argv[1], "r")
except OSError as e:
    h.fail("OUT is not an HDF5 file after --force: %s" % e)
with f:
    if sorted(h.outputs(f)) != ["heads", "output", "scores", "weights"]:
        h.fail("OUT holds %s" % sorted(f))
EOF
    fi

    rm -f "$out"
    run "$FIX/batch_bias.h5" -o "$out" --heads 4 --wq missing_name
    if [ $rc -eq 0 ]; then
        bad atomic_failure_leaves_nothing "a run with --wq missing_name exited 0"
    elif [ -e "$out" ]; then
        bad atomic_failure_leaves_nothing "exit $rc but OUT exists"
    elif [ -n "$(temps_in "$d")" ]; then
        bad atomic_failure_leaves_nothing "exit $rc, left $(temps_in "$d")"
    else
        ok atomic_failure_leaves_nothing
    fi

    # A new OUT gets 0666 less the umask, like any other program's output.
    local mode
    rm -f "$out"
    (umask 027 && "$ATTNRUN" "$FIX/batch_bias.h5" -o "$out" --heads 4 >/dev/null 2>&1)
    mode=$(stat -c %a "$out" 2>/dev/null)
    if [ "$mode" = 640 ]; then
        ok output_mode_follows_umask
    else
        bad output_mode_follows_umask "mode ${mode:-none} under umask 027, expected 640"
    fi
}

# ---------------------------------------------------------------- 10. in-place

check_in_place() {
    local d f before
    d=$(workdir inplace)
    f=$d/causal.h5
    cp "$FIX/causal.h5" "$f"
    cp "$FIX/causal.h5" "$d/original.h5"
    chmod 640 "$f"
    run "$f" --in-place --group /attn --heads 2 --causal
    if [ $rc -ne 0 ]; then
        bad in_place_adds_group "exit $rc: $(err1)"
        return
    fi
    expect_py in_place_adds_group "$f" "$d/original.h5" <<'EOF'
import sys, numpy as np, h5py, h
with h5py.File(sys.argv[1], "r") as f, h5py.File(sys.argv[2], "r") as o:
    for name, ds in o.items():
        if name not in f:
            h.fail("%s is gone" % name)
        new = f[name]
        if new.dtype != ds.dtype or new.shape != ds.shape or not np.array_equal(new[...], ds[...]):
            h.fail("%s changed" % name)
        if dict(new.attrs) != dict(ds.attrs):
            h.fail("attributes of %s changed" % name)
    extra = sorted(set(f) - set(o))
    if extra != ["attn"]:
        h.fail("new top-level objects %s, expected only attn" % extra)
    g = f["attn"]
    if set(h.outputs(g)) != {"scores", "weights", "heads", "output"}:
        h.fail("/attn holds %s" % sorted(g))
    if int(g.attrs.get("causal", -1)) != 1 or int(g.attrs.get("heads", -1)) != 2:
        h.fail("/attn attributes causal=%r heads=%r" % (g.attrs.get("causal"), g.attrs.get("heads")))
EOF
    local mode
    mode=$(stat -c %a "$f")
    if [ "$mode" = 640 ]; then
        ok in_place_keeps_mode
    else
        bad in_place_keeps_mode "IN was mode 640, now $mode"
    fi

    before=$(sha "$f")
    run "$f" --in-place --group /attn --heads 2 --causal
    if [ $rc -ne 2 ]; then
        bad in_place_refuse_existing "exit $rc, expected 2"
    elif [ "$(sha "$f")" != "$before" ]; then
        bad in_place_refuse_existing "IN changed"
    elif [ -n "$(temps_in "$d")" ]; then
        bad in_place_refuse_existing "left $(temps_in "$d")"
    else
        ok in_place_refuse_existing
    fi

    run "$f" --in-place --group /attn --heads 2 --causal --force
    if [ $rc -ne 0 ]; then
        bad in_place_force "exit $rc: $(err1)"
    elif [ -n "$(temps_in "$d")" ]; then
        bad in_place_force "left $(temps_in "$d")"
    else
        expect_py in_place_force "$f" "$d/original.h5" <<'EOF'
import sys, numpy as np, h5py, h
with h5py.File(sys.argv[1], "r") as f, h5py.File(sys.argv[2], "r") as o:
    for name in o:
        if not np.array_equal(f[name][...], o[name][...]):
            h.fail("%s changed" % name)
    if set(h.outputs(f["attn"])) != {"scores", "weights", "heads", "output"}:
        h.fail("/attn holds %s" % sorted(f["attn"]))
EOF
    fi

    before=$(sha "$f")
    run "$f" --in-place --group /attn --heads 2 --causal --force --wq missing_name
    if [ $rc -eq 0 ]; then
        bad in_place_failure_untouched "a run with --wq missing_name exited 0"
    elif [ "$(sha "$f")" != "$before" ]; then
        bad in_place_failure_untouched "exit $rc and IN changed"
    elif [ -n "$(temps_in "$d")" ]; then
        bad in_place_failure_untouched "exit $rc, left $(temps_in "$d")"
    else
        ok in_place_failure_untouched
    fi
}

# ---------------------------------------------------------------- 11. streaming

check_streaming() {
    local d s all=scores,weights,heads,output,q,k,v
    d=$(workdir stream)
    gen "$d/in.h5" 7 9 16 3
    run "$d/in.h5" -o "$d/default.h5" --heads 4 --causal --save $all
    if [ $rc -ne 0 ]; then
        bad streaming_slices "default slice: exit $rc: $(err1)"
        return
    fi
    for s in 1 3; do
        run "$d/in.h5" -o "$d/slice$s.h5" --heads 4 --causal --save $all --batch-slice $s
        if [ $rc -ne 0 ]; then
            bad streaming_slices "--batch-slice $s: exit $rc: $(err1)"
            return
        fi
    done
    expect_py streaming_slices "$d/default.h5" "$d/slice1.h5" "$d/slice3.h5" <<'EOF'
import sys, h
for other, s in ((sys.argv[2], 1), (sys.argv[3], 3)):
    why = h.same_values(sys.argv[1], other)
    if why:
        h.fail("--batch-slice %d vs default: %s" % (s, why))
EOF
}

# ---------------------------------------------------------------- 12. memory

# Peak RSS in kB of one attnrun run (prints it), or nothing when the run failed.
peak_rss() {
    local log=$T/time.log
    /usr/bin/time -v "$ATTNRUN" "$@" >/dev/null 2>"$log" || return 1
    awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$log"
}

check_memory() {
    local d small big
    if [ ! -x /usr/bin/time ]; then
        skip memory_flat_in_B "/usr/bin/time is missing (Debian package: time)"
        return
    fi
    d=$(workdir memory)
    gen "$d/b256.h5" 256 32 64
    gen "$d/b4096.h5" 4096 32 64
    small=$(peak_rss "$d/b256.h5" -o "$d/o256.h5" --heads 4)
    big=$(peak_rss "$d/b4096.h5" -o "$d/o4096.h5" --heads 4)
    if [ -z "$small" ] || [ -z "$big" ]; then
        bad memory_flat_in_B "a run failed: $(grep -v '^\s' "$T/time.log" | head -n 1)"
        return
    fi
    # limit = 1.5 * small + 20 MB, all in kB
    local limit=$((small * 3 / 2 + 20000))
    if [ "$big" -lt "$limit" ]; then
        ok "memory_flat_in_B (peak RSS B=256: $small kB, B=4096: $big kB, limit $limit kB)"
    else
        bad memory_flat_in_B "peak RSS B=256: $small kB, B=4096: $big kB >= 1.5x + 20 MB = $limit kB"
    fi
}

# ---------------------------------------------------------------- 13. signals

# Interrupts a long run (inputs in directory $2) with signal $1 and checks
# the aftermath: exit 1, one 'attnrun: ...interrupt...' line, no OUT, no
# temporary file, the input unchanged.
# interrupt_with SIG DIR [in-place]: signals attnrun mid-run.  SIGINT and
# SIGTERM: exit 1 with one "interrupted" line, no OUT, no temporary, IN as
# it was.  SIGKILL: no OUT and IN as it was; a temporary may remain, named
# as the README says (.NAME.attnrun-tmp-XXXXXX), which the test removes.
interrupt_with() {
    local sig=$1 d=$2 mode=${3:-} name out pid before input
    name=signal_${sig,,}${mode:+_$mode}
    out=$d/out_$sig.h5
    input=$d/in.h5
    if [ "$mode" = in-place ]; then
        input=$d/in_$sig.h5
        cp "$d/in.h5" "$input"
    fi
    before=$(sha "$input")
    if [ "$mode" = in-place ]; then
        "$ATTNRUN" "$input" --in-place --group /r --heads 4 --batch-slice 16 --save output \
            --threads 1 >/dev/null 2>"$T/stderr" &
    else
        "$ATTNRUN" "$input" -o "$out" --heads 4 --batch-slice 16 --save output --threads 1 \
            >/dev/null 2>"$T/stderr" &
    fi
    pid=$!
    # Signal it 0.3 s into the computation: once its temporary output exists
    # (so a slow start cannot make this test signal it before it is running).
    for _ in $(seq 100); do
        [ -n "$(temps_in "$d")" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    sleep 0.3
    if ! kill -s "$sig" "$pid" 2>/dev/null; then
        wait "$pid"
        bad "$name" "attnrun ended (exit $?) before the signal; the input is too small"
        return
    fi
    for _ in $(seq 100); do             # at most 10 s to shut down
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -s KILL "$pid"
        wait "$pid"
        bad "$name" "still running 10 s after SIG$sig"
        return
    fi
    wait "$pid"
    rc=$?
    local lines left
    lines=$(wc -l <"$T/stderr")
    left=$(temps_in "$d")
    if [ "$sig" = KILL ]; then
        if [ $rc -ne 137 ]; then
            bad "$name" "exit $rc, expected 137 (killed)"
        elif [ -e "$out" ]; then
            bad "$name" "OUT exists after SIGKILL"
        elif [ "$(sha "$input")" != "$before" ]; then
            bad "$name" "the input changed"
        elif [ -n "$left" ] && ! grep -Eq '^\.[^/]+\.attnrun-tmp-[A-Za-z0-9]{6}$' <<<"$left"; then
            bad "$name" "left something not named as a temporary: $left"
        else
            ok "$name"
        fi
        rm -f "$d"/.*.attnrun-tmp-*
        return
    fi
    if [ $rc -ne 1 ]; then
        bad "$name" "exit $rc, expected 1 (stderr: $(err1))"
    elif [ "$lines" -ne 1 ] || ! grep -q '^attnrun: .*interrupt' "$T/stderr"; then
        bad "$name" "stderr is not one 'attnrun: ...interrupt...' line: $(head -c 300 "$T/stderr")"
    elif [ -e "$out" ]; then
        bad "$name" "OUT exists after the interrupt"
    elif [ -n "$left" ]; then
        bad "$name" "left $left"
    elif [ "$(sha "$input")" != "$before" ]; then
        bad "$name" "the input changed"
    else
        ok "$name"
    fi
}

check_signals() {
    local d
    d=$(workdir signals)
    # About 1.5 s of work on one thread (B=3000, n=256, d_model=64, H=4).
    gen "$d/in.h5" 3000 256 64
    interrupt_with INT "$d"
    interrupt_with TERM "$d"
    interrupt_with KILL "$d"
    interrupt_with INT "$d" in-place
    interrupt_with TERM "$d" in-place
    interrupt_with KILL "$d" in-place
}

# ---------------------------------------------------------------- 14. progress

check_progress() {
    local d
    d=$(workdir progress)
    run "$FIX/batch_bias.h5" -o "$d/a.h5" --heads 4 --progress
    if [ $rc -ne 0 ]; then
        bad progress_flag "exit $rc: $(err1)"
    elif ! grep -Eq '^attnrun: 100% \([0-9]+/[0-9]+ rows of items? ' "$T/stderr"; then
        bad progress_flag "no 'attnrun: 100% (... rows of item' on stderr: $(head -c 200 "$T/stderr")"
    else
        ok progress_flag
    fi

    run "$FIX/batch_bias.h5" -o "$d/b.h5" --heads 4
    if [ $rc -ne 0 ]; then
        bad quiet_when_not_a_terminal "exit $rc: $(err1)"
    elif [ -s "$T/stderr" ]; then
        bad quiet_when_not_a_terminal "stderr not empty: $(head -c 200 "$T/stderr")"
    else
        ok quiet_when_not_a_terminal
    fi

    run "$FIX/batch_bias.h5" -o "$d/c.h5" --heads 4 --progress -q
    if [ $rc -ne 0 ]; then
        bad quiet_flag "exit $rc: $(err1)"
    elif [ -s "$T/stderr" ]; then
        bad quiet_flag "--progress -q wrote to stderr: $(head -c 200 "$T/stderr")"
    else
        ok quiet_flag
    fi
}

# ---------------------------------------------------------------- 15. threads

check_threads() {
    local d t
    d=$(workdir threads)
    gen "$d/in.h5" 16 96 64 5
    for t in 1 2; do
        run "$d/in.h5" -o "$d/t$t.h5" --heads 4 --threads $t --save scores,weights,heads,output,q,k,v
        if [ $rc -ne 0 ]; then
            bad threads_bit_identical "--threads $t: exit $rc: $(err1)"
            return
        fi
    done
    expect_py threads_bit_identical "$d/t1.h5" "$d/t2.h5" <<'EOF'
import sys, h
why = h.same_values(sys.argv[1], sys.argv[2])
if why:
    h.fail("--threads 1 vs 2: " + why)
EOF
}

# ---------------------------------------------------------------- 16. non-finite

check_nonfinite() {
    local d
    d=$(workdir nonfinite)
    PYTHONPATH=$T:$TESTS/ref "$PY" - "$d/in.h5" <<'EOF'
import sys, numpy as np, h
def nan_at(X):
    X[1, 2, 3] = np.nan
h.gen(sys.argv[1], 3, 5, 8, fill=nan_at)
EOF
    run "$d/in.h5" -o "$d/out.h5" --heads 2
    if [ $rc -ne 3 ]; then
        bad nonfinite_rejected "exit $rc, expected 3"
    elif ! grep -q '\bX\b' "$T/stderr" || ! grep -qF '[1, 2, 3]' "$T/stderr"; then
        bad nonfinite_rejected "message does not name X and [1, 2, 3]: $(err1)"
    elif [ -e "$d/out.h5" ] || [ -n "$(temps_in "$d")" ]; then
        bad nonfinite_rejected "left an output or temporary file"
    else
        ok nonfinite_rejected
    fi
    run "$d/in.h5" -o "$d/out.h5" --heads 2 --allow-nonfinite
    if [ $rc -ne 0 ]; then
        bad nonfinite_allowed "exit $rc: $(err1)"
    elif [ ! -s "$d/out.h5" ]; then
        bad nonfinite_allowed "no output"
    else
        ok nonfinite_allowed
    fi
}

# ---------------------------------------------------------------- 17. types

check_input_types() {
    local d
    d=$(workdir types)
    if ! pycheck "$FIX/perhead3d.h5" >/dev/null <<'EOF'
import sys, numpy as np, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert f["X"].dtype == np.float16
    assert f["W_Q"].dtype.byteorder == ">"
EOF
    then
        bad float16_bigendian_input "fixtures/perhead3d.h5 no longer has a float16 X and big-endian W_Q"
        return
    fi
    run "$FIX/perhead3d.h5" -o "$d/out.h5"
    if [ $rc -ne 0 ]; then
        bad float16_bigendian_input "exit $rc: $(err1)"
    else
        ok float16_bigendian_input
    fi
}

# ------------------------------------------------------------ refusals

# Expects the last run to have failed with CODE and a stderr line holding TEXT.
expect_refusal() {
    local name=$1 code=$2 text=$3
    if [ $rc -ne "$code" ] || [ "$(wc -l <"$T/stderr")" -ne 1 ] || ! grep -q -- "$text" "$T/stderr"; then
        bad "$name" "exit $rc, expected $code with '$text': $(err1)"
    else
        ok "$name"
    fi
}

check_refusals() {
    local d before
    d=$(workdir refusals)
    cp "$FIX/causal.h5" "$d/in.h5"

    mkfifo "$d/fifo.h5"
    run "$d/in.h5" -o "$d/fifo.h5" --force --heads 2
    if [ -p "$d/fifo.h5" ]; then
        expect_refusal force_refuses_non_regular_out 2 "not a regular file"
    else
        bad force_refuses_non_regular_out "the FIFO was replaced"
    fi

    ln "$d/in.h5" "$d/link.h5"
    before=$(sha "$d/in.h5")
    run "$d/in.h5" --in-place --heads 2
    expect_refusal in_place_refuses_hard_links 2 "hard links"
    [ "$(sha "$d/in.h5")" = "$before" ] || bad in_place_refuses_hard_links "IN changed"
    rm "$d/link.h5"

    ln -s in.h5 "$d/sym.h5"
    run "$d/sym.h5" --in-place --heads 2 --group /viasym
    if [ $rc -ne 0 ] || [ ! -L "$d/sym.h5" ]; then
        bad in_place_through_symlink "exit $rc, link kept: $([ -L "$d/sym.h5" ] && echo yes || echo no): $(err1)"
    else
        expect_py in_place_through_symlink "$d/in.h5" <<'EOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert "viasym/weights" in f, list(f)
EOF
    fi

    run "$d/in.h5" -o "$d/g.h5" --heads 2 --group //
    expect_refusal group_path_checked 2 "group '//'"

    run "$d/in.h5" -o "$d/g.h5" --wq none
    expect_refusal option_named_in_message 2 "^attnrun: --wq none"

    PYTHONPATH=$T:$TESTS/ref "$PY" - "$d/wide.h5" <<'EOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    x = np.ones((2, 3, 4)); x[1, 2, 3] = 1e100     # its logits fit float64
    f["X"] = x
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        f[w] = np.eye(4, dtype=np.float32)
EOF
    run "$d/wide.h5" -o "$d/w.h5" --heads 2
    expect_refusal float32_overflow_explained 3 "1e+100 at \\[1, 2, 3\\], too large for float32"
    run "$d/wide.h5" -o "$d/w.h5" --heads 2 --precision f64
    [ $rc -eq 0 ] && ok float64_keeps_large_values || bad float64_keeps_large_values "exit $rc: $(err1)"

    [ -z "$(temps_in "$d")" ] || bad refusals_leave_no_temporary "$(temps_in "$d")"
}

# ------------------------------------------------------------ xarray

# xarray (through h5netcdf) sees the dimension scales as named dimensions
# with coordinates, and the values equal h5py's.
check_xarray() {
    local d
    d=$(workdir xarray)
    if ! "$PY" -c 'import xarray, h5netcdf' 2>/dev/null; then
        skip xarray_opens "python3-xarray and python3-h5netcdf are not installed"
        return
    fi
    run "$FIX/batch_bias.h5" -o "$d/out.h5" --heads 4
    if [ $rc -ne 0 ]; then
        bad xarray_opens "exit $rc: $(err1)"
        return
    fi
    expect_py xarray_opens "$d/out.h5" <<'EOF'
import sys, numpy as np, h5py, xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf")
assert ds["weights"].dims == ("batch", "head", "query", "key"), ds["weights"].dims
assert ds["output"].dims == ("batch", "query", "d_model"), ds["output"].dims
assert list(ds["head"].values) == [0, 1, 2, 3], ds["head"].values
with h5py.File(sys.argv[1], "r") as f:
    assert np.array_equal(ds["weights"].sel(batch=1, head=2).values, f["weights"][1, 2])
assert int(ds.attrs["heads"]) == 4
EOF
}

# ------------------------------------------------------- write failures

# A write that fails (full disk, file size limit) ends with exit 1, one
# message naming the cause, and nothing left behind - never a crash.
expect_write_failure() {
    local name=$1 want=$2 dir=$3
    if [ $rc -ne 1 ] || [ "$(wc -l <"$T/stderr")" -ne 1 ] || ! grep -q "$want" "$T/stderr"; then
        bad "$name" "exit $rc, expected 1 with '$want': $(err1)"
    elif [ -n "$(ls -A "$dir")" ]; then
        bad "$name" "left behind: $(ls -A "$dir" | tr '\n' ' ')"
    else
        ok "$name"
    fi
}

check_write_failures() {
    local d small
    d=$(workdir writefail)
    gen "$d/in.h5" 256 32 64
    small=$d/small
    mkdir "$small"
    if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1m tmpfs "$small" 2>/dev/null; then
        # the plan (12.6 MB of outputs, the dry run's total) does not fit:
        # refused before writing, with both figures
        run "$d/in.h5" -o "$small/out.h5" --heads 4
        expect_write_failure no_room "free; use --force to try anyway" "$small"
        local total need
        total=$("$ATTNRUN" "$d/in.h5" --heads 4 --dry-run | awk '$1 == "total" { print $2 }')
        need=$(awk -v b="$total" 'BEGIN { printf "%.1f MB", b / 1e6 }')
        if ! grep -q "needs $need (the outputs) but .* has 1.0 MB free" "$T/stderr"; then
            bad no_room_numbers "expected both sizes: $(err1)"
        else
            ok no_room_numbers
        fi
        # --force tries anyway: the disk fills, and nothing is left behind
        run "$d/in.h5" -o "$small/out.h5" --heads 4 --force
        expect_write_failure disk_full "No space left" "$small"
        umount "$small"
    else
        skip disk_full "needs root and a tmpfs mount"
    fi
    mkdir -p "$d/limited"
    (ulimit -f 512; "$ATTNRUN" "$d/in.h5" -o "$d/limited/out.h5" --heads 4 >"$T/stdout" 2>"$T/stderr")
    rc=$?
    expect_write_failure file_size_limit "File too large" "$d/limited"
}

# ---------------------------------------------------------------- main

if [ ! -x "$ATTNRUN" ]; then
    bad setup "$ATTNRUN is not an executable (run make first)"
elif ! "$PY" -c 'import numpy, h5py' 2>/dev/null; then
    bad setup "$PY lacks numpy or h5py (set PYTHON)"
else
    check_labels_and_scales
    check_provenance
    check_rank2
    check_chunking
    check_compress
    check_precision
    check_save_subset
    check_dry_run
    check_atomic_output
    check_in_place
    check_streaming
    check_memory
    check_signals
    check_progress
    check_threads
    check_nonfinite
    check_input_types
    check_write_failures
    check_xarray
    check_refusals
fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
