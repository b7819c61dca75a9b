"""C = A @ B as a Numba CUDA kernel: one thread per element of C, a square
TILE x TILE block, any M, N, K. A Numba function gets gemmlab's stream as the
``stream`` keyword and must launch on it.

    gemmlab run examples/numba_matmul/matmul.py --size 512 --block 16
"""

import math

from numba import cuda, float32


@cuda.jit
def element(a, b, c):
    # x varies fastest across a warp: neighbouring threads take neighbouring columns.
    col, row = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0.0)
        for p in range(a.shape[1]):
            acc += a[row, p] * b[p, col]
        c[row, col] = acc


def matmul(A, B, C, TILE: int, stream) -> None:
    rows, cols = C.shape
    grid = (math.ceil(cols / TILE), math.ceil(rows / TILE))
    element[grid, (TILE, TILE), stream](A, B, C)


GEMMLAB = {
    "function": "matmul",
    "problem": "matmul",
    "dtypes": ["float32"],
    "arrays": "numba",
    "parameters": {"TILE": [16, 8, 32]},
    "edge": "TILE",
}
