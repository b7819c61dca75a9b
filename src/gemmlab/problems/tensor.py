"""GEMM on the tensor cores, C = A . B^T (A M x K, B N x K, both K-major):
inputs stored as bfloat16/float16/tf32 with their exact float64 values, the
float64 reference, TMA tensor maps for the Hopper rungs, and cuBLAS GemmEx in
the same types and layout."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.core.dtypes import input_type
from gemmlab.problems.base import (
    GemmOperands,
    Operand,
    Prepared,
    Problem,
    Sketch,
    Stackable,
    bf16_bits,
    drawn,
    gemm_sketch,
    guard_bytes,
    guarded_empty,
    poison,
    poison_left,
    relative_error,
    values,
)

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


DTYPES_16 = ("bfloat16", "float16")
DTYPES = (*DTYPES_16, "tf32")
BF16_OUT = "bfloat16-out"
# One swizzled shared-memory row of the mma.sync and Hopper rungs: 128 bytes
# of K (64 16-bit elements, 32 tf32), the span of the tensor maps' SWIZZLE_128B.
# The CUDA code states it once too (TMA_ROW_BYTES in tma.cuh, MMA_BK
# 16-bit elements in mma_tiles.cuh); tests/test_tensor.py checks they agree.
ROW_BYTES = 128
# cuda_runtime's cudaDataType values (library_types.h) for cublasGemmEx.
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_GEMM_DEFAULT = 0, 1, -1


def input_dtype(dtype: str) -> str:
    """The type of A and B: ``bfloat16-out`` differs from bfloat16 in C alone."""
    return input_type(dtype)


def _stored(cp: Any, rng: Any, rows: int, cols: int, dtype: str) -> Any:
    """A random rows x cols operand as the kernel reads it (tf32: float32 in
    memory; the rounding to tf32 is the kernel's, and the error budget's)."""
    x = rng.uniform(-1.0, 1.0, size=(rows, cols)).astype(cp.float32)
    dtype = input_dtype(dtype)
    if dtype == "bfloat16":
        return bf16_bits(cp, x)
    return x.astype(cp.float16) if dtype == "float16" else x


def _exact(cp: Any, stored: Any, dtype: str) -> Any:
    """The float64 value of a stored operand: what its bits mean, for the reference."""
    return values(cp, stored, input_dtype(dtype)).astype(cp.float64)


def _tensor_map(array: Any, box_rows: int, bfloat16: bool) -> Any:
    """A TMA descriptor of a row-major 2-D array: boxes of box_rows rows x
    128 bytes, in shared memory with the 128-byte swizzle. ``bfloat16``: the
    uint16 array holds bfloat16 bit patterns (otherwise its type says)."""
    from cuda.core._tensor_map import TensorMapDataType, TensorMapSwizzle
    from cuda.core.utils import StridedMemoryView

    view = StridedMemoryView.from_cuda_array_interface(array, stream_ptr=-1)
    data_type = TensorMapDataType.BFLOAT16 if bfloat16 else None
    return view.as_tensor_map(
        box_dim=(box_rows, ROW_BYTES // array.itemsize), data_type=data_type, swizzle=TensorMapSwizzle.SWIZZLE_128B
    )


def cublas_gemm(cp: Any, a: Any, b: Any, c: Any, dtype: str) -> Callable[[], None]:
    """C (M x N, float32, or bfloat16 for ``bfloat16-out``) = A (M x K) .
    B (N x K)^T through cublasGemmEx, in the kernels' types and layout. cuBLAS
    is column-major: it computes C^T (N x M) = B . A^T, reading the row-major
    B (N x K) as a transposed K x N."""
    from cupy_backends.cuda.libs import cublas

    from gemmlab.problems.cublas import gemm_ex

    m, k = a.shape
    n = b.shape[0]
    in_type = {"bfloat16": CUDA_R_16BF, "float16": CUDA_R_16F, "tf32": CUDA_R_32F}[input_dtype(dtype)]
    out_type = CUDA_R_16BF if dtype == BF16_OUT else CUDA_R_32F
    compute = cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if dtype == "tf32" else cublas.CUBLAS_COMPUTE_32F
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)  # host scalars, kept alive with the call
    return gemm_ex(cp, (CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, one.ctypes.data, b.data.ptr, in_type, k,
                        a.data.ptr, in_type, k, zero.ctypes.data, c.data.ptr, out_type, n, compute,
                        CUBLAS_GEMM_DEFAULT), keep=(one, zero))  # fmt: skip


def baseline_name(dtype: str) -> str:
    kind = "TF32 (CUBLAS_COMPUTE_32F_FAST_TF32)" if dtype == "tf32" else f"{input_dtype(dtype)}, FP32 accumulation"
    return f"cuBLAS GemmEx {kind}, {'bfloat16' if dtype == BF16_OUT else 'float32'} C"


def prepare_tensor(
    cp: Any, point: Point, rng: Any, boxes: tuple[int, int] | None = None, c_box_rows: int = 0
) -> Prepared:
    """Inputs, output, reference and baseline for one point. ``boxes``: rows of
    the TMA boxes of A and B, for the rungs that take tensor maps;
    ``c_box_rows``: those of C, for the rungs that store C by TMA (0: C is a
    pointer)."""
    s, dtype = point.shape, point.dtype
    a = _stored(cp, rng, s.m, s.k, dtype)
    b = _stored(cp, rng, s.n, s.k, dtype)
    bf16_c = dtype == BF16_OUT
    guard = guarded_empty(cp, (s.m, s.n), cp.uint16 if bf16_c else cp.float32)
    c = guard.inner
    ref = cp.empty((s.m, s.n), dtype=cp.float64)
    sketch = Sketch()

    def reference() -> None:
        # float64 on the same device (cuBLAS DGEMM), from the exact values of the stored inputs.
        cp.matmul(_exact(cp, a, dtype), _exact(cp, b, dtype).T, out=ref)

    def renew() -> None:
        # In place (the tensor maps hold the addresses of a and b), after the
        # sketch: the inputs written last are warm in L2.
        new_a, new_b = _stored(cp, rng, s.m, s.k, dtype), _stored(cp, rng, s.n, s.k, dtype)
        gemm_sketch(cp, rng, sketch, _exact(cp, new_a, dtype), _exact(cp, new_b, dtype), b_transposed=True)
        a[...], b[...] = new_a, new_b

    def redraw() -> None:
        renew()
        reference()

    reference()
    lib_out = cp.empty_like(c)
    args = tensor_operands(cp, point, GemmOperands(a, b, c, c), boxes=boxes, c_box_rows=c_box_rows)
    operands, c_arg = args[:2], args[2]
    c_type = "bfloat16" if bf16_c else "float32"
    return Prepared(
        args=args,
        poison=lambda: poison(cp, c, c_type),
        error=lambda: relative_error(cp, values(cp, c, c_type), ref),
        baseline=cublas_gemm(cp, a, b, lib_out, dtype),
        baseline_name=baseline_name(dtype),
        buffers=(a, b, c, ref, lib_out, *operands, c_arg),  # c keeps its whole allocation (guard.whole) alive
        arrays={"A": a, "B": b, "C": c},  # for the peer rungs (kernels/peers), which take arrays
        guards=(guard,),
        redraw=redraw,
        explain=lambda: poison_left(cp, values(cp, c, c_type)),
        renew=renew,
        sample_error=lambda: sketch.error(cp, values(cp, c, c_type)),
        reference=reference,
        stack=Stackable(
            a=_operand(a, s.m, s.k, dtype),
            b=_operand(b, s.n, s.k, dtype),
            out=c,
            out_values=lambda xp, stored: values(xp, stored, c_type),
            poison=lambda xp, stored: poison(xp, stored, c_type),
            b_transposed=True,
        ),
    )


def _operand(array: Any, rows: int, cols: int, dtype: str) -> Operand:
    draw = drawn(lambda xp, rng, r, c: _stored(xp, rng, r, c, dtype), rows, cols)
    return Operand(array, draw, lambda xp, stored: _exact(xp, stored, dtype))


def tensor_operands(
    cp: Any, point: Point, gemm: GemmOperands, boxes: tuple[int, int] | None = None, c_box_rows: int = 0
) -> tuple:
    """The tensor-core ladder's arguments: A (M x K) and B (N x K), pointers or
    TMA tensor maps with boxes of ``boxes`` rows; C (M x N), a pointer or, for
    ``c_box_rows``, a tensor map; then M, N and K. The kernels compute
    C = A.B^T and take no alpha, beta or input C (``gemm.c_out`` is C)."""
    s = point.shape
    bf16_in = input_dtype(point.dtype) == "bfloat16"
    if boxes is None:
        operands: tuple[Any, ...] = (gemm.a.data.ptr, gemm.b.data.ptr)
    else:
        operands = (_tensor_map(gemm.a, boxes[0], bf16_in), _tensor_map(gemm.b, boxes[1], bf16_in))
    c = gemm.c_out
    c_arg = _tensor_map(c, c_box_rows, point.dtype == BF16_OUT) if c_box_rows else c.data.ptr
    return (*operands, c_arg, np.int32(s.m), np.int32(s.n), np.int32(s.k))


def tensor_device_bytes(point: Point) -> int:
    """Peak device memory of prepare_tensor: float32 staging of A and B, the
    stored inputs, their float64 values, the reference, C and cuBLAS's C."""
    s = point.shape
    inputs = s.m * s.k + s.n * s.k
    return inputs * (4 + point.itemsize + 8) + s.m * s.n * (8 + 4 + 4) + guard_bytes(s.n * 4)


TENSOR = Problem("tensor", prepare_tensor, tensor_device_bytes, operands=tensor_operands)
