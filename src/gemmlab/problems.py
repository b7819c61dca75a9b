"""What "running a kernel" means for each kind of problem: the inputs it
needs, the arguments it takes, the reference it is checked against and the
library routine it is compared with. The runner knows none of these details.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gemmlab.catalogue import Point

# ||C - C_ref|| / ||C_ref|| bounds per dtype. float32 with float32 accumulation
# over K terms lands near sqrt(K) * 2^-24 relative error (about 1e-6 at K = 16384);
# 1e-5 leaves room without letting a wrong index through (those give errors of
# order 1). int32 must be exact.
#
# Tensor-core types (gemmlab.tensor): the reference is computed from the exact
# values of the stored bf16/fp16 inputs, so only the FP32 accumulation errs;
# 1e-4 leaves room for the tensor cores' accumulation order. tf32 inputs keep
# 10 mantissa bits (unit roundoff 2^-11 rounded, 2^-10 truncated): a relative
# error of about 1e-3 per product, so 4e-3. "bfloat16-out" rounds each sum to
# bfloat16 (unit roundoff 2^-9, about 2e-3 at most, about 1e-3 on average over
# uniformly spread roundings), so 4e-3 as well.
TOLERANCE = {
    "float32": 1e-5, "float64": 1e-12, "int32": 0.0,
    "bfloat16": 1e-4, "float16": 1e-4, "tf32": 4e-3, "bfloat16-out": 4e-3,
}  # fmt: skip

# int32 inputs are drawn from [-INT_RANGE, INT_RANGE] so that every dot product
# (at most K * INT_RANGE^2 = 16384 * 10^4 < 2^31) fits in int32 and is exact in
# the float64 reference; wrap-around never happens, so the check is exact.
INT_RANGE = 100


@dataclass
class Prepared:
    """Device buffers for one point, ready to launch and check."""

    args: tuple
    poison: Callable[[], None]
    error: Callable[[], float]
    baseline: Callable[[], None] | None  # the library routine for the same work
    baseline_name: str | None
    # Every device array the kernel reads or writes. The launch arguments are raw
    # pointers, so without these references CuPy's pool could hand the memory to
    # the next temporary while the kernel still uses it.
    buffers: tuple[Any, ...]


def random_matrix(cp: Any, rng: Any, rows: int, cols: int, dtype: str) -> Any:
    if dtype == "int32":
        return rng.integers(-INT_RANGE, INT_RANGE + 1, size=(rows, cols), dtype=cp.int32)
    return rng.uniform(-1.0, 1.0, size=(rows, cols)).astype(dtype)


def relative_error(cp: Any, out: Any, ref: Any) -> float:
    """Frobenius-norm relative error in float64; NaN anywhere gives NaN."""
    diff = out.astype(cp.float64) - ref
    ref_norm = float(cp.linalg.norm(ref))
    err = float(cp.linalg.norm(diff))
    return err / ref_norm if ref_norm else err


def poison(cp: Any, out: Any) -> None:
    """Fill the output with a value no correct kernel writes."""
    if out.dtype.kind == "f":
        out.fill(cp.nan)
    else:
        out.fill(cp.iinfo(out.dtype).min)


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

    return Prepared(
        args=(a.data.ptr, b.data.ptr, c.data.ptr, _i32(s.m), _i32(s.n), _i32(s.k)),
        poison=lambda: poison(cp, c),
        error=lambda: relative_error(cp, c, ref),
        baseline=baseline,
        baseline_name="cuBLAS (CuPy matmul)" if baseline else None,
        buffers=(a, b, c, ref),
    )


def matmul_device_bytes(point: Point) -> int:
    """Device memory prepare_matmul needs: inputs, output, float64 copies and
    reference, and the library's output."""
    s = point.shape
    item = point.itemsize
    return (s.m * s.k + s.k * s.n + 2 * s.m * s.n) * item + (s.m * s.k + s.k * s.n + s.m * s.n) * 8


def _i32(value: int) -> Any:
    import numpy as np

    return np.int32(value)


@dataclass(frozen=True)
class Problem:
    """A kind of work: how to set it up on the device and how it is measured.

    ``metric`` names the headline figure: "gflops" for compute kernels, "gbs"
    (GB/s of bytes read + written) for memory-bound ones.
    """

    name: str
    prepare: Callable[[Any, Point, Any], Prepared]
    device_bytes: Callable[[Point], int]
    metric: str = "gflops"


MATMUL = Problem("matmul", prepare_matmul, matmul_device_bytes)
