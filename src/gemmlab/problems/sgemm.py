"""SGEMM, C = alpha A.B + beta C in float32: inputs, float64 reference, and
cuBLAS doing the same work (cublasGemmEx, FP32 compute, same alpha and beta)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.core.dtypes import TOLERANCE
from gemmlab.problems.base import (
    GemmOperands,
    Prepared,
    Problem,
    Sketch,
    Stackable,
    gemm_sketch,
    guard_bytes,
    guarded_empty,
    lower_precision,
    poison,
    poison_left,
    random_matrix,
    relative_error,
    sum_magnitude,
    uniform_magnitude,
)
from gemmlab.problems.matmul import cublas_gemm, gemm_operand, rounded_input_products

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


# Non-trivial scalars: alpha != 1 and beta != 0 exercise both halves of the
# epilogue; both are exact in binary, so the float64 reference sees the same values.
ALPHA = 1.5
BETA = -0.75


def baseline_name() -> str:
    """What the cuBLAS baseline computes: the same SGEMM, C = ALPHA * A.B +
    BETA * C, through cublasGemmEx with compute type CUBLAS_COMPUTE_32F (FP32
    FFMA; a TF32 baseline would not be a fair FP32 comparison). Reading C as
    well as writing it is part of the work the kernels do; CuPy's matmul, the
    baseline before 2026-11-21, computes A.B alone."""
    return "cuBLAS SGEMM (cublasGemmEx FP32, same alpha and beta)"


def prepare_sgemm(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.k, "float32")
    b = random_matrix(cp, rng, s.k, s.n, "float32")
    c_in = random_matrix(cp, rng, s.m, s.n, "float32")
    guard = guarded_empty(cp, (s.m, s.n), cp.float32)
    c_out = guard.inner
    ref = cp.empty((s.m, s.n), dtype=cp.float64)
    scale = [0.0]  # sum_magnitude of this input set: the error's floor under a C that cancels
    sketch = Sketch()

    def reference() -> None:
        # float64 on the same device (cuBLAS DGEMM); the float32 inputs are exact in float64.
        cp.matmul(a.astype(cp.float64), b.astype(cp.float64), out=ref)
        ref[...] = ALPHA * ref + BETA * c_in.astype(cp.float64)
        scale[0] = sum_magnitude(cp, a, b, ALPHA, c_in, BETA)

    def renew() -> None:
        # The sketch first, from the new values; the inputs written last, warm in L2.
        new_a, new_b, new_c = (random_matrix(cp, rng, *x.shape, "float32") for x in (a, b, c_in))
        magnitude = uniform_magnitude(s.m, s.n, s.k, ALPHA, BETA)
        addend = BETA * new_c.astype(cp.float64)
        gemm_sketch(cp, rng, sketch, new_a.astype(cp.float64), new_b.astype(cp.float64), alpha=ALPHA,
                    addend=addend, magnitude=magnitude)  # fmt: skip
        a[...], b[...], c_in[...] = new_a, new_b, new_c

    def redraw() -> None:
        renew()
        reference()

    def explain() -> str | None:
        products = lambda: rounded_input_products(cp, a, b, ALPHA, BETA * c_in)
        return poison_left(cp, c_out) or lower_precision(cp, c_out, ref, TOLERANCE["float32"], products)

    reference()
    # cuBLAS updates its C in place; each timed call starts from the last one's
    # result, which BETA = -0.75 keeps bounded (the values do not change the time).
    lib_out = c_in.copy()
    return Prepared(
        args=sgemm_operands(cp, point, GemmOperands(a, b, c_in, c_out, ALPHA, BETA)),
        poison=lambda: poison(cp, c_out),
        error=lambda: relative_error(cp, c_out, ref, scale[0]),
        baseline=cublas_gemm(cp, a, b, lib_out, "float32", ALPHA, BETA),
        baseline_name=baseline_name(),
        buffers=(a, b, c_in, c_out, ref, lib_out),  # c_out keeps its whole allocation (guard.whole) alive
        arrays={"A": a, "B": b, "C_in": c_in, "C": c_out},  # for the peer rungs (kernels/peers), which take arrays
        guards=(guard,),
        redraw=redraw,
        explain=explain,
        renew=renew,
        sample_error=lambda: sketch.error(cp, c_out),
        reference=reference,
        stack=Stackable(
            a=gemm_operand(a, s.m, s.k, "float32"),
            b=gemm_operand(b, s.k, s.n, "float32"),
            c0=gemm_operand(c_in, s.m, s.n, "float32"),
            out=c_out,
            out_values=lambda xp, stored: stored,
            poison=lambda xp, stored: poison(xp, stored),
            alpha=ALPHA,
            beta=BETA,
        ),
    )


def sgemm_operands(cp: Any, point: Point, gemm: GemmOperands) -> tuple:
    """The FP32 ladder's arguments: A (M x K), B (K x N), C_in and C_out
    (M x N), all row-major float32 pointers, then M, N, K, alpha and beta."""
    s = point.shape
    pointers = (gemm.a.data.ptr, gemm.b.data.ptr, gemm.c_in.data.ptr, gemm.c_out.data.ptr)
    return (*pointers, np.int32(s.m), np.int32(s.n), np.int32(s.k), np.float32(gemm.alpha), np.float32(gemm.beta))


def sgemm_device_bytes(point: Point) -> int:
    """Device memory prepare_sgemm needs at its peak: A, B, C_in, C_out and the
    library's output in float32; float64 copies of A, B and C_in, the product
    and the reference."""
    s = point.shape
    elems = s.m * s.k + s.k * s.n + 3 * s.m * s.n
    return elems * (4 + 8) + guard_bytes(s.n * 4)


SGEMM = Problem("sgemm", prepare_sgemm, sgemm_device_bytes, operands=sgemm_operands)
