"""Matmul, C = A.B or C = alpha*A.B + beta*C (the documents' kernels and
users' kernels): inputs, float64 reference, cuBLAS as the baseline.

A kernel that names ``alpha`` and ``beta`` among its arguments computes the
second form. C is then an input too: it is filled with random values C0, and
before every checked launch it is filled with C0 again instead of being
poisoned (the reference is alpha*A.B + beta*C0). The timed launches each
start from the last one's C; BETA = -0.75 keeps the values bounded, and the
values do not change the time. The scalars are float32 for the float types
(the way cuBLAS takes them with FP32 compute, whatever A and B are) and int32
for int32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.core.dtypes import SAME_TYPE_C_TOLERANCE, TOLERANCE
from gemmlab.problems.base import (
    Operand,
    Prepared,
    Problem,
    Sketch,
    Stackable,
    drawn,
    gemm_sketch,
    guard_bytes,
    guarded_empty,
    lower_precision,
    poison,
    poison_left,
    random_matrix,
    relative_error,
    rounded,
    storage,
    sum_magnitude,
    uniform_magnitude,
    values,
)

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


# The arguments of the catalogue's matmul kernels, in their order; a kernel
# may declare another order or a subset, ``n`` (the square size) when
# M = N = K, and the scalars of C = alpha*A.B + beta*C.
MATMUL_ARGUMENTS = ("A", "B", "C", "M", "N", "K")
SCALARS = ("alpha", "beta")
MATMUL_ARGUMENT_NAMES = (*MATMUL_ARGUMENTS, "n", *SCALARS)
# Non-trivial scalars: alpha != 1 and beta != 0 exercise both halves of the
# epilogue; both are exact in binary, so the float64 reference sees the same
# values. int32 takes whole ones, and 2 * K * INT_RANGE^2 + INT_RANGE still fits.
ALPHA = {"float": 1.5, "int32": 2}
BETA = {"float": -0.75, "int32": -1}

# cuda_runtime's cudaDataType values (library_types.h) and cuBLAS's
# operation and algorithm constants, for cublasGemmEx.
CUDA_TYPES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 14}
CUBLAS_OP_N, CUBLAS_GEMM_DEFAULT = 0, -1
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F = 68, 70


def scalars(dtype: str) -> tuple[Any, Any]:
    """alpha and beta as the kernel receives them."""
    if dtype == "int32":
        return np.int32(ALPHA["int32"]), np.int32(BETA["int32"])
    return np.float32(ALPHA["float"]), np.float32(BETA["float"])


def cublas_gemm(
    cp: Any, a: Any, b: Any, c: Any, dtype: str, alpha: float = 1.0, beta: float = 0.0
) -> Callable[[], None]:
    """C = alpha * A.B + beta * C in place (row-major, A M x K, B K x N, all
    of ``dtype``), as BLAS defines GEMM, with FP32 compute (CUBLAS_COMPUTE_32F:
    FFMA for float32; a TF32 baseline would not be a fair float32 comparison),
    or FP64 compute for float64. cuBLAS is column-major: it computes
    C^T = alpha * B^T . A^T + beta * C^T, where the row-major B, A and C read
    as column-major B^T (N x K), A^T (K x M) and C^T (N x M) with no copy."""
    from gemmlab.problems.cublas import gemm_ex

    m, k = a.shape
    n = b.shape[1]
    kind = CUDA_TYPES[dtype]
    wide = dtype == "float64"  # FP64 compute takes its scalars as doubles
    host = np.array([alpha, beta], np.float64 if wide else np.float32)  # host scalars, kept alive with the call
    compute = CUBLAS_COMPUTE_64F if wide else CUBLAS_COMPUTE_32F
    return gemm_ex(cp, (CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, host.ctypes.data, b.data.ptr, kind, n,
                        a.data.ptr, kind, k, host.ctypes.data + host.itemsize, c.data.ptr, kind, n,
                        compute, CUBLAS_GEMM_DEFAULT), keep=(host,))  # fmt: skip


def takes_scalars(point: Point) -> bool:
    """Whether the kernel computes C = alpha*A.B + beta*C (its declaration names the scalars)."""
    return bool(point.spec.arguments) and "beta" in point.spec.arguments  # type: ignore[operator]


def _exact(cp: Any, stored: Any, dtype: str) -> Any:
    """The float64 value of a stored array (every input type is exact in float64)."""
    return values(cp, stored, dtype).astype(cp.float64)


def rounded_input_products(cp: Any, a: Any, b: Any, alpha: float = 1.0, addend: Any = 0.0) -> dict[str, Any]:
    """alpha * A.B + addend (float32 A and B) computed from A and B rounded to
    float16 and to bfloat16: what a float32 kernel that converts its inputs
    computes. The products of two rounded values are exact in float32, and
    float32 sums err far less than the rounding, so float32 matmuls do. Only
    ever asked about a result already wrong."""
    return {
        dtype: alpha * (rounded(cp, a, dtype) @ rounded(cp, b, dtype)) + addend for dtype in ("float16", "bfloat16")
    }


def prepare_matmul(cp: Any, point: Point, rng: Any) -> Prepared:
    s, dtype = point.shape, point.dtype
    a = random_matrix(cp, rng, s.m, s.k, dtype)
    b = random_matrix(cp, rng, s.k, s.n, dtype)
    guard = guarded_empty(cp, (s.m, s.n), storage(cp, dtype))
    c = guard.inner
    with_scalars = takes_scalars(point)
    alpha, beta = scalars(dtype) if with_scalars else (1, 0)
    c0 = random_matrix(cp, rng, s.m, s.n, dtype) if with_scalars else None
    ref = cp.empty((s.m, s.n), dtype=cp.float64)
    scale = [0.0]  # sum_magnitude of this input set: the error's floor under a C that cancels
    sketch = Sketch(exact=dtype == "int32")

    def magnitude(exact_a: Any, exact_b: Any) -> float:
        if with_scalars:
            return sum_magnitude(cp, exact_a, exact_b, float(alpha), _exact(cp, c0, dtype), float(beta))
        return sum_magnitude(cp, exact_a, exact_b)

    def reference() -> None:
        # float64 on the same device (cuBLAS DGEMM), from the exact values of the stored inputs.
        exact_a, exact_b = _exact(cp, a, dtype), _exact(cp, b, dtype)
        cp.matmul(exact_a, exact_b, out=ref)
        if with_scalars:
            ref[...] = float(alpha) * ref + float(beta) * _exact(cp, c0, dtype)
        scale[0] = magnitude(exact_a, exact_b)

    def renew() -> None:
        # The sketch first, from the new values; the inputs written last, so
        # that they are in L2 as far as it holds them (the float64 work evicts).
        buffers = (a, b, *((c0,) if with_scalars else ()))
        drawn_now = [random_matrix(cp, rng, *array.shape, dtype) for array in buffers]
        exact_a, exact_b = _exact(cp, drawn_now[0], dtype), _exact(cp, drawn_now[1], dtype)
        addend = float(beta) * _exact(cp, drawn_now[2], dtype) if with_scalars else None
        floor = 0.0 if sketch.exact else uniform_magnitude(s.m, s.n, s.k, float(alpha), float(beta))
        gemm_sketch(cp, rng, sketch, exact_a, exact_b, alpha=float(alpha), addend=addend, magnitude=floor)
        for array, values_now in zip(buffers, drawn_now, strict=True):
            array[...] = values_now

    def redraw() -> None:
        renew()
        reference()

    def prime() -> None:
        if with_scalars:
            c[...] = c0
        else:
            poison(cp, c, dtype)

    def explain() -> str | None:
        found = poison_left(cp, values(cp, c, dtype))
        if found is None and dtype == "float32":
            addend = beta * c0 if with_scalars else 0.0
            products = lambda: rounded_input_products(cp, a, b, alpha, addend)
            found = lower_precision(cp, c, ref, TOLERANCE["float32"], products)
        return found

    reference()
    baseline, lib_out = _baseline(cp, a, b, c0, dtype, with_scalars)
    named = {
        "A": a.data.ptr, "B": b.data.ptr, "C": c.data.ptr, "M": np.int32(s.m), "N": np.int32(s.n), "K": np.int32(s.k),
    }  # fmt: skip
    if s.is_square:
        named["n"] = np.int32(s.n)
    if with_scalars:
        named["alpha"], named["beta"] = alpha, beta
    return Prepared(
        args=tuple(named[name] for name in MATMUL_ARGUMENTS),
        poison=prime,
        error=lambda: relative_error(cp, values(cp, c, dtype), ref, scale[0]),
        baseline=baseline,
        baseline_name=_baseline_name(dtype, with_scalars) if baseline else None,
        buffers=(a, b, c, ref, *(x for x in (c0, lib_out) if x is not None)),  # c keeps guard.whole alive
        named=named,
        arrays={"A": a, "B": b, "C": c},
        guards=(guard,),
        redraw=redraw,
        explain=explain,
        tolerance=SAME_TYPE_C_TOLERANCE.get(dtype),
        renew=renew,
        sample_error=lambda: sketch.error(cp, values(cp, c, dtype)),
        reference=reference,
        stack=Stackable(
            a=gemm_operand(a, s.m, s.k, dtype),
            b=gemm_operand(b, s.k, s.n, dtype),
            c0=gemm_operand(c0, s.m, s.n, dtype) if with_scalars else None,
            out=c,
            out_values=lambda xp, stored: values(xp, stored, dtype),
            poison=lambda xp, stored: poison(xp, stored, dtype),
            alpha=float(alpha),
            beta=float(beta),
            primed=with_scalars,
            exact=sketch.exact,
        ),
    )


def gemm_operand(array: Any, rows: int, cols: int, dtype: str) -> Operand:
    """An input of a GEMM problem stored in ``dtype``, drawn as random_matrix draws it."""
    draw = drawn(lambda xp, rng, r, c: random_matrix(xp, rng, r, c, dtype), rows, cols)
    return Operand(array, draw, lambda xp, stored: _exact(xp, stored, dtype))


def _baseline(
    cp: Any, a: Any, b: Any, c0: Any, dtype: str, with_scalars: bool
) -> tuple[Callable[[], None] | None, Any]:
    """cuBLAS doing the same work, and the array it writes: cublasGemmEx in the
    kernel's type, through gemmlab.problems.cublas, so that a short problem's
    baseline is captured into a CUDA graph as the kernel is (CuPy's matmul
    refuses capture, and its Python calls back to back timed the host: 17 to
    109 us for one 384-cubed SGEMM on an H100, where graph replays measure 8.3
    to 10.1 us; docs/dispatch.md, "Timing short problems"). int32 has none
    (cuBLAS has no int32 GEMM of this shape)."""
    if dtype not in CUDA_TYPES:
        return None, None
    lib_out = c0.copy() if with_scalars else cp.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    alpha, beta = (ALPHA["float"], BETA["float"]) if with_scalars else (1.0, 0.0)
    return cublas_gemm(cp, a, b, lib_out, dtype, alpha, beta), lib_out


def _baseline_name(dtype: str, with_scalars: bool) -> str:
    work = "same alpha and beta" if with_scalars else "C = A.B"
    return f"cuBLAS GemmEx {dtype}, {'FP64' if dtype == 'float64' else 'FP32'} compute ({work})"


def matmul_device_bytes(point: Point) -> int:
    """Device memory prepare_matmul needs: inputs, output and its guard bands,
    the library's output, C0 for alpha/beta, and in float64 the copies of the
    inputs and the reference."""
    s = point.shape
    item = point.itemsize
    c_copies = 3 if takes_scalars(point) else 2
    stored = (s.m * s.k + s.k * s.n + c_copies * s.m * s.n) * item + guard_bytes(s.n * item)
    return stored + (s.m * s.k + s.k * s.n + s.m * s.n) * 8


MATMUL = Problem("matmul", prepare_matmul, matmul_device_bytes)
