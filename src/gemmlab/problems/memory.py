"""The memory-bound lab's problems: copy, transpose and vector addition, each
checked exactly against its own float64 result, with a library copy as baseline."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.problems.base import Prepared, Problem, poison, random_matrix

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


def exact_error(cp: Any, out: Any, ref: Any) -> float:
    """0.0 when ``out`` equals ``ref`` element for element, else 1.0.

    Copies, transposes and single additions are exact, so any difference is a
    bug. A fraction of wrong elements is not returned: the runner compares with
    the dtype's tolerance (1e-5 for float32), under which a few wrong elements
    of a large matrix would pass. NaN (the poison) never equals anything.
    """
    return 0.0 if bool(cp.all(out == ref)) else 1.0


def _pointers_and_sizes(arrays: Iterable[Any], *sizes: int) -> tuple:
    return (*(a.data.ptr for a in arrays), *(np.int32(s) for s in sizes))


def prepare_copy(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.n, point.dtype)
    out = cp.empty_like(a)
    lib_out = cp.empty_like(a)

    def baseline() -> None:
        lib_out.data.copy_from_device_async(a.data, a.nbytes)  # on the current (the runner's) stream

    return Prepared(
        args=_pointers_and_sizes((a, out), s.m, s.n),
        poison=lambda: poison(cp, out),
        error=lambda: exact_error(cp, out, a),
        baseline=baseline,
        baseline_name="device-to-device memcpy (CuPy)",
        buffers=(a, out, lib_out),
    )


def prepare_transpose(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.n, point.dtype)
    out = cp.empty((s.n, s.m), dtype=point.dtype)
    lib_out = cp.empty_like(out)

    def baseline() -> None:
        # cp.ascontiguousarray(a.T) without the allocation: CuPy's strided copy kernel.
        cp.copyto(lib_out, a.T)

    return Prepared(
        args=_pointers_and_sizes((a, out), s.m, s.n),
        poison=lambda: poison(cp, out),
        error=lambda: exact_error(cp, out, a.T),
        baseline=baseline,
        baseline_name="CuPy transpose copy (ascontiguousarray of a.T)",
        buffers=(a, out, lib_out),
    )


def prepare_vecadd(cp: Any, point: Point, rng: Any) -> Prepared:
    length = point.shape.m * point.shape.n
    a = random_matrix(cp, rng, 1, length, point.dtype)
    b = random_matrix(cp, rng, 1, length, point.dtype)
    c = cp.empty_like(a)
    lib_out = cp.empty_like(a)
    # One rounded addition per element on both sides (IEEE round to nearest), so
    # the kernel must match CuPy's sum bit for bit.
    ref = a + b

    def baseline() -> None:
        cp.add(a, b, out=lib_out)

    return Prepared(
        args=_pointers_and_sizes((a, b, c), length),
        poison=lambda: poison(cp, c),
        error=lambda: exact_error(cp, c, ref),
        baseline=baseline,
        baseline_name="CuPy add",
        buffers=(a, b, c, lib_out, ref),
    )


def matrix_device_bytes(point: Point) -> int:
    """Input, output and library output, the float64 draw of the random input
    and the boolean mask of the comparison."""
    elems = point.shape.m * point.shape.n
    return elems * (3 * point.itemsize + 8 + 1)


def vecadd_device_bytes(point: Point) -> int:
    """a, b, c, the reference and the library output, a float64 draw and the mask."""
    elems = point.shape.m * point.shape.n
    return elems * (5 * point.itemsize + 8 + 1)


COPY = Problem("copy", prepare_copy, matrix_device_bytes, metric="gbs")
TRANSPOSE = Problem("transpose", prepare_transpose, matrix_device_bytes, metric="gbs")
VECADD = Problem("vecadd", prepare_vecadd, vecadd_device_bytes, metric="gbs")
