"""tests/ref/store_ref.py - what docs/outputs.md's `--store` and masked tiles
require of the stored maps, written in numpy from the definitions (never
from attnrun's output), for tests/cli/test_store.sh.

  * f16: IEEE binary16; numpy's float32->float16 and float64->float16 casts
    round once, to nearest even, and give +-inf beyond the range.
  * bf16: 1 sign bit, 8 exponent bits (bias 127), 7 mantissa bits.  Two
    independent roundings to nearest even:
      bf16_bits_from_f32: integer arithmetic on the float32 bit pattern,
          (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
      bf16_bits_from_f64: directly from the double, with np.frexp and
          np.rint to 8 significant bits (7 below the subnormal threshold
          2^-126, quantum 2^-133), +-inf from 2^128 on.
    The self-check (python3 tests/ref/store_ref.py) checks that they agree on
    every float32 input, and both against hand-worked cases.
  * tiles: a chunk of a (B, H, n, m) map is written when it holds at least
    one visible (query, key) pair: --causal hides k > q, --window W hides
    k <= q - W.
  * read_raw_u16: the stored 16-bit patterns of a dataset, read with the
    file's own type as the memory type (no conversion by HDF5); read_raw_bits
    the same for any element size.
  * stored_chunks: each chunk a dataset stores, as its bytes in the file
    (h5py's read_direct_chunk), inflated (zlib) and unshuffled (HDF5's
    shuffle filter puts byte j of element i at j * count + i) when the
    dataset has those filters: the whole chunk, its part past the
    dataset's end included.  fill_bits: the dataset's fill value as the
    bit pattern of its type (numpy's casts; bf16 by bf16_bits_from_f64).
"""
import numpy as np

F16_MAX = 65504.0
F16_OVERFLOW = 65520.0           # RNE: |x| >= this becomes +-inf in binary16
BF16_OVERFLOW = 2.0 ** 128 - 2.0 ** 119   # (2 - 2^-8) * 2^127: rounds to 2^128 -> inf


def bf16_bits_from_f32(a):
    """uint16 bf16 patterns of float32 values: RNE on the bit pattern (NaN aside)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_from_f64(a):
    """uint16 bf16 patterns of float64 values, rounded once from the double
    to nearest even (NaN aside)."""
    x = np.asarray(a, dtype=np.float64)
    out = np.empty(x.shape, np.float64)
    fin = np.isfinite(x)
    out[~fin] = x[~fin]
    xf = x[fin]
    _, e = np.frexp(xf)                      # xf = mant * 2^e, 0.5 <= |mant| < 1
    # 8 significant bits: ulp 2^(e - 8); below 2^-126 the fixed quantum 2^-133
    q_exp = np.maximum(e.astype(np.int64) - 8, -133)
    r = np.ldexp(np.rint(np.ldexp(xf, -q_exp)), q_exp)
    r = np.where(np.abs(r) >= 2.0 ** 128, np.copysign(np.inf, xf), r)
    out[fin] = r
    # every value is now exactly a bf16 value, hence exactly a float32
    return (out.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_to_f64(bits):
    """float64 values of uint16 bf16 patterns."""
    b = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    return b.view(np.float32).astype(np.float64)


def read_raw_u16(ds):
    """The stored 2-byte patterns of h5py dataset ds, unconverted."""
    import h5py
    ftype = ds.id.get_type()
    if ftype.get_size() != 2:
        raise ValueError("element size %d, not 2" % ftype.get_size())
    out = np.empty(ds.shape, np.uint16)
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ftype)
    return out


def read_raw_bits(ds):
    """The stored patterns of h5py dataset ds as unsigned integers of its
    element size, unconverted."""
    import h5py
    ftype = ds.id.get_type()
    out = np.empty(ds.shape, np.dtype("<u%d" % ftype.get_size()))
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ftype)
    return out


def fill_bits(ds):
    """The fill value of h5py dataset ds as the pattern of its type (a
    little-endian float: binary16, bfloat16, float32, float64, or int32)."""
    import h5py
    t = ds.id.get_type()
    size, fv = t.get_size(), ds.fillvalue
    if t.get_class() == h5py.h5t.INTEGER:
        return np.array(fv, np.dtype("<i%d" % size)).view(np.dtype("<u%d" % size))[()]
    fv = np.float64(fv)
    if size == 2 and t.get_fields() == (15, 7, 8, 0, 7):
        return bf16_bits_from_f64(np.array([fv]))[0]
    kind = {2: np.float16, 4: np.float32, 8: np.float64}[size]
    return np.array(fv, kind).view(np.dtype("<u%d" % size))[()]


def stored_chunks(ds):
    """(offset, chunk) for each chunk h5py dataset ds stores: the chunk's
    bytes as written (read_direct_chunk), inflated and unshuffled when
    the dataset is filtered so, as unsigned integers of the element size
    in the chunk's shape."""
    import zlib
    size = ds.id.get_type().get_size()
    count = int(np.prod(ds.chunks))
    for i in range(ds.id.get_num_chunks()):
        offset = tuple(int(o) for o in ds.id.get_chunk_info(i).chunk_offset)
        mask, data = ds.id.read_direct_chunk(offset)
        if ds.compression is not None:
            if ds.compression != "gzip" or mask != 0:
                raise ValueError("%s chunk %s: filter %r, mask %d" % (ds.name, offset,
                                                                     ds.compression, mask))
            data = zlib.decompress(data)
        if ds.shuffle:
            data = np.frombuffer(data, np.uint8).reshape(size, count).T.tobytes()
        if len(data) != count * size:
            raise ValueError("%s chunk %s: %d bytes, expected %d" % (ds.name, offset, len(data),
                                                                    count * size))
        yield offset, np.frombuffer(data, np.dtype("<u%d" % size)).reshape(ds.chunks)


