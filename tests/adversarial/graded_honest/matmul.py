"""The graded control (tests/adversarial/README.md): cupy.matmul, honest."""

import cupy as cp


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
