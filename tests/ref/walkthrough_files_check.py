"""tests/ref/walkthrough_files_check.py - the files of README's walkthrough
("From a Hugging Face layer to a picture"), for tests/cli/test_docs.sh.  Each
command exits 0 when the check holds, else 1.

    python3 tests/ref/walkthrough_files_check.py tokens-entropy LAYER.h5 OUT.h5
        OUT's query_token and key_token are LAYER's tokens, and its entropy
        is -sum p log p of its weights (within 1e-4)
    python3 tests/ref/walkthrough_files_check.py same-datasets A.h5 B.h5
        every dataset of A is in B with the same values
    python3 tests/ref/walkthrough_files_check.py same-weights RESULTS.h5 OUT.h5
        RESULTS' /layer3/weights equal OUT's /weights
"""
import sys

import h5py
import numpy as np


def tokens_entropy(src_path, out_path):
    src, out = h5py.File(src_path, "r"), h5py.File(out_path, "r")
    tokens = src["tokens"].asstr()[...]
    w = out["weights"][...].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(w > 0, w * np.log(w), 0).sum(-1)
    return (out["query_token"].asstr()[...] == tokens).all() and \
        (out["key_token"].asstr()[...] == tokens).all() and \
        out["entropy"].shape == w.shape[:-1] and np.abs(out["entropy"][...] - entropy).max() < 1e-4


def same_datasets(a_path, b_path):
    a, b = h5py.File(a_path, "r"), h5py.File(b_path, "r")
    names = []
    a.visit(names.append)
    return all(isinstance(a[n], h5py.Group) or np.array_equal(a[n][...], b[n][...])
               for n in names)


def same_weights(results_path, out_path):
    r, o = h5py.File(results_path, "r"), h5py.File(out_path, "r")
    return np.array_equal(r["layer3/weights"][...], o["weights"][...])


COMMANDS = {"tokens-entropy": tokens_entropy, "same-datasets": same_datasets,
            "same-weights": same_weights}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    sys.exit(0 if COMMANDS[sys.argv[1]](*sys.argv[2:]) else 1)
