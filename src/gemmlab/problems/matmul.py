"""Plain matmul C = A.B (the documents' kernels): inputs, float64 reference, CuPy's matmul as the baseline."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.core.dtypes import c_itemsize
from gemmlab.problems.base import Prepared, Problem, poison, random_matrix, relative_error
from gemmlab.problems.tensor import CUBLAS_GEMM_DEFAULT, CUBLAS_OP_N, CUDA_R_16F, CUDA_R_32F

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


# The arguments of the catalogue's matmul kernels, in their order; a kernel
# may declare another order or a subset, and ``n`` (the square size) when M = N = K.
MATMUL_ARGUMENTS = ("A", "B", "C", "M", "N", "K")
MATMUL_ARGUMENT_NAMES = (*MATMUL_ARGUMENTS, "n")


# The type of C for each element type of A and B, when it differs: float16
# inputs accumulate and store in float32 (core/dtypes.py's table gives C 4 bytes).
C_DTYPE = {"float16": "float32"}


def prepare_matmul(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.k, point.dtype)
    b = random_matrix(cp, rng, s.k, s.n, point.dtype)
    c = cp.empty((s.m, s.n), dtype=C_DTYPE.get(point.dtype, point.dtype))
    # The float64 reference runs through cuBLAS DGEMM on the same device; for
    # float16 it starts from the exact values of the stored inputs, so only the
    # kernel's float32 accumulation errs.
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    baseline = None
    if point.dtype in ("float32", "float64", "float16"):
        lib_out = cp.empty_like(c)
        baseline = _cublas_half(cp, a, b, lib_out) if point.dtype == "float16" else _cupy_matmul(cp, a, b, lib_out)

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
        baseline_name=_baseline_name(point.dtype) if baseline else None,
        buffers=(a, b, c, ref),
        named=named,
        arrays={"A": a, "B": b, "C": c},
    )


def _baseline_name(dtype: str) -> str:
    if dtype == "float16":
        return "cuBLAS GemmEx float16, FP32 accumulation, float32 C"
    return "cuBLAS (CuPy matmul)"


def _cupy_matmul(cp: Any, a: Any, b: Any, out: Any) -> Callable[[], None]:
    return lambda: cp.matmul(a, b, out=out)


def _cublas_half(cp: Any, a: Any, b: Any, c: Any) -> Callable[[], None]:
    """C (float32) = A . B for row-major float16 A and B, through
    cublasGemmEx with FP32 accumulation (CuPy's matmul would give float16 C).
    cuBLAS is column-major: it computes C^T = B^T . A^T, reading each row-major
    matrix as its column-major transpose."""
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape
    n = b.shape[1]
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)  # host scalars, kept alive by the closure
    handle = cp.cuda.device.get_cublas_handle()

    def call() -> None:
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.gemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, one.ctypes.data, b.data.ptr,
                      CUDA_R_16F, n, a.data.ptr, CUDA_R_16F, k, zero.ctypes.data, c.data.ptr, CUDA_R_32F, n,
                      cublas.CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)  # fmt: skip

    return call


def matmul_device_bytes(point: Point) -> int:
    """Device memory prepare_matmul needs: inputs, output, float64 copies and
    reference, and the library's output."""
    s = point.shape
    item, c_item = point.itemsize, c_itemsize(point.dtype)
    return (s.m * s.k + s.k * s.n) * item + 2 * s.m * s.n * c_item + (s.m * s.k + s.k * s.n + s.m * s.n) * 8


MATMUL = Problem("matmul", prepare_matmul, matmul_device_bytes)
