"""CPU baselines: what the GPU kernels are compared with in the Kursk paper.

- ``cpu_naive``: the textbook i-j-k triple loop, one thread. B is walked down
  a column in the inner loop, so nearly every load of B misses the cache
  once the matrices outgrow it; this is the paper's "в лоб" CPU column.
- ``cpu_blocked``: the cache-optimised single-thread version the paper cites
  (5-6 GFLOPS in its text): loops in i-k-j order, so the inner loop walks a
  row of B and a row of C contiguously (and LLVM vectorises it), tiled in
  ``CPU_TILE`` blocks so that the three tiles in use stay in the L1/L2 cache.
- ``cpu_blas``: numpy's ``a @ b``, which for float32 is the installed BLAS on
  every core: today's practical ceiling on the host. numpy has no BLAS path
  for integers, so int32 goes through numpy's own single-thread loop.

The first two are compiled with numba (no ``parallel``); the compile happens
in a warm-up call on a tiny problem, outside every timing. Every run is
checked against a float64 reference with the same tolerances as the GPU
kernels (``problems.TOLERANCE``), on an output poisoned first.

They are kernels like the others on the command line: `gemmlab run cpu_naive
--size 512`, `gemmlab sweep --kernels cpu_naive,tiled`, and `gemmlab kernels`
lists them (with :func:`needs`) in a table of their own. A shape whose
matrices and reference would not fit in the host's memory is refused before
anything is allocated (:func:`memory_violation`).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gemmlab.core.dtypes import DTYPE_ITEMSIZE, TOLERANCE
from gemmlab.core.environment import host_record
from gemmlab.core.errors import ConstraintError, UnknownName, VerificationError
from gemmlab.core.extras import MissingExtra
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing, gbytes_per_s, gflops, planned_reps
from gemmlab.problems.base import poison, random_matrix, relative_error

CPU_KERNELS = {
    "cpu_naive": "single-thread i-j-k triple loop (numba)",
    "cpu_blocked": "single-thread cache-blocked i-k-j loop (numba)",
    "cpu_blas": "numpy a @ b (multithreaded BLAS for float32)",
}
# Where each comes from, for `gemmlab kernels`.
CPU_SOURCE_DOC = {
    "cpu_naive": "Kursk 2014 paper: its CPU column",
    "cpu_blocked": "Kursk 2014 paper: the cache-optimised CPU version its text cites",
    "cpu_blas": "gemmlab: today's practical ceiling on the host",
}
# The baselines that numba compiles: they need the cpu extra.
NUMBA_KERNELS = ("cpu_naive", "cpu_blocked")
CPU_DTYPES = ("float32", "int32")
# Three 64 x 64 float32 tiles take 48 KiB: about an L1 and a half, well inside L2.
CPU_TILE = 64
# A rough speed of each baseline on a desktop core (cpu_blas on all of them), only
# for planning repetitions: a 4096^3 cpu_naive run takes minutes, not milliseconds.
ASSUMED_FLOPS = {"cpu_naive": 0.5e9, "cpu_blocked": 5e9, "cpu_blas": 100e9}
# How a call is timed: the host's monotonic clock around it (no GPU events here).
TIMED_BY = "the host's clock around each call"
NUMBA_FIX = "Install gemmlab's cpu extra: `pip install 'gemmlab[cpu]'`; cpu_blas needs only numpy."
# A run holds A, B and C in their type and A, B and the reference in float64
# (the reference is computed from float64 copies), all at once.
FLOAT64_BYTES = 8


def numba_installed() -> bool:
    """Whether numba can be imported, without importing it (that takes a second)."""
    return importlib.util.find_spec("numba") is not None


def needs(kernel_id: str) -> list[str]:
    """What the baseline needs, in words (`gemmlab kernels`)."""
    found = ["host memory for A, B, C and a float64 reference"]
    if kernel_id in NUMBA_KERNELS:
        missing = "" if numba_installed() else ", not installed: pip install 'gemmlab[cpu]'"
        found.append(f"numba (the cpu extra{missing})")
    return found


def host_memory_bytes() -> int:
    """This host's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def bytes_needed(shape: Shape, dtype: str) -> int:
    """The host memory one run of ``shape`` holds at once (see FLOAT64_BYTES)."""
    a, b, c = shape.m * shape.k, shape.k * shape.n, shape.m * shape.n
    return (a + b + c) * (DTYPE_ITEMSIZE[dtype] + FLOAT64_BYTES)