def padded_bits(ds):
    """ds's stored patterns padded with fill_bits(ds) to whole chunks: what
    every chunk it stores must hold, past the dataset's end included."""
    whole = read_raw_bits(ds)
    grid = tuple(-(-s // c) * c for s, c in zip(ds.shape, ds.chunks))
    out = np.full(grid, fill_bits(ds), whole.dtype)
    out[tuple(slice(0, s) for s in ds.shape)] = whole
    return out


def visible(n, m, causal=False, window=0):
    """(n, m) bool: key k takes part for query q (docs/models.md, "The
    math")."""
    q = np.arange(n)[:, None]
    k = np.arange(m)[None, :]
    v = np.ones((n, m), bool)
    if causal:
        v &= k <= q
    if window:
        v &= q - window < k
    return v


def tiles_with_visible(n, m, cq, ck, causal=False, window=0):
    """Number of (cq, ck) tiles of an (n, m) map holding a visible pair, and
    the number of tiles in all."""
    v = visible(n, m, causal, window)
    nq, nk = -(-n // cq), -(-m // ck)
    count = 0
    for i in range(nq):
        for j in range(nk):
            if v[i * cq:(i + 1) * cq, j * ck:(j + 1) * ck].any():
                count += 1
    return count, nq * nk


def chunks_expected(shape, chunks, causal=False, window=0):
    """(chunks holding a visible pair, all chunks) of a (B, H, n, m) or
    (H, n, m) map chunked as `chunks` (the mask is the same for every item
    and head)."""
    n, m = shape[-2:]
    cq, ck = chunks[-2:]
    per, total = tiles_with_visible(n, m, cq, ck, causal, window)
    outer = 1
    for s, c in zip(shape[:-2], chunks[:-2]):
        outer *= -(-s // c)
    return outer * per, outer * total


# ---------------------------------------------------------------- self-check

def _self_check():
    rng = np.random.default_rng(7)
    # 1. the two bf16 roundings agree on every kind of float32
    parts = [
        rng.standard_normal(200000).astype(np.float32),
        (rng.standard_normal(50000) * 1e30).astype(np.float32),
        (rng.standard_normal(50000) * 1e-39).astype(np.float32),    # subnormals
        rng.integers(0, 2 ** 32, 200000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, 3.4028235e38, -3.4028235e38,
                  1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -20,
                  2.0 ** -126, 2.0 ** -133, 2.0 ** -134, 3 * 2.0 ** -135,
                  2.0 ** -149], np.float32),
    ]
    x = np.concatenate(parts)
    x = x[~np.isnan(x)]
    a = bf16_bits_from_f32(x)
    b = bf16_bits_from_f64(x.astype(np.float64))
    bad = np.flatnonzero(a != b)
    assert bad.size == 0, "bf16 roundings disagree at %r: %s vs %s" % (
        x[bad[:3]], a[bad[:3]], b[bad[:3]])
    # 2. hand-worked cases
    cases = {
        1.0: 0x3F80, -2.5: 0xC020, 1.0 + 2.0 ** -8: 0x3F80,           # tie -> even (down)
        1.0 + 3 * 2.0 ** -8: 0x3F82,                                  # tie -> even (up)
        1.0 + 2.0 ** -8 + 2.0 ** -30: 0x3F81,                         # just above the tie
        3.140625: 0x4049, 65504.0: 0x4780, np.inf: 0x7F80, -np.inf: 0xFF80,
        0.0: 0x0000, 2.0 ** 127 * (2 - 2.0 ** -7): 0x7F7F,            # the largest bf16
        2.0 ** 127 * (2 - 2.0 ** -8): 0x7F80,                         # its tie -> inf
        1e39: 0x7F80, -1e39: 0xFF80,                                  # beyond float32 too
        2.0 ** -133: 0x0001, 2.0 ** -134: 0x0000,                     # tie -> even (0)
        3 * 2.0 ** -134: 0x0002, 2.0 ** -126: 0x0080,
    }
    got = bf16_bits_from_f64(np.array(list(cases), np.float64))
    want = np.array(list(cases.values()), np.uint16)
    assert np.array_equal(got, want), (got, want)
    back = bf16_to_f64(want)
    assert back[0] == 1.0 and back[1] == -2.5 and np.isneginf(back[8])
    # 3. rounding once from the double differs from rounding through float32
    #    (1 + 2^-8 + 2^-30 rounds to float32 1 + 2^-8, a bf16 tie, then down)
    d = 1.0 + 2.0 ** -8 + 2.0 ** -30
    assert bf16_bits_from_f64(np.array([d]))[0] == 0x3F81
    assert bf16_bits_from_f32(np.array([d], np.float32))[0] == 0x3F80
    # 4. numpy's binary16 casts: RNE, +-inf from 65520 on, directly from f64
    assert np.float16(np.float64(65519.99)) == 65504 and np.isinf(np.float16(np.float64(65520.0)))
    assert np.isneginf(np.float16(np.float32(-70000.0)))
    h = np.float64(1.0 + 2.0 ** -11 + 2.0 ** -40)                    # just above a tie
    assert np.float16(h) == np.float16(1.0 + 2.0 ** -10)
    assert np.float16(np.float32(h)) == np.float16(1.0)              # double rounding
    # 5. tiles
    assert tiles_with_visible(600, 600, 256, 256, causal=True) == (6, 9)
    assert tiles_with_visible(600, 600, 256, 256, causal=True, window=100) == (5, 9)
    assert tiles_with_visible(600, 600, 256, 256, window=100) == (8, 9)
    assert tiles_with_visible(600, 600, 256, 256) == (9, 9)
    assert tiles_with_visible(1024, 1024, 256, 256, causal=True) == (10, 16)
    assert chunks_expected((2, 2, 600, 600), (1, 1, 256, 256), causal=True) == (24, 36)
    assert chunks_expected((3, 520, 520), (1, 256, 256), causal=True) == (18, 27)
    # cross-attention, top-left causal: 300 queries see keys 0 ... 299 only
    assert tiles_with_visible(300, 700, 256, 256, causal=True) == (3, 6)
    # 6. the chunks as stored, decoded: h5py (HDF5's own filters) writes a
    #    (5, 7) dataset in (4, 4) chunks, shuffled and deflated or not, with
    #    a fill value; each chunk decodes to the values and, past the end,
    #    HDF5's own padding -- the fill value for a partial chunk HDF5 wrote
    #    from a whole-dataset write (it fills the chunk first)
    import tempfile
    import h5py
    v = np.arange(35, dtype=np.float32).reshape(5, 7) + 1
    with tempfile.TemporaryDirectory() as tmp:
        for filters in ({}, {"compression": "gzip", "compression_opts": 1, "shuffle": True}):
            with h5py.File(tmp + "/c.h5", "w") as f:
                f.create_dataset("s", data=v, chunks=(4, 4), fillvalue=-np.inf, **filters)
                f.create_dataset("h", data=v.astype(np.float16), chunks=(4, 4), **filters)
            with h5py.File(tmp + "/c.h5", "r") as f:
                assert fill_bits(f["s"]) == 0xFF800000 and fill_bits(f["h"]) == 0
                for k in ("s", "h"):
                    want = padded_bits(f[k])
                    assert want.shape == (8, 8) and (want[5:, :] == fill_bits(f[k])).all()
                    got = dict(stored_chunks(f[k]))
                    assert sorted(got) == [(0, 0), (0, 4), (4, 0), (4, 4)], sorted(got)
                    for (r, c), chunk in got.items():
                        assert np.array_equal(chunk, want[r:r + 4, c:c + 4]), (k, filters, r, c)
    assert bf16_bits_from_f64(np.array([-np.inf, 0.0])).tolist() == [0xFF80, 0]
    return "store_ref self-check: %d float32 values, %d hand cases" % (x.size, len(cases))



if __name__ == "__main__":
    with np.errstate(over="ignore"):
        print(_self_check())
