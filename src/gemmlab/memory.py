"""The memory-bound lab: vector addition, copies and transposes, measured in GB/s.

The 2014 Brno lecture measured these on a GTX 280 (4000 x 4000 floats) to
show what coalescing and shared-memory bank conflicts cost; the copies are
the ceiling each transpose is held against. Here they are catalogue kernels
like the matmuls, run by the same runner, with ``metric="gbs"``.

Shapes reuse :class:`~gemmlab.catalogue.Shape`. The copies and transposes
take an m x n row-major matrix (the transpose writes n x m); ``k`` is not
used (give 1). The vector additions work on m * n elements, so
``Shape(1, n, 1)`` is a vector of length n; ``k`` is not used either. Every
kernel takes any shape.

Bandwidth counts the bytes a kernel must read and write once each
(``KernelSpec.min_elems_moved`` times the item size): 2 m n elements for a
copy or transpose, 3 m n for a vector addition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gemmlab.catalogue import Dim3, KernelSpec, Shape, edge_multiple_of, grid_fits
from gemmlab.problems import Prepared, Problem, poison, random_matrix

if TYPE_CHECKING:
    from gemmlab.catalogue import Point

BRNO = "Brno 2014 lecture (GTX 280)"
MODERN = "gemmlab, for current GPUs (not in the documents)"
FLOATS = ("float32", "float64")
# Tile edges of the tiled kernels and block edges of the one-element-per-thread
# ones. 64 is not the lecture's: on an H200 a 64 x 64 tile moved by 64 x 8
# threads takes the padded transpose from 84% to 92% of the copy ceiling at
# 16384 x 16384 (benchmarks/results/2026-11-21_h200_transpose-explore.json).
TILE_EDGES = (16, 32, 64)
# One thread per element: a B x B block holds at most 1024 threads.
SQUARE_BLOCK_EDGES = (16, 32)
# Threads per block of the 1-D kernels.
THREADS_1D = 256
# Elements each thread of a *_vec4 kernel moves (ELEMS_PER_THREAD in 07_vec4.cu).
VEC4_ELEMS = 4


def thread_rows(tile: int) -> int:
    """Rows of threads in a tiled block: at most 8, so TILE x 8 for the
    lecture's 32 x 32 tile (each thread moves 4 rows) and 64 x 8 for a 64-tile
    (8 rows each: more loads in flight per thread, which is what the 64-tile
    gains); 16 x 4 for a 16-tile. The kernels take it as their ROWS template
    parameter, so this is the one place that chooses it."""
    return min(8, tile // 4)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class TiledSpec(KernelSpec):
    """A tiled kernel templated on <T, TILE, ROWS>: the block edge is TILE, and
    ``thread_rows`` gives ROWS for both the compiler and the launch."""

    thread_rows: Callable[[int], int] = thread_rows

    def template_args(self, dtype: str, block_edge: int) -> str:
        return f"{super().template_args(dtype, block_edge)}, {self.thread_rows(block_edge)}"


# --- problems: inputs, check, library baseline ------------------------------


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


# --- the catalogue entries ---------------------------------------------------


def _tile_grid(s: Shape, b: int) -> Dim3:
    """One block per b x b tile of the input, partial tiles at the edges included."""
    return (_cdiv(s.n, b), _cdiv(s.m, b), 1)


def _grid_1d(elems_per_thread: int) -> Callable[[Shape, int], Dim3]:
    return lambda s, b: (_cdiv(s.m * s.n, THREADS_1D * elems_per_thread), 1, 1)


_BLOCK_1D = lambda s, b: (THREADS_1D, 1, 1)
_SQUARE_BLOCK = lambda s, b: (b, b, 1)
_TILED_BLOCK = lambda s, b: (b, thread_rows(b), 1)
# gridDim.y counts tiles down the m rows of the input.
_ROWS_FIT = grid_fits("m", lambda b: b)
_NO_FLOPS = lambda s: 0
_NO_CGMA = lambda s, b: 0.0
_MATRIX_ELEMS = lambda s: 2 * s.m * s.n
_VECADD_ELEMS = lambda s: 3 * s.m * s.n


def _one_per_thread(kernel_id: str, source: str, problem: Problem, summary: str) -> KernelSpec:
    """copy and transpose_naive: a B x B block, one element per thread; the kernel
    reads B from blockDim, so one build serves every edge."""
    return KernelSpec(
        id=kernel_id,
        source=source,
        function=kernel_id,
        source_doc=BRNO,
        summary=summary,
        dtypes=FLOATS,
        block_edges=SQUARE_BLOCK_EDGES,
        grid=_tile_grid,
        block=_SQUARE_BLOCK,
        constraints=(_ROWS_FIT,),
        flops=_NO_FLOPS,
        min_elems_moved=_MATRIX_ELEMS,
        cgma=_NO_CGMA,
        any_size_alternative=kernel_id,
        problem=problem,
        templated_on_edge=False,
    )


def _tiled(kernel_id: str, source: str, problem: Problem, summary: str, source_doc: str = BRNO) -> TiledSpec:
    """A TILE x TILE tile through shared memory, moved by TILE x thread_rows(TILE) threads."""
    return TiledSpec(
        id=kernel_id,
        source=source,
        function=kernel_id,
        source_doc=source_doc,
        summary=summary,
        dtypes=FLOATS,
        block_edges=TILE_EDGES,
        grid=_tile_grid,
        block=_TILED_BLOCK,
        thread_rows=thread_rows,
        constraints=(edge_multiple_of(4), _ROWS_FIT),
        flops=_NO_FLOPS,
        min_elems_moved=_MATRIX_ELEMS,
        cgma=_NO_CGMA,
        any_size_alternative=kernel_id,
        max_edge=max(TILE_EDGES),
        problem=problem,
    )


def _one_dim(
    kernel_id: str,
    source: str,
    problem: Problem,
    summary: str,
    elems_per_thread: int,
    elems_moved: Callable[[Shape], int],
    source_doc: str,
) -> KernelSpec:
    """A 1-D grid of 256-thread blocks over m * n elements; no block edge."""
    return KernelSpec(
        id=kernel_id,
        source=source,
        function=kernel_id,
        source_doc=source_doc,
        summary=summary,
        dtypes=FLOATS,
        block_edges=(),
        grid=_grid_1d(elems_per_thread),
        block=_BLOCK_1D,
        flops=_NO_FLOPS,
        min_elems_moved=elems_moved,
        cgma=_NO_CGMA,
        any_size_alternative=kernel_id,
        problem=problem,
        templated_on_edge=False,
    )


MEMORY_KERNELS: tuple[KernelSpec, ...] = (
    _one_dim(
        "vecadd", "memory/01_vecadd.cu", VECADD,
        "c = a + b, one element per thread, bounds check: any length", 1, _VECADD_ELEMS, BRNO,
    ),
    _one_per_thread(
        "copy", "memory/02_copy.cu", COPY,
        "copy of an m x n matrix, one element per thread: coalesced reads and writes",
    ),
    _one_per_thread(
        "transpose_naive", "memory/03_transpose_naive.cu", TRANSPOSE,
        "transpose with copy's indexing: coalesced reads, writes m elements apart",
    ),
    _tiled(
        "copy_tiled", "memory/04_copy_tiled.cu", COPY,
        "copy through a shared-memory tile, TILE x TILE/4 threads, 4 rows per thread",
    ),
    _tiled(
        "transpose_tiled", "memory/05_transpose_tiled.cu", TRANSPOSE,
        "transpose through a shared-memory tile: coalesced both ways, bank conflicts on the column read",
    ),
    _tiled(
        "transpose_tiled_padded", "memory/06_transpose_tiled_padded.cu", TRANSPOSE,
        "transpose_tiled with a [TILE][TILE+1] tile: the padding column removes the bank conflicts",
    ),
    _tiled(
        "transpose_tiled_diagonal", "memory/08_transpose_tiled_diagonal.cu", TRANSPOSE,
        "transpose_tiled_padded with blocks renumbered along diagonals against DRAM partition camping",
        MODERN,
    ),
    _one_dim(
        "copy_vec4", "memory/07_vec4.cu", COPY,
        "copy with 16-byte loads and stores (float4 / double2), 4 elements per thread, any length",
        VEC4_ELEMS, _MATRIX_ELEMS, MODERN,
    ),
    _one_dim(
        "vecadd_vec4", "memory/07_vec4.cu", VECADD,
        "vecadd with 16-byte loads and stores (float4 / double2), 4 elements per thread, any length",
        VEC4_ELEMS, _VECADD_ELEMS, MODERN,
    ),
    _tiled(
        "transpose_tiled_vec4", "memory/07_vec4.cu", TRANSPOSE,
        "transpose_tiled_padded reading its tile with 16-byte loads (scalar where rows are unaligned)",
        MODERN,
    ),
)  # fmt: skip


# --- the copy ceiling and the bandwidth table -------------------------------


def measure_copy_ceiling(nbytes: int = 4 * 2**30, reps: int = 20, device_index: int = 0) -> float:
    """The device-to-device copy rate in GB/s, bytes read + written (2 x nbytes per copy).

    A cudaMemcpy of ``nbytes`` (cut to what fits in free memory, two buffers
    and headroom) is timed with CUDA events, ``reps`` times after a warm-up;
    the median is returned. This is the practical ceiling a memory-bound kernel
    can reach, usually well under the datasheet figure.
    """
    from gemmlab import gpu
    from gemmlab.run import MEMORY_HEADROOM
    from gemmlab.timing import Timing, gbytes_per_s

    cp = gpu.cupy()
    free = gpu.describe(device_index).free_bytes
    size = min(nbytes, (free - MEMORY_HEADROOM) // 2) // 256 * 256
    if size <= 0 or reps < 1:
        raise ValueError(f"nothing to time: {size} bytes fit in free memory, {reps} repetitions asked")
    with cp.cuda.Device(device_index):
        src = cp.empty(size, dtype=cp.uint8)
        dst = cp.empty_like(src)
        src.fill(1)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        samples = []
        for i in range(reps + 1):
            start.record()
            dst.data.copy_from_device_async(src.data, size)
            end.record()
            end.synchronize()
            if i:  # the first copy is the warm-up
                samples.append(cp.cuda.get_elapsed_time(start, end))
    return gbytes_per_s(2 * size, Timing.of(samples).median_ms)


def datasheet_bandwidth(device_index: int = 0) -> float | None:
    """The memory bandwidth the clocks and bus width promise, in GB/s (None if unreadable)."""
    from gemmlab import gpu

    return gpu.describe(device_index).peak_bandwidth_gbs


class BandwidthResult(Protocol):
    """What :func:`bandwidth_table` reads from a result (a :class:`~gemmlab.run.RunResult` fits)."""

    kernel: str
    m: int
    n: int
    block_edge: int
    dtype: str
    gbytes_per_s: float


def bandwidth_table(results: Iterable[BandwidthResult], ceiling_gbs: float, datasheet_gbs: float | None) -> list[dict]:
    """One row per result: its GB/s, and that as a fraction of the measured copy
    ceiling and of the datasheet bandwidth (None when the datasheet figure is)."""
    if not ceiling_gbs > 0:
        raise ValueError(f"the copy ceiling must be positive, got {ceiling_gbs}")
    return [
        {
            "kernel": r.kernel,
            "shape": f"{r.m}x{r.n}",
            "block_edge": r.block_edge,
            "dtype": r.dtype,
            "gbytes_per_s": r.gbytes_per_s,
            "fraction_of_ceiling": r.gbytes_per_s / ceiling_gbs,
            "fraction_of_datasheet": r.gbytes_per_s / datasheet_gbs if datasheet_gbs else None,
        }
        for r in results
    ]