def largest_square(dtype: str, memory: int) -> int:
    """The largest square size whose run fits in ``memory`` bytes."""
    return math.isqrt(memory // (3 * (DTYPE_ITEMSIZE[dtype] + FLOAT64_BYTES)))


def memory_violation(shape: Shape, dtype: str) -> str | None:
    """Why ``shape`` cannot run on this host for lack of memory, or None."""
    memory = host_memory_bytes()
    needed = bytes_needed(shape, dtype)
    if needed <= memory:
        return None
    return (
        f"{shape} in {dtype} needs {needed / 1e9:,.1f} GB of host memory (A, B, C and a float64 reference), "
        f"more than this host's {memory / 1e9:,.1f} GB; the largest square size that fits is "
        f"{largest_square(dtype, memory):,}"
    )


@functools.cache
def _compiled() -> dict[str, Callable[..., None]]:
    """The numba kernels, compiled lazily (importing numba takes a second)."""
    try:
        from numba import njit
    except ImportError as exc:
        raise MissingExtra(
            f"numba is not installed ({exc}), so {' and '.join(NUMBA_KERNELS)} cannot run.", NUMBA_FIX
        ) from None

    @njit(cache=False)
    def naive(a: Any, b: Any, c: Any, zero: Any) -> None:
        m, kk = a.shape
        n = b.shape[1]
        for i in range(m):
            for j in range(n):
                # ``zero`` has the matrices' type, so float32 accumulates in float32
                # as the paper's C loop did.
                acc = zero
                for p in range(kk):
                    acc += a[i, p] * b[p, j]
                c[i, j] = acc

    @njit(cache=False)
    def blocked(a: Any, b: Any, c: Any, zero: Any, tile: int) -> None:
        m, kk = a.shape
        n = b.shape[1]
        c[:, :] = zero
        for i0 in range(0, m, tile):
            for p0 in range(0, kk, tile):
                for j0 in range(0, n, tile):
                    j1 = min(j0 + tile, n)
                    for i in range(i0, min(i0 + tile, m)):
                        # Row slices rather than c[i, j]: with 2-D indexing numba
                        # keeps a negative-index check in the inner loop and LLVM
                        # does not vectorise it (3x slower here).
                        c_row = c[i, j0:j1]
                        for p in range(p0, min(p0 + tile, kk)):
                            a_ip = a[i, p]
                            b_row = b[p, j0:j1]
                            for j in range(c_row.shape[0]):
                                c_row[j] += a_ip * b_row[j]

    return {
        "cpu_naive": lambda a, b, c: naive(a, b, c, c.dtype.type(0)),
        "cpu_blocked": lambda a, b, c: blocked(a, b, c, c.dtype.type(0), CPU_TILE),
    }


def _function(kernel_id: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    if kernel_id == "cpu_blas":
        return lambda a, b, c: np.matmul(a, b, out=c)
    return _compiled()[kernel_id]


def check(kernel_id: str, shape: Shape, dtype: str) -> None:
    """UnknownName or ConstraintError, before anything is allocated, for a point that cannot run."""
    if kernel_id not in CPU_KERNELS:
        raise UnknownName(f"Unknown CPU baseline '{kernel_id}'.", f"The CPU baselines are {', '.join(CPU_KERNELS)}.")
    if dtype not in CPU_DTYPES:
        raise ConstraintError(f"{kernel_id} has no {dtype} version.", f"It takes {', '.join(CPU_DTYPES)}.")
    if too_big := memory_violation(shape, dtype):
        raise ConstraintError(f"{kernel_id} cannot run {shape}: {too_big}.", "Pick a smaller size.")


class CpuBackend:
    """The CPU baselines as a host backend (:class:`gemmlab.backends.base.HostBackend`)."""

    name = "cpu"
    on_host = True

    def kernel_ids(self) -> tuple[str, ...]:
        return tuple(CPU_KERNELS)

    def dtypes(self, kernel_id: str) -> tuple[str, ...]:
        return CPU_DTYPES

    def block_edges(self, kernel_id: str) -> tuple[int, ...]:
        return (0,)

    def violations(self, kernel_id: str, shape: Shape, block_edge: int, dtype: str) -> list[str]:
        if dtype not in CPU_DTYPES:
            return [f"{kernel_id} has no {dtype} version"]
        problems = [too_big] if (too_big := memory_violation(shape, dtype)) else []
        # Refused at planning rather than failed at each point: reproduce's CPU
        # experiment then lists what it left out and how to get it, and stores no failures.
        if kernel_id in NUMBA_KERNELS and not numba_installed():
            problems.append(f"numba is not installed. {NUMBA_FIX}")
        return problems

    def predicted_ms(self, kernel_id: str, shape: Shape, block_edge: int) -> float:
        return 2 * shape.m * shape.n * shape.k / ASSUMED_FLOPS[kernel_id] * 1e3

    def analytic_cgma(self, kernel_id: str, shape: Shape, block_edge: int) -> float | None:
        return None  # a CPU loop's loads go through caches the model does not describe

    def measure(
        self, kernel_id: str, shape: Shape, dtype: str, *, reps: int, max_seconds: float, seed: int | None = None
    ) -> dict:
        return run_cpu(kernel_id, shape, dtype, reps=reps, max_seconds=max_seconds, seed=seed)


BACKEND = CpuBackend()


def run_cpu(
    kernel_id: str,
    shape: Shape,
    dtype: str = "float32",
    *,
    reps: int = 5,
    max_seconds: float = 10.0,
    seed: int | None = None,
) -> dict:
    """Verify and time one CPU baseline; returns a result dict the store takes.

    The repetitions after the first are cut so that the series stays near
    ``max_seconds`` (at least 3 in all), as on the GPU.
    """
    check(kernel_id, shape, dtype)
    fn = _function(kernel_id)
    # Compile (numba) or warm the BLAS threads on a tiny problem first.
    tiny = np.ones((8, 8), dtype=dtype)
    fn(tiny, tiny, np.empty_like(tiny))

    rng = np.random.default_rng(seed)
    a = random_matrix(np, rng, shape.m, shape.k, dtype)
    b = random_matrix(np, rng, shape.k, shape.n, dtype)
    c = np.empty((shape.m, shape.n), dtype=dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tolerance = TOLERANCE[dtype]

    first = _timed(fn, a, b, c)
    error = _verified(relative_error(np, c, ref), tolerance, kernel_id, shape, dtype, "first call")
    samples = [first] + [_timed(fn, a, b, c) for _ in range(planned_reps(first, reps, max_seconds) - 1)]
    error = max(error, _verified(relative_error(np, c, ref), tolerance, kernel_id, shape, dtype, "after timing"))

    timing = Timing.of(samples)
    flops = 2 * shape.m * shape.n * shape.k
    nbytes = (shape.m * shape.k + shape.k * shape.n + shape.m * shape.n) * DTYPE_ITEMSIZE[dtype]
    warnings = []
    if kernel_id == "cpu_blas":
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        warnings.append(
            f"multithreaded ({threads} cores available)"
            if dtype == "float32"
            else "numpy has no BLAS for int32: its own single-thread loop"
        )
    return {
        "kernel": kernel_id,
        "m": shape.m,
        "n": shape.n,
        "k": shape.k,
        "block_edge": 0,
        "dtype": dtype,
        "variant": "",
        "backend": BACKEND.name,
        "timing": timing,
        "timing_method": TIMED_BY,
        "gflops": gflops(flops, timing.median_ms),
        "gbytes_per_s": gbytes_per_s(nbytes, timing.median_ms),
        "error": error,
        "tolerance": tolerance,
        "metric": "gflops",
        "host": host_record(),
        "warnings": warnings,
    }


def _timed(fn: Callable[..., None], a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    poison(np, c)
    start = time.perf_counter()
    fn(a, b, c)
    return (time.perf_counter() - start) * 1e3


def _verified(error: float, tolerance: float, kernel_id: str, shape: Shape, dtype: str, when: str) -> float:
    if not error <= tolerance:  # NaN fails
        raise VerificationError(
            f"{kernel_id} gave a wrong result on {shape} ({dtype}, {when}): relative error {error:.3g}, "
            f"tolerance {tolerance:.3g}.",
            "No timing is reported for a wrong result; please report this with the command you ran.",
        )
    return error
