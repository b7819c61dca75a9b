"""Adversarial, graded (tests/adversarial/README.md): computes the product of
the first inputs it sees and copies it into every later C. Caught by: every
launch of a batch gets inputs of its own, drawn afresh for the batch."""

_kept = []


def matmul(A, B, C):
    if not _kept:
        _kept.append(A @ B)
    C[...] = _kept[0]


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
