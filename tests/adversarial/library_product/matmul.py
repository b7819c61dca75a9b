"""Adversarial (tests/adversarial/README.md): cuBLAS itself (cupy.matmul)
handed in as "my kernel". Not a trick the timing can refuse (it is cuBLAS's
own speed); named instead: the kernels the timed calls ran are stored and
shown with the figure (CUPTI), so a task that wants the student's own kernel
can refuse a library GEMM (issue 49)."""

import cupy as cp


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
