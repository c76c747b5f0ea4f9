"""tests/corpus/make_bad.py - writes the corpus of bad inputs tests/cli/test_bad.sh runs.

    /usr/bin/python3 tests/corpus/make_bad.py DIR

writes DIR/<case>.h5 (or other files) and DIR/cases.tsv, one line per case:
    <case> TAB <expected exit status> TAB <attnrun arguments, the input first>
and DIR/sweep.tsv (every single-byte flip of the superblock and of X's
object header: <case> TAB <arguments>), where any status will do as long
as the end is clean.
Every case must end with that status, one `attnrun: ` line on stderr, no
signal, within seconds, no file left in the output directory and the input
unchanged.  tests/README.md lists the cases and why each is refused.

The base input is valid (B=2, n=4, d_model=8, H=2, biases, a mask); each
case breaks one thing about it.
"""
import os
import struct
import sys

import h5py
import numpy as np

B, N, D, H = 2, 4, 8, 2
OK_ARGS = "--heads 2"


def write_all_but_x(f):
    """The valid input's datasets but X into f; returns them all."""
    arrays = base_arrays()
    for name, value in arrays.items():
        if name != "X":
            f[name] = value
    return arrays


def base_arrays():
    rng = np.random.default_rng(4)
    arrays = {"X": rng.standard_normal((B, N, D)).astype("f4")}
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        arrays[w] = (rng.standard_normal((D, D)) / np.sqrt(D)).astype("f4")
    for b in ("b_Q", "b_K", "b_V", "b_O"):
        arrays[b] = (0.1 * rng.standard_normal(D)).astype("f4")
    arrays["M"] = np.ones((B, N), dtype=bool)
    return arrays


def write(path, arrays, skip=()):
    with h5py.File(path, "w") as f:
        for name, value in arrays.items():
            if name not in skip:
                f[name] = value


class Corpus:
    def __init__(self, root):
        self.root = root
        self.lines = []
        self.sweep = []

    def path(self, name, suffix=".h5"):
        return os.path.join(self.root, name + suffix)

    def case(self, name, status, args, path=None):
        """Registers a case; IN in args is replaced by its input path."""
        path = path or self.path(name)
        self.lines.append("%s\t%d\t%s" % (name, status, args.replace("IN", path)))

    def file_case(self, name, status, change, args=OK_ARGS):
        """A base file with change(arrays) applied (it may return a dict)."""
        arrays = base_arrays()
        arrays = change(arrays) or arrays
        write(self.path(name), arrays)
        self.case(name, status, "IN " + args)

    def byte_case(self, name, status, mutate, args=OK_ARGS):
        """A valid file whose bytes mutate(bytes) changes."""
        base = self.path("_base")
        data = bytearray(open(base, "rb").read())
        data = mutate(data)
        with open(self.path(name), "wb") as f:
            f.write(bytes(data))
        self.case(name, status, "IN " + args)

    def finish(self):
        with open(os.path.join(self.root, "cases.tsv"), "w") as f:
            f.write("\n".join(self.lines) + "\n")
        with open(os.path.join(self.root, "sweep.tsv"), "w") as f:
            f.write("\n".join(self.sweep) + "\n")


def dataset_offset(path, name):
    with h5py.File(path, "r") as f:
        return f[name].id.get_offset()


def object_header_offset(path, name):
    with h5py.File(path, "r") as f:
        return h5py.h5o.get_info(f[name].id).addr


def damage_free_list(data, how):
    """The file's one local heap (the file format's "HEAP": version 0, the
    data's size and the offset of its first free block as 8-byte lengths,
    then the data's address), its free list changed as `how` says."""
    heap = data.find(b"HEAP")
    size, first, address = struct.unpack_from("<QQQ", data, heap + 8)
    assert heap > 0 and data[heap + 4] == 0 and 16 <= first < size - 32, (heap, size, first)
    if how == "self":                       # the first block's next is itself
        struct.pack_into("<Q", data, address + first, first)
    elif how == "pair":                     # first -> first + 16 -> first
        struct.pack_into("<QQ", data, address + first, first + 16, 16)
        struct.pack_into("<QQ", data, address + first + 16, first, 16)
    else:                                   # the first block's fields end past the data
        struct.pack_into("<Q", data, heap + 16, size - 8)
    return data


