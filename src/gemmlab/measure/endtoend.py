"""End-to-end time of a GPU product, as the Kursk paper measures it:

    P = 2 N^3 / (t_host->device + t_kernel + t_device->host)

``t_kernel`` is the verified median that :func:`gemmlab.measure.run.run` measures.
The copies are timed here with CUDA events on one stream: A and B in, C out,
from pinned (page-locked) host memory, which the copy engine reads directly,
and from ordinary pageable memory, which the driver first stages through a
pinned buffer of its own (the paper's programs used pageable ``malloc``
memory). The copied data are checked too: the product of what arrived on the
device, copied back, must match a float64 product computed on the host from
the same host arrays.

The kernel itself is not launched on the copied buffers: run() owns the
launch and has no way yet to take caller-owned inputs. Its own check (fresh
inputs, poisoned output, float64 reference) covers the kernel, this module
covers the transfers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gemmlab.core.dtypes import TOLERANCE
from gemmlab.core.errors import VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.problems.base import poison, random_matrix, relative_error

HOST_MEMORY = ("pinned", "pageable")


def measure(
    kernel_id: str,
    shape: Shape,
    block_edge: int | None = None,
    dtype: str | None = None,
    *,
    host_memory: Sequence[str] = HOST_MEMORY,
    reps: int = 20,
    warmup: int = 2,
    max_seconds: float = 10.0,
    copy_reps: int = 5,
    seed: int | None = None,
    kernel_runner: Callable[..., Any] | None = None,
) -> list[dict]:
    """One result row per host-memory kind (``variant`` = the kind), each with
    the kernel's own figures plus ``h2d_ms``, ``d2h_ms``, ``e2e_gflops`` and
    ``host_memory``."""
    if kernel_runner is None:
        from gemmlab.measure.run import run

        kernel_runner = run
    for kind in host_memory:
        if kind not in HOST_MEMORY:
            raise ValueError(f"host memory must be one of {HOST_MEMORY}, not {kind!r}")
    result = kernel_runner(
        kernel_id, shape, block_edge, dtype, reps=reps, warmup=warmup, max_seconds=max_seconds, baseline=False,
        seed=seed,
    )  # fmt: skip
    base = result.to_dict()  # the store flattens it (gemmlab.store.store.result_row)
    flops = 2 * shape.m * shape.n * shape.k
    rows = []
    for kind in host_memory:
        h2d, d2h = time_copies(shape, result.dtype, kind, reps=copy_reps, seed=seed)
        row = dict(base)
        row.update(
            variant=kind,
            host_memory=kind,
            h2d_ms=h2d.median_ms,
            d2h_ms=d2h.median_ms,
            e2e_gflops=e2e_gflops(flops, h2d.median_ms, result.timing.median_ms, d2h.median_ms),
        )
        rows.append(row)
    return rows


def e2e_gflops(flops: int, h2d_ms: float, kernel_ms: float, d2h_ms: float) -> float:
    """The Kursk paper's P: work over the time of copies in, kernel and copy out."""
    return flops / ((h2d_ms + kernel_ms + d2h_ms) * 1e-3) / 1e9


def time_copies(
    shape: Shape, dtype: str, host_memory: str, *, reps: int = 5, seed: int | None = None
) -> tuple[Timing, Timing]:
    """Times of copying A and B to the device and C back, ``reps`` times each."""
    from gemmlab.core import gpu

    cp = gpu.cupy()
    rng = np.random.default_rng(seed)
    host_a = _host_array(cp, (shape.m, shape.k), dtype, host_memory)
    host_b = _host_array(cp, (shape.k, shape.n), dtype, host_memory)
    host_c = _host_array(cp, (shape.m, shape.n), dtype, host_memory)
    host_a[...] = random_matrix(np, rng, shape.m, shape.k, dtype)
    host_b[...] = random_matrix(np, rng, shape.k, shape.n, dtype)
    dev_a = cp.empty(host_a.shape, dtype=dtype)
    dev_b = cp.empty(host_b.shape, dtype=dtype)
    dev_c = cp.empty(host_c.shape, dtype=dtype)
    stream = cp.cuda.Stream(non_blocking=True)
    start, end = cp.cuda.Event(), cp.cuda.Event()

    def elapsed() -> float:
        end.synchronize()
        return float(cp.cuda.get_elapsed_time(start, end))

    h2d, d2h = [], []
    with stream:
        for _ in range(max(1, reps)):
            dev_a.fill(0)
            dev_b.fill(0)
            start.record(stream)
            dev_a.set(host_a, stream=stream)
            dev_b.set(host_b, stream=stream)
            end.record(stream)
            h2d.append(elapsed())
            cp.matmul(dev_a, dev_b, out=dev_c)
            poison(np, host_c)
            start.record(stream)
            dev_c.get(stream=stream, out=host_c)
            end.record(stream)
            d2h.append(elapsed())
    reference = host_a.astype(np.float64) @ host_b.astype(np.float64)
    error = relative_error(np, host_c, reference)
    if not error <= TOLERANCE[dtype]:  # NaN fails
        raise VerificationError(
            f"The {host_memory} round trip of {shape} ({dtype}) came back wrong: relative error {error:.3g}.",
            "No end-to-end time is reported for it; please report this with the command you ran.",
        )
    return Timing.of(h2d), Timing.of(d2h)


def _host_array(cp: Any, shape: tuple[int, int], dtype: str, host_memory: str) -> np.ndarray:
    if host_memory == "pinned":
        import cupyx

        return cupyx.empty_pinned(shape, dtype=dtype)
    return np.empty(shape, dtype=dtype)
