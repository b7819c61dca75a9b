"""SGEMM, C = alpha A.B + beta C in float32: inputs, float64 reference, and
cuBLAS doing the same work (cublasGemmEx, FP32 compute, same alpha and beta)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.problems.base import Prepared, Problem, poison, random_matrix, relative_error

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


# Non-trivial scalars: alpha != 1 and beta != 0 exercise both halves of the
# epilogue; both are exact in binary, so the float64 reference sees the same values.
ALPHA = 1.5
BETA = -0.75

# cuBLAS's column-major cublasGemmEx and the cudaDataType / compute type it runs FP32 with.
CUBLAS_OP_N, CUBLAS_GEMM_DEFAULT, CUDA_R_32F = 0, -1, 0


def baseline_name() -> str:
    """What the cuBLAS baseline computes: the same SGEMM, C = ALPHA * A.B +
    BETA * C, through cublasGemmEx with compute type CUBLAS_COMPUTE_32F (FP32
    FFMA; a TF32 baseline would not be a fair FP32 comparison). Reading C as
    well as writing it is part of the work the kernels do; CuPy's matmul, the
    baseline before 2026-11-21, computes A.B alone."""
    return "cuBLAS SGEMM (cublasGemmEx FP32, same alpha and beta)"


def cublas_sgemm(cp: Any, a: Any, b: Any, c: Any) -> Callable[[], None]:
    """C = ALPHA * A.B + BETA * C in place (row-major float32, A M x K, B K x N),
    as BLAS defines SGEMM. cuBLAS is column-major: it computes C^T = ALPHA *
    B^T . A^T + BETA * C^T, where the row-major B, A and C read as column-major
    B^T (N x K), A^T (K x M) and C^T (N x M) with no copy."""
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape
    n = b.shape[1]
    alpha, beta = np.full(1, ALPHA, np.float32), np.full(1, BETA, np.float32)  # host scalars the closure keeps
    handle = cp.cuda.device.get_cublas_handle()

    def call() -> None:
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.gemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, alpha.ctypes.data, b.data.ptr, CUDA_R_32F, n,
                      a.data.ptr, CUDA_R_32F, k, beta.ctypes.data, c.data.ptr, CUDA_R_32F, n,
                      cublas.CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)  # fmt: skip

    return call


def prepare_sgemm(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.k, "float32")
    b = random_matrix(cp, rng, s.k, s.n, "float32")
    c_in = random_matrix(cp, rng, s.m, s.n, "float32")
    c_out = cp.empty((s.m, s.n), dtype=cp.float32)
    # float64 on the same device (cuBLAS DGEMM); the float32 inputs are exact in float64.
    ref = ALPHA * (a.astype(cp.float64) @ b.astype(cp.float64)) + BETA * c_in.astype(cp.float64)
    # cuBLAS updates its C in place; each timed call starts from the last one's
    # result, which BETA = -0.75 keeps bounded (the values do not change the time).
    lib_out = c_in.copy()
    return Prepared(
        args=(
            a.data.ptr,
            b.data.ptr,
            c_in.data.ptr,
            c_out.data.ptr,
            np.int32(s.m),
            np.int32(s.n),
            np.int32(s.k),
            np.float32(ALPHA),
            np.float32(BETA),
        ),
        poison=lambda: poison(cp, c_out),
        error=lambda: relative_error(cp, c_out, ref),
        baseline=cublas_sgemm(cp, a, b, lib_out),
        baseline_name=baseline_name(),
        buffers=(a, b, c_in, c_out, ref, lib_out),
    )


def sgemm_device_bytes(point: Point) -> int:
    """Device memory prepare_sgemm needs at its peak: A, B, C_in, C_out and the
    library's output in float32; float64 copies of A, B and C_in, the product
    and the reference."""
    s = point.shape
    elems = s.m * s.k + s.k * s.n + 3 * s.m * s.n
    return elems * (4 + 8)


SGEMM = Problem("sgemm", prepare_sgemm, sgemm_device_bytes)
