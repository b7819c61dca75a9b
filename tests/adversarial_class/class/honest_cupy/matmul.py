"""Honest control: CuPy's matmul (cuBLAS), which a task with kernels = "any" allows."""

import cupy as cp


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
