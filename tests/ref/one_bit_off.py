"""tests/ref/one_bit_off.py FILE NAME: flips the lowest bit of the first
value of each dataset called NAME in FILE (in any group), in place: the
output of a build that differs from another in one bit of one number
(tests/lib/one_bit_off.sh, tests/cli/test_compare.sh)."""
import sys

import h5py
import numpy as np


def flip_first(data):
    first = (0,) * data.ndim
    value = np.array([data[first]], dtype=data.dtype)
    bits = value.view(np.dtype("u%d" % value.itemsize))
    bits ^= np.ones(1, dtype=bits.dtype)
    data[first] = value[0]


def main(path, name):
    with h5py.File(path, "r+") as f:
        found = []
        f.visititems(lambda key, obj: found.append(obj) if isinstance(obj, h5py.Dataset)
                     and key.split("/")[-1] == name else None)
        for data in found:
            flip_first(data)


if __name__ == "__main__":
    main(*sys.argv[1:])