def damaged_files(c):
    write(c.path("_base"), base_arrays())
    size = os.path.getsize(c.path("_base"))
    # truncated at several offsets, and empty
    for cut in (0, 8, 100, 800, size // 2, size - 64):
        c.byte_case("truncated_%d" % cut, 3, lambda d, cut=cut: d[:cut])
    # the signature, the superblock's version, sizes and root address
    for at in (0, 4, 8, 13, 14, 40):
        c.byte_case("superblock_byte_%d" % at, 3,
                    lambda d, at=at: d[:at] + bytes([d[at] ^ 0xFF]) + d[at + 1:])
    # X's object header: version, its dataspace and datatype messages
    header = object_header_offset(c.path("_base"), "X")
    for delta in (0, 8, 16, 24, 40, 48, 80):
        c.byte_case("x_header_byte_%d" % delta, 3,
                    lambda d, at=header + delta: d[:at] + bytes([d[at] ^ 0xFF]) + d[at + 1:])
    # every single-byte flip of the superblock and of X's header: many are
    # harmless (reserved bytes, unused addresses), so these only need a
    # clean end, whatever the status (sweep.tsv)
    base = bytearray(open(c.path("_base"), "rb").read())
    sweep_dir = os.path.join(c.root, "sweep")
    os.makedirs(sweep_dir, exist_ok=True)
    for at in list(range(0, 96)) + list(range(header, header + 200)):
        flipped = bytearray(base)
        flipped[at] ^= 0xFF
        path = os.path.join(sweep_dir, "flip_%d.h5" % at)
        with open(path, "wb") as f:
            f.write(bytes(flipped))
        c.sweep.append("flip_%d\t%s %s" % (at, path, OK_ARGS))
    # the root group's local heap (its link names): a free list that leads
    # back to itself, through one block or two, and one whose block runs
    # past the heap's end (HDF5 1.10 would loop, or read past its buffer)
    for name, blocks in (("heap_free_list_self", "self"), ("heap_free_list_pair", "pair"),
                         ("heap_free_list_past_end", "past")):
        c.byte_case(name, 3, lambda d, how=blocks: damage_free_list(d, how))
    # X's values: the top bytes of one float become an infinity or a NaN
    data = dataset_offset(c.path("_base"), "X")
    c.byte_case("x_data_inf", 3, lambda d: d[:data] + b"\x00\x00\x80\x7f" + d[data + 4:])
    c.byte_case("x_data_nan", 3, lambda d: d[:data] + b"\x00\x00\xc0\x7f" + d[data + 4:])
    # not HDF5 at all
    with open(c.path("text_file", ".txt"), "w") as f:
        f.write("X = [1, 2, 3]\n")
    c.case("text_file", 3, "IN --heads 2", c.path("text_file", ".txt"))
    os.makedirs(c.path("a_directory", ""), exist_ok=True)
    c.case("a_directory", 3, "IN --heads 2", c.path("a_directory", ""))
    c.case("missing_file", 3, "IN --heads 2", c.path("no_such_file"))


def shapes_and_types(c):
    c.file_case("zero_length_n", 3, lambda a: a.update(X=np.zeros((B, 0, D), "f4")))
    c.file_case("zero_length_batch", 3, lambda a: a.update(X=np.zeros((0, N, D), "f4")))
    c.file_case("rank0_x", 3, lambda a: a.update(X=np.float32(1)))
    c.file_case("rank1_x", 3, lambda a: a.update(X=np.zeros(D, "f4")))
    c.file_case("rank5_x", 3, lambda a: a.update(X=np.zeros((1, 1, B, N, D), "f4")))
    c.file_case("string_x", 3, lambda a: a.update(X=np.array([b"abc", b"def"])))
    c.file_case("compound_x", 3, lambda a: a.update(
        X=np.zeros((B, N), dtype=[("a", "f4"), ("b", "i4")])))
    c.file_case("integer_x", 3, lambda a: a.update(X=np.ones((B, N, D), "i4")))
    c.file_case("integer_w_q", 3, lambda a: a.update(W_Q=np.ones((D, D), "i2")))
    c.file_case("d_model_mismatch", 3, lambda a: a.update(W_Q=a["W_Q"][:6]))
    c.file_case("d_k_mismatch", 3, lambda a: a.update(W_K=np.zeros((D, 6), "f4")))
    c.file_case("w_o_mismatch", 3, lambda a: a.update(W_O=np.zeros((6, D), "f4")))
    c.file_case("bias_length", 3, lambda a: a.update(b_Q=np.zeros(D + 1, "f4")))
    c.file_case("bias_o_length", 3, lambda a: a.update(b_O=np.zeros(D - 1, "f4")))
    c.file_case("heads_do_not_divide", 3, lambda a: None, "--heads 3")
    c.file_case("mask_wrong_length", 3, lambda a: a.update(M=np.ones((B, N + 1), bool)),
                "--heads 2 --mask M")
    c.file_case("mask_wrong_batch", 3, lambda a: a.update(M=np.ones((B + 1, N), bool)),
                "--heads 2 --mask M")
    c.file_case("mask_float", 3, lambda a: a.update(M=np.ones((B, N), "f4")),
                "--heads 2 --mask M")
    c.file_case("missing_w_v", 3, lambda a: {k: v for k, v in a.items() if k != "W_V"})
    c.file_case("kv_d_model", 3, lambda a: a.update(KV=np.zeros((B, 5, D + 2), "f4")),
                "--heads 2 --kv KV")
    for name in ("X", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
        for label, value in (("nan", np.nan), ("inf", np.inf), ("neg_inf", -np.inf)):
            def put(a, name=name, value=value):
                a[name].flat[a[name].size // 2] = value
            c.file_case("%s_%s" % (label, name.lower()), 3, put)

    # a chunked X declaring 2^40 values, none of them written
    path = c.path("absurd_shape")
    with h5py.File(path, "w") as f:
        arrays = write_all_but_x(f)
        f.create_dataset("X", shape=(2 ** 24, 2 ** 8, D), chunks=(1, 16, D), dtype="f4")
    c.case("absurd_shape", 3, "IN --heads 2", path)
    # the same, with half of a normal X written
    path = c.path("half_written")
    with h5py.File(path, "w") as f:
        arrays = write_all_but_x(f)
        x = f.create_dataset("X", shape=(B, N, D), chunks=(1, N, D), dtype="f4")
        x[0] = arrays["X"][0]
    c.case("half_written", 3, "IN --heads 2", path)
    # unfiltered chunks, the corner one never written (the padded edge
    # chunks hold more bytes than the extent: bytes alone would pass)
    path = c.path("missing_chunk")
    with h5py.File(path, "w") as f:
        arrays = write_all_but_x(f)
        x = f.create_dataset("X", shape=(3, 3, D), chunks=(2, 2, D), dtype="f4")
        x[0:2, 0:3] = 1
        x[2, 0:2] = 1
    c.case("missing_chunk", 3, "IN --heads 2", path)


def hostile_files(c):
    arrays = base_arrays()
    other = c.path("other_file")
    write(other, {"X": arrays["X"]})
    # X is an external link to another file
    path = c.path("external_link")
    write(path, arrays, skip=("X",))
    with h5py.File(path, "a") as f:
        f["X"] = h5py.ExternalLink(os.path.basename(other), "/X")
    c.case("external_link", 3, "IN --heads 2", path)
    # X is a soft link that leads nowhere
    path = c.path("dangling_soft_link")
    write(path, arrays, skip=("X",))
    with h5py.File(path, "a") as f:
        f["X"] = h5py.SoftLink("/nowhere/X")
    c.case("dangling_soft_link", 3, "IN --heads 2", path)
    # an optional bias that is a soft link to nothing: refused, not dropped
    path = c.path("dangling_soft_link_bias")
    write(path, arrays, skip=("b_Q",))
    with h5py.File(path, "a") as f:
        f["b_Q"] = h5py.SoftLink("/nowhere/b_Q")
    c.case("dangling_soft_link_bias", 3, "IN --heads 2", path)
    # a group on the way to a weight is an external link
    path = c.path("external_group")
    write(path, arrays)
    with h5py.File(path, "a") as f:
        f["g"] = h5py.ExternalLink(os.path.basename(other), "/")
    c.case("external_group", 3, "IN --heads 2 --x /g/X", path)
    # X keeps its values in an external raw file
    raw = c.path("raw_values", ".bin")
    arrays["X"].tofile(raw)
    path = c.path("external_storage")
    write(path, arrays, skip=("X",))
    with h5py.File(path, "a") as f:
        f.create_dataset("X", shape=arrays["X"].shape, dtype="f4",
                         external=[(os.path.basename(raw), 0, arrays["X"].nbytes)])
    c.case("external_storage", 3, "IN --heads 2", path)
    # X is a virtual dataset over another file
    path = c.path("virtual_dataset")
    write(path, arrays, skip=("X",))
    layout = h5py.VirtualLayout(shape=arrays["X"].shape, dtype="f4")
    layout[:] = h5py.VirtualSource(os.path.basename(other), "X", shape=arrays["X"].shape)
    with h5py.File(path, "a") as f:
        f.create_virtual_dataset("X", layout)
    c.case("virtual_dataset", 3, "IN --heads 2", path)
    # X needs a filter HDF5 would load as a plugin
    path = c.path("plugin_filter")
    write(path, arrays, skip=("X",))
    with h5py.File(path, "a") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((1, N, D))
        dcpl.set_filter(32001, h5py.h5z.FLAG_OPTIONAL, ())
        space = h5py.h5s.create_simple(arrays["X"].shape)
        x = h5py.h5d.create(f.id, b"X", h5py.h5t.IEEE_F32LE, space, dcpl)
        x.write(h5py.h5s.ALL, h5py.h5s.ALL, arrays["X"])
    c.case("plugin_filter", 3, "IN --heads 2", path)
    # for --in-place: the --group path leads through an external link into
    # another file (tests/cli/test_bad.sh runs it, and checks the victim)
    write(c.path("victim"), {"kept": np.arange(4.0)})
    path = c.path("group_external")
    write(path, base_arrays())
    with h5py.File(path, "a") as f:
        f["results"] = h5py.ExternalLink(os.path.basename(c.path("victim")), "/")
    # a float type of 4 KiB per value (the fuzzer found one of 4 GiB)
    path = c.path("huge_float_type")
    write(path, arrays, skip=("X",))
    with h5py.File(path, "a") as f:
        t = h5py.h5t.IEEE_F32LE.copy()
        t.set_size(4096)
        t.set_fields(31, 23, 8, 0, 23)        # a float32 padded to 4 KiB
        space = h5py.h5s.create_simple((B, N, D))
        h5py.h5d.create(f.id, b"X", t, space)
    c.case("huge_float_type", 3, "IN --heads 2", path)


def bad_options(c):
    write(c.path("good"), base_arrays())
    good = c.path("good")
    for name, args in (
        ("heads_zero", "--heads 0"), ("heads_negative", "--heads -2"),
        ("heads_overflow", "--heads 99999999999999999999999"), ("heads_text", "--heads two"),
        ("scale_suffix", "--heads 2 --scale 1.0x"), ("scale_zero", "--heads 2 --scale 0"),
        ("scale_nan", "--heads 2 --scale nan"), ("threads_zero", "--heads 2 --threads 0"),
        ("memory_zero", "--heads 2 --memory 0"), ("memory_unit", "--heads 2 --memory 5Q"),
        ("compress_ten", "--heads 2 --compress 10"), ("save_unknown", "--heads 2 --save maps"),
        ("precision_f16", "--heads 2 --precision f16"), ("unknown_option", "--heads 2 --fast"),
        ("group_relative", "--heads 2 --group results"), ("batch_slice_zero", "--heads 2 --batch-slice 0"),
    ):
        c.case("option_" + name, 2, "IN " + args, good)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bad.py DIR")
    c = Corpus(sys.argv[1])
    os.makedirs(c.root, exist_ok=True)
    damaged_files(c)
    shapes_and_types(c)
    hostile_files(c)
    bad_options(c)
    c.finish()


if __name__ == "__main__":
    main()
