"""The memory-bound lab's problems: copy, transpose and vector addition, each
checked exactly against its own float64 result, with a library copy as baseline."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.problems.base import (
    Guarded,
    Prepared,
    Problem,
    guard_bytes,
    guarded_empty,
    poison,
    poison_left,
    random_matrix,
    redraw_matrix,
)

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


def _checks(cp: Any, rng: Any, point: Point, guard: Guarded, inputs: tuple[Any, ...], then: Any = None) -> dict:
    """The output's poison, guard bands and explanation, and the second input
    set: new values into ``inputs`` in place, then ``then`` (a reference to
    recompute); the others' references are the inputs themselves."""

    def redraw() -> None:
        for array in inputs:
            redraw_matrix(cp, rng, array, point.dtype)
        if then is not None:
            then()

    out = guard.inner
    return {
        "poison": lambda: poison(cp, out),
        "guards": (guard,),
        "redraw": redraw,
        "explain": lambda: poison_left(cp, out, guard.name),
    }


def prepare_copy(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.n, point.dtype)
    guard = guarded_empty(cp, a.shape, a.dtype, "the output")
    out = guard.inner
    lib_out = cp.empty_like(a)

    def baseline() -> None:
        lib_out.data.copy_from_device_async(a.data, a.nbytes)  # on the current (the runner's) stream

    return Prepared(
        args=_pointers_and_sizes((a, out), s.m, s.n),
        error=lambda: exact_error(cp, out, a),
        baseline=baseline,
        baseline_name="device-to-device memcpy (CuPy)",
        buffers=(a, out, lib_out),
        **_checks(cp, rng, point, guard, (a,)),
    )


def prepare_transpose(cp: Any, point: Point, rng: Any) -> Prepared:
    s = point.shape
    a = random_matrix(cp, rng, s.m, s.n, point.dtype)
    guard = guarded_empty(cp, (s.n, s.m), a.dtype, "the output")
    out = guard.inner
    lib_out = cp.empty_like(out)

    def baseline() -> None:
        # cp.ascontiguousarray(a.T) without the allocation: CuPy's strided copy kernel.
        cp.copyto(lib_out, a.T)

    return Prepared(
        args=_pointers_and_sizes((a, out), s.m, s.n),
        error=lambda: exact_error(cp, out, a.T),
        baseline=baseline,
        baseline_name="CuPy transpose copy (ascontiguousarray of a.T)",
        buffers=(a, out, lib_out),
        **_checks(cp, rng, point, guard, (a,)),
    )


def prepare_vecadd(cp: Any, point: Point, rng: Any) -> Prepared:
    length = point.shape.m * point.shape.n
    a = random_matrix(cp, rng, 1, length, point.dtype)
    b = random_matrix(cp, rng, 1, length, point.dtype)
    guard = guarded_empty(cp, a.shape, a.dtype, "c")
    c = guard.inner
    lib_out = cp.empty_like(a)
    # One rounded addition per element on both sides (IEEE round to nearest), so
    # the kernel must match CuPy's sum bit for bit.
    ref = a + b

    def reference() -> None:
        cp.add(a, b, out=ref)

    def baseline() -> None:
        cp.add(a, b, out=lib_out)

    return Prepared(
        args=_pointers_and_sizes((a, b, c), length),
        error=lambda: exact_error(cp, c, ref),
        baseline=baseline,
        baseline_name="CuPy add",
        buffers=(a, b, c, lib_out, ref),
        **_checks(cp, rng, point, guard, (a, b), reference),
    )


def matrix_device_bytes(point: Point) -> int:
    """Input, output and library output, the float64 draw of the random input
    and the boolean mask of the comparison, and the output's guard bands."""
    elems = point.shape.m * point.shape.n
    return elems * (3 * point.itemsize + 8 + 1) + guard_bytes(max(point.shape.m, point.shape.n) * point.itemsize)


def vecadd_device_bytes(point: Point) -> int:
    """a, b, c, the reference and the library output, a float64 draw, the
    mask, and c's guard bands."""
    elems = point.shape.m * point.shape.n
    return elems * (5 * point.itemsize + 8 + 1) + guard_bytes(elems * point.itemsize)


COPY = Problem("copy", prepare_copy, matrix_device_bytes, metric="gbs")
TRANSPOSE = Problem("transpose", prepare_transpose, matrix_device_bytes, metric="gbs")
VECADD = Problem("vecadd", prepare_vecadd, vecadd_device_bytes, metric="gbs")
