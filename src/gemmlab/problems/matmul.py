"""Plain matmul C = A.B (the documents' kernels): inputs, float64 reference, CuPy's matmul as the baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.problems.base import Prepared, Problem, poison, random_matrix, relative_error

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


# The arguments of the catalogue's matmul kernels, in their order; a kernel
# may declare another order or a subset, and ``n`` (the square size) when M = N = K.
MATMUL_ARGUMENTS = ("A", "B", "C", "M", "N", "K")
MATMUL_ARGUMENT_NAMES = (*MATMUL_ARGUMENTS, "n")


def prepare_matmul(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.k, point.dtype)
    b = random_matrix(cp, rng, s.k, s.n, point.dtype)
    c = cp.empty((s.m, s.n), dtype=point.dtype)
    # The float64 reference runs through cuBLAS DGEMM on the same device.
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    baseline = None
    if point.dtype in ("float32", "float64"):
        lib_out = cp.empty_like(c)

        def baseline() -> None:
            cp.matmul(a, b, out=lib_out)

    named = {
        "A": a.data.ptr, "B": b.data.ptr, "C": c.data.ptr, "M": np.int32(s.m), "N": np.int32(s.n), "K": np.int32(s.k),
    }  # fmt: skip
    if s.is_square:
        named["n"] = np.int32(s.n)
    return Prepared(
        args=tuple(named[name] for name in MATMUL_ARGUMENTS),
        poison=lambda: poison(cp, c),
        error=lambda: relative_error(cp, c, ref),
        baseline=baseline,
        baseline_name="cuBLAS (CuPy matmul)" if baseline else None,
        buffers=(a, b, c, ref),
        named=named,
    )


def matmul_device_bytes(point: Point) -> int:
    """Device memory prepare_matmul needs: inputs, output, float64 copies and
    reference, and the library's output."""
    s = point.shape
    item = point.itemsize
    return (s.m * s.k + s.k * s.n + 2 * s.m * s.n) * item + (s.m * s.k + s.k * s.n + s.m * s.n) * 8


MATMUL = Problem("matmul", prepare_matmul, matmul_device_bytes)
