"""C = A @ B as a CuPy expression: cuBLAS behind cupy.matmul, writing into
gemmlab's C on CuPy's current stream (gemmlab's). Measured beside gemmlab's
own call of the same routine, it shows what the Python layer costs (nothing
measurable at large sizes).

    gemmlab run examples/cupy_matmul/matmul.py --size 1024
"""

import cupy as cp


def matmul(A: cp.ndarray, B: cp.ndarray, C: cp.ndarray) -> None:
    cp.matmul(A, B, out=C)


GEMMLAB = {
    "function": "matmul",
    "problem": "matmul",
    "dtypes": ["float32"],
    "arrays": "cupy",
    "summary": "cupy.matmul into the given C",
}
